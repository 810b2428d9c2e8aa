import AuthAPI
import AuthRPC
import AuthServiceCore

/// The one error type of the otp-dispatch service. Each ``Code`` has a stable `reason` and the
/// RPC status it travels as; handlers throw this and the RPC layer converts it through
/// ``RPCErrorConvertible``. `retry_after_seconds` and `attempts_remaining` travel in the
/// status details.
public struct OTPError: Error, Sendable, CustomStringConvertible {
    /// What went wrong: a stable reason (snake_case) with its RPC status code.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let reason: String
        public let status: RPCError.Code

        init(_ reason: String, _ status: RPCError.Code) {
            self.reason = reason
            self.status = status
        }

        /// A request field is missing or malformed; see ``OTPError/fieldViolations``.
        public static let invalidArgument = Code(Reason.invalidArgument, .invalidArgument)
        /// The code is wrong; `attempts_remaining` says how many more the destination may try.
        public static let invalidCode = Code(Reason.invalidCode, .unauthenticated)
        /// The destination entered too many wrong codes and is locked; `retry_after_seconds`.
        public static let tooManyAttempts = Code(Reason.tooManyAttempts, .resourceExhausted)
        /// The destination met the consecutive-failure limit: locked until an operator unlocks it.
        public static let factorLocked = Code(Reason.factorLocked, .permissionDenied)
        /// The code has expired; start again (or resend).
        public static let codeExpired = Code(Reason.codeExpired, .failedPrecondition)
        /// No such verification, or it was already used.
        public static let verificationNotFound = Code(Reason.verificationNotFound, .notFound)
        /// Resend earlier than allowed; `retry_after_seconds`.
        public static let resendTooSoon = Code(Reason.resendTooSoon, .resourceExhausted)
        /// Too many starts or resends for the destination or client IP; `retry_after_seconds`.
        public static let rateLimited = Code(Reason.rateLimited, .resourceExhausted)
        /// The SMS-pumping guard refuses new SMS starts to this calling code for now.
        public static let countryThrottled = Code(Reason.countryThrottled, .resourceExhausted)
        /// SMS to this calling code is not allowed by configuration (allow/deny list).
        public static let destinationNotAllowed = Code(Reason.destinationNotAllowed, .failedPrecondition)
        /// The database cannot be reached; safe to retry.
        public static let unavailable = Code(Reason.unavailable, .unavailable)
        public static let deadlineExceeded = Code(Reason.deadlineExceeded, .deadlineExceeded)
        public static let cancelled = Code(Reason.cancelled, .cancelled)
        /// A bug or a broken invariant; the message sent to callers says nothing more.
        public static let `internal` = Code(Reason.`internal`, .internal)

        public var description: String { reason }
    }

    public var code: Code
    /// For logs and people; never parsed by programs. Holds no code or secret.
    public var message: String
    public var retryAfterSeconds: UInt32?
    public var attemptsRemaining: UInt32?
    public var fieldViolations: [RPCError.FieldViolation]
    public var cause: (any Error & Sendable)?

    public init(
        _ code: Code,
        _ message: String,
        retryAfterSeconds: UInt32? = nil,
        attemptsRemaining: UInt32? = nil,
        fieldViolations: [RPCError.FieldViolation] = [],
        cause: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
        self.attemptsRemaining = attemptsRemaining
        self.fieldViolations = fieldViolations
        self.cause = cause
    }

    /// `invalid_argument` with every broken field of `validator`.
    init(invalid validator: FieldValidator) {
        self.init(
            .invalidArgument,
            "The request has invalid fields: \(validator.violations.map(\.field).joined(separator: ", ")).",
            fieldViolations: validator.violations)
    }

    public var description: String {
        var text = "\(code.reason): \(message)"
        if let cause { text += " (cause: \(cause))" }
        return text
    }
}

extension OTPError: RPCErrorConvertible {
    public var rpcError: RPCError {
        if code == .internal {
            return RPCError(code: .internal, message: "Internal error.", reason: code.reason)
        }
        return RPCError(
            code: code.status,
            message: message,
            reason: code.reason,
            retryAfterSeconds: retryAfterSeconds,
            attemptsRemaining: attemptsRemaining,
            fieldViolations: fieldViolations
        )
    }
}

/// The reasons as the .proto lists them (generated into AuthAPI).
private typealias Reason = Auth_Otp_V1_OTP.Reason
