import AuthText
import AuthCrypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A configuration value of the otp-dispatch service that is missing or malformed; start-up
/// stops with this message.
public struct OTPConfigurationError: Error, Sendable, CustomStringConvertible {
    /// The environment variable.
    public var variable: String
    /// What is wrong with it.
    public var problem: String

    public var description: String { "\(variable): \(problem)" }
}

/// Which provider sends a channel's messages.
public enum ProviderKind: String, Sendable, CaseIterable {
    /// The message in the service log (local runs).
    case log
    /// A signed JSON POST to `AUTH_OTP_WEBHOOK_URL`.
    case webhook
    /// Twilio Programmable Messaging (SMS only).
    case twilio
}

/// Everything the otp-dispatch service needs besides its database: the secret codes are keyed
/// with, every limit and window, providers, templates, and the dispatcher's timing.
/// docs/otp.md lists the environment variables with their defaults and ranges.
public struct OTPServiceConfiguration: Sendable {
    /// `AUTH_OTP_SECRET`: the server secret the code-MAC key is derived from.
    public var secret: [UInt8]
    /// The schema holding the service's tables (`otp`; tests use their own).
    public var schema: String = "otp"

    // MARK: Codes
    /// Digits of a code. 6.
    public var codeDigits: Int = 6
    /// Lifetime of a code (from Start or the Resend that issued it). 10 minutes.
    public var codeLifetime: Duration = .seconds(600)
    /// Wrong codes a destination may enter within ``attemptWindow`` (over all its
    /// verifications); the last one kills the verification and locks the destination. 5.
    public var maxWrongCodes: Int = 5
    /// The window wrong codes are counted in. 15 minutes.
    public var attemptWindow: Duration = .seconds(900)
    /// How long a destination stays locked after its last allowed wrong code. 15 minutes.
    public var lockout: Duration = .seconds(900)
    /// Wrong codes for a destination since its last right one, with no window, after which it
    /// answers `factor_locked` until an operator unlocks it (NIST SP 800-63B's
    /// consecutive-failure limit). 100.
    public var maxConsecutiveFailures: Int = 100

    // MARK: Resends
    /// First resend allowed this long after Start. 60 s.
    public var firstResendDelay: Duration = .seconds(60)
    /// Later resends allowed this long after the previous send. 120 s.
    public var resendInterval: Duration = .seconds(120)
    /// Resends per destination within ``resendWindow``. 3.
    public var maxResends: Int = 3
    /// 15 minutes.
    public var resendWindow: Duration = .seconds(900)

    // MARK: Abuse limits
    /// Starts per destination per hour. 10.
    public var startsPerDestinationPerHour: Int = 10
    /// Starts per client IP per hour. 100.
    public var startsPerIPPerHour: Int = 100
    /// SMS only to these calling codes (empty: any).
    public var smsAllowedCallingCodes: Set<String> = []
    /// SMS never to these calling codes.
    public var smsDeniedCallingCodes: Set<String> = []
    /// SMS-pumping guard: looked at only when more than this many SMS codes went to a calling
    /// code in the last hour. 100.
    public var pumpingMinimumSent: Int = 100
    /// SMS-pumping guard: new SMS starts to the calling code are refused while fewer than this
    /// percentage of the last hour's codes were verified. 20.
    public var pumpingMinimumVerifiedPercent: Int = 20
    /// Destinations with fixed codes that pass every start and resend limit and are never sent
    /// (`AUTH_OTP_TEST_DESTINATIONS`); their wrong codes count and lock like any other. Empty by
    /// default; in production only with `AUTH_OTP_ALLOW_TEST_DESTINATIONS=true`.
    public var testDestinations: [String: String] = [:]

    // MARK: Messages
    /// The app's name in the messages. "Auth".
    public var appName: String = "Auth"
    /// The domain of the SMS autofill line (`@domain #code`); nil: no such line.
    public var smsDomain: String?

    // MARK: Providers
    public var smsProvider: ProviderKind = .log
    public var emailProvider: ProviderKind = .log
    /// Takes a message over when the primary failed past its retry budget.
    public var smsFallbackProvider: ProviderKind?
    public var emailFallbackProvider: ProviderKind?
    public var webhookURL: String?
    /// The HMAC key of the webhook signature is the UTF-8 bytes of this string.
    public var webhookSecret: String?
    public var twilioAccountSID: String?
    public var twilioAuthToken: String?
    /// The sender: a phone number or a Messaging Service SID (`MG…`).
    public var twilioFrom: String?
    public var twilioBaseURL: String = "https://api.twilio.com"
    /// Timeout of one provider HTTP request (connect and whole request). 10 s.
    public var httpTimeout: Duration = .seconds(10)

    // MARK: Dispatcher
    /// Concurrent sends per process. 8. 0: this process serves the API and sends nothing
    /// (other replicas' dispatchers send its messages).
    public var dispatchWorkers: Int = 8
    /// Attempts per provider before failover or dead letter. 5.
    public var deliveryAttempts: Int = 5
    /// First retry delay; doubles per attempt up to ``retryBackoffLimit``, ×0.5–1.5 jitter. 1 s.
    public var retryBackoff: Duration = .seconds(1)
    /// 60 s.
    public var retryBackoffLimit: Duration = .seconds(60)
    /// How long a claim lasts: a message claimed by a worker that died is claimed again after
    /// this. 30 s.
    public var claimLease: Duration = .seconds(30)
    /// The periodic sweep behind LISTEN/NOTIFY. 5 s.
    public var sweepInterval: Duration = .seconds(5)

    // MARK: Purge
    /// How often the purge runs. 1 hour.
    public var purgeInterval: Duration = .seconds(3_600)
    /// Verifications expired, and messages finished, longer ago than this are deleted. 1 day.
    public var purgeRetention: Duration = .seconds(86_400)

    /// `AUTH_OTP_METRICS_PORT`: the Prometheus admin port; nil: not served.
    public var metricsPort: Int?

    /// A configuration with the defaults documented on each property.
    public init(secret: [UInt8]) {
        self.secret = secret
    }

    /// Reads the configuration from `AUTH_OTP_*` environment variables (docs/otp.md).
    ///
    /// - Throws: ``OTPConfigurationError`` naming the variable.
    public init(environment variables: [String: String]) throws {
        func string(_ name: String) -> String? {
            guard let value = variables[name]?.trimmingWhitespace(), !value.isEmpty else { return nil }
            return value
        }
        func integer(_ name: String, _ range: ClosedRange<Int>, default fallback: Int, unit: String = "") throws -> Int {
            guard let text = string(name) else { return fallback }
            guard let value = Int(text), range.contains(value) else {
                throw OTPConfigurationError(
                    variable: name,
                    problem: "must be a whole number\(unit) in \(range.lowerBound)...\(range.upperBound)"
                )
            }
            return value
        }
        func seconds(_ name: String, _ range: ClosedRange<Int>, default fallback: Duration) throws -> Duration {
            .seconds(try integer(name, range, default: Int(fallback.components.seconds), unit: " of seconds"))
        }
        func milliseconds(_ name: String, _ range: ClosedRange<Int>, default fallback: Duration) throws -> Duration {
            let (s, atto) = fallback.components
            let ms = Int(s) * 1000 + Int(atto / 1_000_000_000_000_000)
            return .milliseconds(try integer(name, range, default: ms, unit: " of milliseconds"))
        }
        func provider(_ name: String, default fallback: ProviderKind?) throws -> ProviderKind? {
            guard let text = string(name) else { return fallback }
            guard let kind = ProviderKind(rawValue: text) else {
                throw OTPConfigurationError(variable: name, problem: "must be one of log, webhook, twilio")
            }
            return kind
        }
        func callingCodes(_ name: String) throws -> Set<String> {
            guard let text = string(name) else { return [] }
            var codes: Set<String> = []
            for part in text.split(separator: ",") {
                var code = part.trimmingWhitespace()
                if code.hasPrefix("+") { code.removeFirst() }
                guard (1...3).contains(code.count), code.allSatisfy({ $0.isASCII && $0.isNumber }), code.first != "0" else {
                    throw OTPConfigurationError(
                        variable: name,
                        problem: "must be a comma-separated list of country calling codes such as 91,44,1"
                    )
                }
                codes.insert(code)
            }
            return codes
        }

        guard let secretText = string("AUTH_OTP_SECRET") else {
            throw OTPConfigurationError(
                variable: "AUTH_OTP_SECRET",
                problem:
                    "is required: standard base64 of at least 32 random bytes (`openssl rand -base64 32`), the same "
                    + "for every replica; scripts/run-local.sh keeps one in .data/otp-secret"
            )
        }
        guard let secret = Base64.decode(secretText.trimmingWhitespace()), secret.count >= 32
        else {
            throw OTPConfigurationError(
                variable: "AUTH_OTP_SECRET",
                problem: "must be standard base64 (with = padding) of at least 32 bytes"
            )
        }
        self.init(secret: secret)

        codeLifetime = try seconds("AUTH_OTP_CODE_TTL_SECONDS", 60...86_400, default: codeLifetime)
        maxWrongCodes = try integer("AUTH_OTP_MAX_WRONG_CODES", 1...100, default: maxWrongCodes)
        attemptWindow = try seconds("AUTH_OTP_ATTEMPT_WINDOW_SECONDS", 60...86_400, default: attemptWindow)
        lockout = try seconds("AUTH_OTP_LOCKOUT_SECONDS", 1...86_400, default: lockout)
        maxConsecutiveFailures = try integer("AUTH_OTP_MAX_CONSECUTIVE_FAILURES", 1...100_000, default: maxConsecutiveFailures)
        firstResendDelay = try seconds("AUTH_OTP_RESEND_AFTER_SECONDS", 0...3_600, default: firstResendDelay)
        resendInterval = try seconds("AUTH_OTP_RESEND_INTERVAL_SECONDS", 0...3_600, default: resendInterval)
        maxResends = try integer("AUTH_OTP_MAX_RESENDS", 0...100, default: maxResends)
        resendWindow = try seconds("AUTH_OTP_RESEND_WINDOW_SECONDS", 60...86_400, default: resendWindow)
        startsPerDestinationPerHour = try integer(
            "AUTH_OTP_STARTS_PER_DESTINATION_PER_HOUR", 1...100_000, default: startsPerDestinationPerHour)
        startsPerIPPerHour = try integer("AUTH_OTP_STARTS_PER_IP_PER_HOUR", 1...1_000_000, default: startsPerIPPerHour)
        smsAllowedCallingCodes = try callingCodes("AUTH_OTP_SMS_ALLOWED_CALLING_CODES")
        smsDeniedCallingCodes = try callingCodes("AUTH_OTP_SMS_DENIED_CALLING_CODES")
        pumpingMinimumSent = try integer("AUTH_OTP_PUMPING_MIN_SENT", 1...1_000_000, default: pumpingMinimumSent)
        pumpingMinimumVerifiedPercent = try integer(
            "AUTH_OTP_PUMPING_MIN_VERIFIED_PERCENT", 0...100, default: pumpingMinimumVerifiedPercent)
        // Issue 19, item 3: production refuses what only a developer's machine may have.
        let production = string("AUTH_ENVIRONMENT") == "production"
        if let text = string("AUTH_OTP_TEST_DESTINATIONS") {
            if production {
                let allowed = string("AUTH_OTP_ALLOW_TEST_DESTINATIONS")
                guard allowed == "true" else {
                    throw OTPConfigurationError(
                        variable: "AUTH_OTP_TEST_DESTINATIONS",
                        problem:
                            "is refused in production unless AUTH_OTP_ALLOW_TEST_DESTINATIONS=true (fixed codes sign in "
                            + "to these accounts; meant for app-store review accounts only)"
                    )
                }
            }
            var destinations: [String: String] = [:]
            for entry in text.split(separator: ",") {
                let parts = entry.split(separator: "=", maxSplits: 1).map { $0.trimmingWhitespace() }
                guard parts.count == 2, let destination = Destination(parsing: parts[0]),
                    parts[1].count == codeDigits, parts[1].allSatisfy({ $0.isASCII && $0.isNumber })
                else {
                    throw OTPConfigurationError(
                        variable: "AUTH_OTP_TEST_DESTINATIONS",
                        problem:
                            "must be a comma-separated list of destination=code, each an E.164 number or an email "
                            + "address and a \(codeDigits)-digit code, e.g. +15550100001=123456,review@example.com=654321"
                    )
                }
                destinations[destination.normalized] = parts[1]
            }
            testDestinations = destinations
        }

        if let name = string("AUTH_OTP_APP_NAME") {
            guard name.count <= 64, !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            else {
                throw OTPConfigurationError(variable: "AUTH_OTP_APP_NAME", problem: "must be 1-64 characters without control characters")
            }
            appName = name
        }
        if let domain = string("AUTH_OTP_SMS_DOMAIN") {
            let allowed = domain.unicodeScalars.allSatisfy {
                ($0.value >= 0x61 && $0.value <= 0x7A) || ($0.value >= 0x30 && $0.value <= 0x39) || $0 == "-" || $0 == "."
            }
            guard allowed, domain.contains("."), domain.count <= 253 else {
                throw OTPConfigurationError(
                    variable: "AUTH_OTP_SMS_DOMAIN",
                    problem: "must be a lower-case host name such as example.com (the app's associated domain)"
                )
            }
            smsDomain = domain
        }

        smsProvider = try provider("AUTH_OTP_SMS_PROVIDER", default: .log) ?? .log
        emailProvider = try provider("AUTH_OTP_EMAIL_PROVIDER", default: .log) ?? .log
        smsFallbackProvider = try provider("AUTH_OTP_SMS_FALLBACK_PROVIDER", default: nil)
        emailFallbackProvider = try provider("AUTH_OTP_EMAIL_FALLBACK_PROVIDER", default: nil)
        webhookURL = string("AUTH_OTP_WEBHOOK_URL")
        webhookSecret = variables["AUTH_OTP_WEBHOOK_SECRET"].flatMap { $0.isEmpty ? nil : $0 }
        twilioAccountSID = string("AUTH_OTP_TWILIO_ACCOUNT_SID")
        twilioAuthToken = string("AUTH_OTP_TWILIO_AUTH_TOKEN")
        twilioFrom = string("AUTH_OTP_TWILIO_FROM")
        if let base = string("AUTH_OTP_TWILIO_BASE_URL") {
            guard let url = URL(string: base), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw OTPConfigurationError(variable: "AUTH_OTP_TWILIO_BASE_URL", problem: "must be an http(s) URL")
            }
            twilioBaseURL = base.hasSuffix("/") ? String(base.dropLast()) : base
        }
        httpTimeout = try milliseconds("AUTH_OTP_HTTP_TIMEOUT_MS", 100...120_000, default: httpTimeout)

        if emailProvider == .twilio || emailFallbackProvider == .twilio {
            throw OTPConfigurationError(
                variable: emailProvider == .twilio ? "AUTH_OTP_EMAIL_PROVIDER" : "AUTH_OTP_EMAIL_FALLBACK_PROVIDER",
                problem: "twilio sends SMS only; use log or webhook for email"
            )
        }
        if production {
            for (variable, kind) in [
                ("AUTH_OTP_SMS_PROVIDER", smsProvider), ("AUTH_OTP_EMAIL_PROVIDER", emailProvider),
                ("AUTH_OTP_SMS_FALLBACK_PROVIDER", smsFallbackProvider),
                ("AUTH_OTP_EMAIL_FALLBACK_PROVIDER", emailFallbackProvider),
            ] where kind == .log {
                throw OTPConfigurationError(
                    variable: variable,
                    problem:
                        "must not be log in production (log is the default): it writes codes and their destinations "
                        + "to the log, where anyone who reads it can sign in as anyone; use webhook or twilio"
                )
            }
            if URL(string: twilioBaseURL)?.scheme?.lowercased() != "https" {
                throw OTPConfigurationError(variable: "AUTH_OTP_TWILIO_BASE_URL", problem: "must be an https URL in production")
            }
        }
        let schemes = production ? ["https"] : ["http", "https"]
        let used = [smsProvider, emailProvider] + [smsFallbackProvider, emailFallbackProvider].compactMap { $0 }
        if used.contains(.webhook) {
            guard let text = webhookURL, let url = URL(string: text), schemes.contains(url.scheme?.lowercased() ?? ""),
                url.host != nil
            else {
                throw OTPConfigurationError(
                    variable: "AUTH_OTP_WEBHOOK_URL",
                    problem: "is required with the webhook provider: an \(production ? "https URL (in production)" : "http(s) URL")"
                )
            }
            guard let secret = webhookSecret else {
                throw OTPConfigurationError(
                    variable: "AUTH_OTP_WEBHOOK_SECRET",
                    problem: "is required with the webhook provider (any string; the receiver checks X-Auth-Signature with it)"
                )
            }
            if production, secret.utf8.count < 32 {
                throw OTPConfigurationError(
                    variable: "AUTH_OTP_WEBHOOK_SECRET",
                    problem: "must be at least 32 bytes in production (`openssl rand -base64 32`)"
                )
            }
        }
        if used.contains(.twilio) {
            for (name, value) in [
                ("AUTH_OTP_TWILIO_ACCOUNT_SID", twilioAccountSID), ("AUTH_OTP_TWILIO_AUTH_TOKEN", twilioAuthToken),
                ("AUTH_OTP_TWILIO_FROM", twilioFrom),
            ] where value == nil {
                throw OTPConfigurationError(variable: name, problem: "is required with the twilio provider")
            }
        }

        dispatchWorkers = try integer("AUTH_OTP_DISPATCH_WORKERS", 0...256, default: dispatchWorkers)
        deliveryAttempts = try integer("AUTH_OTP_DELIVERY_ATTEMPTS", 1...100, default: deliveryAttempts)
        retryBackoff = try milliseconds("AUTH_OTP_RETRY_BACKOFF_MS", 1...3_600_000, default: retryBackoff)
        retryBackoffLimit = try milliseconds("AUTH_OTP_RETRY_BACKOFF_MAX_MS", 1...86_400_000, default: retryBackoffLimit)
        claimLease = try seconds("AUTH_OTP_CLAIM_LEASE_SECONDS", 1...3_600, default: claimLease)
        sweepInterval = try milliseconds("AUTH_OTP_SWEEP_INTERVAL_MS", 10...3_600_000, default: sweepInterval)
        guard claimLease > httpTimeout else {
            throw OTPConfigurationError(
                variable: "AUTH_OTP_CLAIM_LEASE_SECONDS",
                problem: "must be longer than the provider timeout (AUTH_OTP_HTTP_TIMEOUT_MS), or a slow send is sent twice"
            )
        }

        purgeInterval = try seconds("AUTH_OTP_PURGE_INTERVAL_SECONDS", 60...604_800, default: purgeInterval)
        purgeRetention = try seconds("AUTH_OTP_PURGE_RETENTION_SECONDS", 3_600...31_536_000, default: purgeRetention)
        if let text = string("AUTH_OTP_METRICS_PORT") {
            guard let port = Int(text), (0...65_535).contains(port) else {
                throw OTPConfigurationError(
                    variable: "AUTH_OTP_METRICS_PORT",
                    problem: "must be a whole number in 0...65535 (0: any free port, logged at start), or unset for none"
                )
            }
            metricsPort = port
        }
    }

    /// The provider kinds of `channel`: the primary, then the fallback if any.
    func providers(for channel: Channel) -> [ProviderKind] {
        switch channel {
        case .sms: [smsProvider] + (smsFallbackProvider.map { [$0] } ?? [])
        case .email: [emailProvider] + (emailFallbackProvider.map { [$0] } ?? [])
        }
    }
}
