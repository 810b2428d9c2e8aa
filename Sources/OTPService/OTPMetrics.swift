import CoreMetrics
import Metrics

/// The send→verify funnel as swift-metrics counters, by channel, provider and calling code
/// (docs/otp.md lists them). Pumping shows as many `otp_codes_sent_total` to one calling code
/// with few `otp_codes_verified_total`.
///
/// The counters go to `factory` (the process's bootstrapped `MetricsSystem` by default; tests
/// pass their own Prometheus registry's factory).
public struct OTPMetrics: Sendable {
    let factory: (any MetricsFactory)?

    /// - Parameter factory: nil uses the globally bootstrapped metrics system.
    public init(factory: (any MetricsFactory)? = nil) {
        self.factory = factory
    }

    private func increment(_ label: String, _ dimensions: [(String, String)]) {
        if let factory {
            Counter(label: label, dimensions: dimensions, factory: factory).increment()
        } else {
            Counter(label: label, dimensions: dimensions).increment()
        }
    }

    private func gauge(_ label: String, _ value: Double) {
        if let factory {
            Gauge(label: label, factory: factory).record(value)
        } else {
            Gauge(label: label).record(value)
        }
    }

    /// The outbox's backlog (``OTPService/recordOutboxBacklog()``): `otp_outbox_pending_messages`
    /// and `otp_outbox_oldest_pending_age_seconds`.
    func outbox(pending: Int, oldestAge: Double) {
        gauge("otp_outbox_pending_messages", Double(pending))
        gauge("otp_outbox_oldest_pending_age_seconds", oldestAge)
    }

    private static func code(_ callingCode: String) -> String { callingCode.isEmpty ? "none" : callingCode }

    func started(channel: Channel, callingCode: String, test: Bool) {
        increment(
            "otp_codes_started_total",
            [
                ("channel", channel.rawValue), ("calling_code", Self.code(callingCode)),
                ("test", test ? "true" : "false"),
            ]
        )
    }

    func resent(channel: Channel, callingCode: String) {
        increment("otp_codes_resent_total", [("channel", channel.rawValue), ("calling_code", Self.code(callingCode))])
    }

    func refused(_ reason: String, channel: Channel, callingCode: String) {
        increment(
            "otp_starts_refused_total",
            [("channel", channel.rawValue), ("calling_code", Self.code(callingCode)), ("reason", reason)]
        )
    }

    func verified(channel: Channel, callingCode: String) {
        increment(
            "otp_codes_verified_total",
            [("channel", channel.rawValue), ("calling_code", Self.code(callingCode))]
        )
    }

    func wrongCode(channel: Channel) {
        increment("otp_wrong_codes_total", [("channel", channel.rawValue)])
    }

    /// A destination locked for too many wrong codes.
    func locked(channel: Channel) {
        increment("otp_lockouts_total", [("channel", channel.rawValue)])
    }

    func sent(channel: Channel, provider: String, callingCode: String) {
        increment(
            "otp_codes_sent_total",
            [("channel", channel.rawValue), ("provider", provider), ("calling_code", Self.code(callingCode))]
        )
    }

    func sendFailed(channel: Channel, provider: String, callingCode: String, retryable: Bool) {
        increment(
            "otp_send_attempts_failed_total",
            [
                ("channel", channel.rawValue), ("provider", provider), ("calling_code", Self.code(callingCode)),
                ("retryable", retryable ? "true" : "false"),
            ]
        )
    }

    func failedOver(channel: Channel, from: String, to: String) {
        increment("otp_failovers_total", [("channel", channel.rawValue), ("from", from), ("to", to)])
    }

    func deadLettered(channel: Channel, provider: String, callingCode: String) {
        increment(
            "otp_codes_failed_total",
            [("channel", channel.rawValue), ("provider", provider), ("calling_code", Self.code(callingCode))]
        )
    }

    func reported(delivered: Bool) {
        increment(delivered ? "otp_codes_delivered_total" : "otp_codes_undelivered_total", [])
    }
}
