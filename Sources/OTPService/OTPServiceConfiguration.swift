import AuthConfiguration
import AuthCrypto
import AuthText

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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
    /// Where Twilio posts each message's status (`StatusCallback`): the gateway's
    /// `{AUTH_PUBLIC_URL}/v1/hooks/twilio/status`. Unset: no callback is asked for.
    public var twilioStatusCallbackURL: String?
    /// Timeout of one provider HTTP request (connect and whole request). 10 s.
    public var httpTimeout: Duration = .seconds(10)

    // MARK: Dispatcher
    /// Concurrent sends per process. 8. 0: this process serves the API and sends nothing
    /// (other replicas' dispatchers send its messages).
    public var dispatchWorkers: Int = 8
    /// Messages a worker claims in one statement, sends at once and records in one statement
    /// (`AUTH_OTP_CLAIM_BATCH`). 16. A provider gets at most `dispatchWorkers × claimBatchSize`
    /// requests at once from one process.
    public var claimBatchSize: Int = 16
    /// Requests one provider gets at once from this process (`AUTH_OTP_PROVIDER_CONCURRENCY`).
    /// 64. With fewer than `dispatchWorkers × claimBatchSize` (128) a claimed batch may wait for
    /// permits: ``sendRounds`` provider timeouts must fit in the claim lease.
    public var providerConcurrency: Int = 64

    /// How many provider requests, one after another, the last message of a claimed batch may
    /// wait for when every worker's batch goes to one provider.
    public var sendRounds: Int {
        (dispatchWorkers * claimBatchSize + providerConcurrency - 1) / providerConcurrency
    }
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

    /// A configuration with the defaults documented on each property.
    public init(secret: [UInt8]) {
        self.secret = secret
    }

    /// Reads the configuration from `AUTH_OTP_*` environment variables (docs/otp.md).
    ///
    /// - Throws: ``ConfigurationError`` naming the variable.
    public init(environment variables: [String: String]) throws {
        let reader = EnvironmentReader(variables: variables)
        func provider(_ name: String, default fallback: ProviderKind?) throws -> ProviderKind? {
            guard let text = reader.string(name) else { return fallback }
            guard let kind = ProviderKind(rawValue: text) else {
                throw ConfigurationError(variable: name, problem: "must be one of log, webhook, twilio")
            }
            return kind
        }
        func callingCodes(_ name: String) throws -> Set<String> {
            guard let text = reader.string(name) else { return [] }
            var codes: Set<String> = []
            for part in text.split(separator: ",") {
                var code = part.trimmingWhitespace()
                if code.hasPrefix("+") { code.removeFirst() }
                guard (1...3).contains(code.count), code.allSatisfy({ $0.isASCII && $0.isNumber }), code.first != "0"
                else {
                    throw ConfigurationError(
                        variable: name,
                        problem: "must be a comma-separated list of country calling codes such as 91,44,1"
                    )
                }
                codes.insert(code)
            }
            return codes
        }

        guard let secretText = reader.string("AUTH_OTP_SECRET") else {
            throw ConfigurationError(
                variable: "AUTH_OTP_SECRET",
                problem:
                    "is required: standard base64 of at least 32 random bytes (`openssl rand -base64 32`), the same "
                    + "for every replica; scripts/run-local.sh keeps one in .data/otp-secret"
            )
        }
        guard let secret = Base64.decode(secretText.trimmingWhitespace()), secret.count >= 32
        else {
            throw ConfigurationError(
                variable: "AUTH_OTP_SECRET",
                problem: "must be standard base64 (with = padding) of at least 32 bytes"
            )
        }
        self.init(secret: secret)

        codeLifetime = try reader.seconds("AUTH_OTP_CODE_TTL_SECONDS", default: codeLifetime, in: 60...86_400)
        maxWrongCodes = try reader.integer("AUTH_OTP_MAX_WRONG_CODES", default: maxWrongCodes, in: 1...100)
        attemptWindow = try reader.seconds("AUTH_OTP_ATTEMPT_WINDOW_SECONDS", default: attemptWindow, in: 60...86_400)
        lockout = try reader.seconds("AUTH_OTP_LOCKOUT_SECONDS", default: lockout, in: 1...86_400)
        maxConsecutiveFailures = try reader.integer(
            "AUTH_OTP_MAX_CONSECUTIVE_FAILURES",
            default: maxConsecutiveFailures,
            in: 1...100_000
        )
        firstResendDelay = try reader.seconds("AUTH_OTP_RESEND_AFTER_SECONDS", default: firstResendDelay, in: 0...3_600)
        resendInterval = try reader.seconds("AUTH_OTP_RESEND_INTERVAL_SECONDS", default: resendInterval, in: 0...3_600)
        maxResends = try reader.integer("AUTH_OTP_MAX_RESENDS", default: maxResends, in: 0...100)
        resendWindow = try reader.seconds("AUTH_OTP_RESEND_WINDOW_SECONDS", default: resendWindow, in: 60...86_400)
        startsPerDestinationPerHour = try reader.integer(
            "AUTH_OTP_STARTS_PER_DESTINATION_PER_HOUR",
            default: startsPerDestinationPerHour,
            in: 1...100_000
        )
        startsPerIPPerHour = try reader.integer(
            "AUTH_OTP_STARTS_PER_IP_PER_HOUR",
            default: startsPerIPPerHour,
            in: 1...1_000_000
        )
        smsAllowedCallingCodes = try callingCodes("AUTH_OTP_SMS_ALLOWED_CALLING_CODES")
        smsDeniedCallingCodes = try callingCodes("AUTH_OTP_SMS_DENIED_CALLING_CODES")
        pumpingMinimumSent = try reader.integer(
            "AUTH_OTP_PUMPING_MIN_SENT",
            default: pumpingMinimumSent,
            in: 1...1_000_000
        )
        pumpingMinimumVerifiedPercent = try reader.integer(
            "AUTH_OTP_PUMPING_MIN_VERIFIED_PERCENT",
            default: pumpingMinimumVerifiedPercent,
            in: 0...100
        )
        // Issue 19, item 3: production refuses what only a developer's machine may have.
        let production = try reader.environment() == .production
        if let text = reader.string("AUTH_OTP_TEST_DESTINATIONS") {
            if production {
                let allowed = reader.string("AUTH_OTP_ALLOW_TEST_DESTINATIONS")
                guard allowed == "true" else {
                    throw ConfigurationError(
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
                    throw ConfigurationError(
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

        if let name = reader.string("AUTH_OTP_APP_NAME") {
            guard name.count <= 64, !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            else {
                throw ConfigurationError(
                    variable: "AUTH_OTP_APP_NAME",
                    problem: "must be 1-64 characters without control characters"
                )
            }
            appName = name
        }
        if let domain = reader.string("AUTH_OTP_SMS_DOMAIN") {
            let allowed = domain.unicodeScalars.allSatisfy {
                ($0.value >= 0x61 && $0.value <= 0x7A) || ($0.value >= 0x30 && $0.value <= 0x39) || $0 == "-"
                    || $0 == "."
            }
            guard allowed, domain.contains("."), domain.count <= 253 else {
                throw ConfigurationError(
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
        webhookURL = reader.string("AUTH_OTP_WEBHOOK_URL")
        webhookSecret = variables["AUTH_OTP_WEBHOOK_SECRET"].flatMap { $0.isEmpty ? nil : $0 }
        twilioAccountSID = reader.string("AUTH_OTP_TWILIO_ACCOUNT_SID")
        twilioAuthToken = reader.string("AUTH_OTP_TWILIO_AUTH_TOKEN")
        twilioFrom = reader.string("AUTH_OTP_TWILIO_FROM")
        if let base = reader.string("AUTH_OTP_TWILIO_BASE_URL") {
            guard let url = URL(string: base), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw ConfigurationError(variable: "AUTH_OTP_TWILIO_BASE_URL", problem: "must be an http(s) URL")
            }
            twilioBaseURL = base.hasSuffix("/") ? String(base.dropLast()) : base
        }
        if let callback = reader.string("AUTH_OTP_TWILIO_STATUS_CALLBACK_URL") {
            guard let url = URL(string: callback), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw ConfigurationError(
                    variable: "AUTH_OTP_TWILIO_STATUS_CALLBACK_URL",
                    problem: "must be an http(s) URL"
                )
            }
            twilioStatusCallbackURL = callback
        }
        httpTimeout = try reader.milliseconds("AUTH_OTP_HTTP_TIMEOUT_MS", default: httpTimeout, in: 100...120_000)

        if emailProvider == .twilio || emailFallbackProvider == .twilio {
            throw ConfigurationError(
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
                throw ConfigurationError(
                    variable: variable,
                    problem:
                        "must not be log in production (log is the default): it writes codes and their destinations "
                        + "to the log, where anyone who reads it can sign in as anyone; use webhook or twilio"
                )
            }
            if URL(string: twilioBaseURL)?.scheme?.lowercased() != "https" {
                throw ConfigurationError(
                    variable: "AUTH_OTP_TWILIO_BASE_URL",
                    problem: "must be an https URL in production"
                )
            }
        }
        let schemes = production ? ["https"] : ["http", "https"]
        let used = [smsProvider, emailProvider] + [smsFallbackProvider, emailFallbackProvider].compactMap { $0 }
        if used.contains(.webhook) {
            guard let text = webhookURL, let url = URL(string: text), schemes.contains(url.scheme?.lowercased() ?? ""),
                url.host != nil
            else {
                throw ConfigurationError(
                    variable: "AUTH_OTP_WEBHOOK_URL",
                    problem:
                        "is required with the webhook provider: an \(production ? "https URL (in production)" : "http(s) URL")"
                )
            }
            guard let secret = webhookSecret else {
                throw ConfigurationError(
                    variable: "AUTH_OTP_WEBHOOK_SECRET",
                    problem:
                        "is required with the webhook provider (any string; the receiver checks X-Auth-Signature with it)"
                )
            }
            if production, secret.utf8.count < 32 {
                throw ConfigurationError(
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
                throw ConfigurationError(variable: name, problem: "is required with the twilio provider")
            }
        }

        dispatchWorkers = try reader.integer("AUTH_OTP_DISPATCH_WORKERS", default: dispatchWorkers, in: 0...256)
        claimBatchSize = try reader.integer("AUTH_OTP_CLAIM_BATCH", default: claimBatchSize, in: 1...256)
        providerConcurrency = try reader.integer(
            "AUTH_OTP_PROVIDER_CONCURRENCY",
            default: providerConcurrency,
            in: 1...1_024
        )
        deliveryAttempts = try reader.integer("AUTH_OTP_DELIVERY_ATTEMPTS", default: deliveryAttempts, in: 1...100)
        retryBackoff = try reader.milliseconds("AUTH_OTP_RETRY_BACKOFF_MS", default: retryBackoff, in: 1...3_600_000)
        retryBackoffLimit = try reader.milliseconds(
            "AUTH_OTP_RETRY_BACKOFF_MAX_MS",
            default: retryBackoffLimit,
            in: 1...86_400_000
        )
        claimLease = try reader.seconds("AUTH_OTP_CLAIM_LEASE_SECONDS", default: claimLease, in: 1...3_600)
        sweepInterval = try reader.milliseconds(
            "AUTH_OTP_SWEEP_INTERVAL_MS",
            default: sweepInterval,
            in: 10...3_600_000
        )
        guard claimLease > httpTimeout * max(1, sendRounds) else {
            throw ConfigurationError(
                variable: "AUTH_OTP_CLAIM_LEASE_SECONDS",
                problem:
                    "must be longer than the provider timeout (AUTH_OTP_HTTP_TIMEOUT_MS) times the rounds a claimed batch may wait for (AUTH_OTP_DISPATCH_WORKERS × AUTH_OTP_CLAIM_BATCH ÷ AUTH_OTP_PROVIDER_CONCURRENCY, rounded up: \(sendRounds)), or a slow send is sent twice"
            )
        }

        purgeInterval = try reader.seconds("AUTH_OTP_PURGE_INTERVAL_SECONDS", default: purgeInterval, in: 60...604_800)
        purgeRetention = try reader.seconds(
            "AUTH_OTP_PURGE_RETENTION_SECONDS",
            default: purgeRetention,
            in: 3_600...31_536_000
        )
    }

    /// The provider kinds of `channel`: the primary, then the fallback if any.
    func providers(for channel: Channel) -> [ProviderKind] {
        switch channel {
        case .sms: [smsProvider] + (smsFallbackProvider.map { [$0] } ?? [])
        case .email: [emailProvider] + (emailFallbackProvider.map { [$0] } ?? [])
        }
    }
}
