import AuthAPI
import AuthRPC
import AuthServiceCore

/// The one error type of the otp-dispatch service. Each ``Code`` has a stable `reason` and the
/// RPC status it travels as; handlers throw this and the RPC layer converts it through
/// ``RPCErrorConvertible``. `retry_after_seconds` and `attempts_remaining` travel in the
/// status details.
public typealias OTPError = ServiceError<OTPErrors>

/// The domain of the otp-dispatch service's errors (``OTPError``).
public enum OTPErrors {}

extension ServiceError.Code where Domain == OTPErrors {
    /// A request field is missing or malformed; see ``OTPError/fieldViolations``.
    public static let invalidArgument = Self(Reason.invalidArgument, .invalidArgument)
    /// The code is wrong; `attempts_remaining` says how many more the destination may try.
    public static let invalidCode = Self(Reason.invalidCode, .unauthenticated)
    /// The destination entered too many wrong codes and is locked; `retry_after_seconds`.
    public static let tooManyAttempts = Self(Reason.tooManyAttempts, .resourceExhausted)
    /// The destination met the consecutive-failure limit: locked until an operator unlocks it.
    public static let factorLocked = Self(Reason.factorLocked, .permissionDenied)
    /// The code has expired; start again (or resend).
    public static let codeExpired = Self(Reason.codeExpired, .failedPrecondition)
    /// No such verification, or it was already used.
    public static let verificationNotFound = Self(Reason.verificationNotFound, .notFound)
    /// Resend earlier than allowed; `retry_after_seconds`.
    public static let resendTooSoon = Self(Reason.resendTooSoon, .resourceExhausted)
    /// Too many starts or resends for the destination or client IP; `retry_after_seconds`.
    public static let rateLimited = Self(Reason.rateLimited, .resourceExhausted)
    /// The SMS-pumping guard refuses new SMS starts to this calling code for now.
    public static let countryThrottled = Self(Reason.countryThrottled, .resourceExhausted)
    /// SMS to this calling code is not allowed by configuration (allow/deny list).
    public static let destinationNotAllowed = Self(Reason.destinationNotAllowed, .failedPrecondition)
    /// The database cannot be reached; safe to retry.
    public static let unavailable = Self(Reason.unavailable, .unavailable)
    public static let deadlineExceeded = Self(Reason.deadlineExceeded, .deadlineExceeded)
    public static let cancelled = Self(Reason.cancelled, .cancelled)
    /// A bug or a broken invariant; the message sent to callers says nothing more.
    public static let `internal` = Self(Reason.`internal`, .internal)
    /// A provider's callback is not signed with its secret (or none is configured).
    public static let invalidSignature = Self(Reason.invalidSignature, .permissionDenied)
}

extension ServiceError where Domain == OTPErrors {
    /// `invalid_argument` with every broken field of `validator`.
    init(invalid validator: FieldValidator) {
        self.init(
            .invalidArgument,
            "The request has invalid fields: \(validator.violations.map(\.field).joined(separator: ", ")).",
            fieldViolations: validator.violations
        )
    }
}

/// The reasons as the .proto lists them (generated into AuthAPI).
private typealias Reason = Auth_Otp_V1_OTP.Reason
