import AuthAPI
import AuthRPC

/// The one error type of the identity service. Each ``Code`` has a stable `reason` and the RPC
/// status it travels as; handlers throw this and the RPC layer converts it through
/// ``RPCErrorConvertible``. Messages are what the apps show; none holds a password, code or token.
public struct IdentityError: Error, Sendable, CustomStringConvertible {
    /// What went wrong: a stable reason (snake_case) with its RPC status code.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The reason sent on the wire, e.g. `email_taken`.
        public let reason: String
        /// The RPC status code it is sent with.
        public let status: RPCError.Code

        init(_ reason: String, _ status: RPCError.Code) {
            self.reason = reason
            self.status = status
        }

        /// Request fields broke a rule; see ``IdentityError/fieldViolations``.
        public static let invalidArgument = Code(Reason.invalidArgument, .invalidArgument)
        /// A phone number that is not E.164 (or not a valid Indian mobile number for +91).
        public static let invalidPhone = Code(Reason.invalidPhone, .invalidArgument)
        /// An email address that does not match the accepted form or is over 255 characters.
        public static let invalidEmail = Code(Reason.invalidEmail, .invalidArgument)
        /// No such user (or it was deleted).
        public static let userNotFound = Code(Reason.userNotFound, .notFound)
        /// Sign-up with an email another account has.
        public static let emailTaken = Code(Reason.emailTaken, .alreadyExists)
        /// Wrong email or password (the same answer for both).
        public static let invalidCredentials = Code(Reason.invalidCredentials, .unauthenticated)
        /// Too many failed password sign-ins for this email in the window.
        public static let tooManyAttempts = Code(Reason.tooManyAttempts, .resourceExhausted)
        /// The email's password met the consecutive-failure limit: locked until a password reset
        /// or an operator's unlock.
        public static let factorLocked = Code(Reason.factorLocked, .permissionDenied)
        /// ChangePassword's old password is wrong.
        public static let wrongPassword = Code(Reason.wrongPassword, .unauthenticated)
        /// The ID token is malformed, badly signed, for another audience or issuer, or mistimed.
        public static let invalidIDToken = Code(Reason.invalidIDToken, .unauthenticated)
        /// The ID token's `exp` has passed.
        public static let idTokenExpired = Code(Reason.idTokenExpired, .unauthenticated)
        /// The ID token was already used to sign in.
        public static let idTokenReplayed = Code(Reason.idTokenReplayed, .unauthenticated)
        /// The nonce is missing or does not match the token's.
        public static let invalidNonce = Code(Reason.invalidNonce, .unauthenticated)
        /// The provider is not configured on this deployment.
        public static let providerNotEnabled = Code(Reason.providerNotEnabled, .failedPrecondition)
        /// The provider's keys could not be fetched; safe to retry.
        public static let providerUnavailable = Code(Reason.providerUnavailable, .unavailable)
        /// The database cannot be reached; safe to retry.
        public static let unavailable = Code(Reason.unavailable, .unavailable)
        /// A database statement ran out of time.
        public static let deadlineExceeded = Code(Reason.deadlineExceeded, .deadlineExceeded)
        /// The caller cancelled.
        public static let cancelled = Code(Reason.cancelled, .cancelled)
        /// A bug or a broken invariant; the message sent to callers says nothing more.
        public static let `internal` = Code(Reason.`internal`, .internal)

        public var description: String { reason }
    }

    public var code: Code
    /// For the apps' users and for logs; never holds a password, code or token.
    public var message: String
    /// The fields that failed validation.
    public var fieldViolations: [RPCError.FieldViolation]
    /// For `too_many_attempts`: seconds until a new try can succeed.
    public var retryAfterSeconds: UInt32?
    /// The underlying error, for logs.
    public var cause: (any Error & Sendable)?

    public init(
        _ code: Code,
        _ message: String,
        fieldViolations: [RPCError.FieldViolation] = [],
        retryAfterSeconds: UInt32? = nil,
        cause: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.message = message
        self.fieldViolations = fieldViolations
        self.retryAfterSeconds = retryAfterSeconds
        self.cause = cause
    }

    public var description: String {
        var text = "\(code.reason): \(message)"
        if let cause { text += " (cause: \(cause))" }
        return text
    }

    static let invalidCredentialsMessage = "Invalid email or password"
    static let emailTakenMessage = "This email is already registered. Try logging in instead."

}

extension IdentityError: RPCErrorConvertible {
    public var rpcError: RPCError {
        if code == .internal {
            return RPCError(code: .internal, message: "Internal error.", reason: code.reason)
        }
        return RPCError(
            code: code.status,
            message: message,
            reason: code.reason,
            retryAfterSeconds: retryAfterSeconds,
            fieldViolations: fieldViolations
        )
    }
}

/// The reasons as the .proto lists them (generated into AuthAPI).
private typealias Reason = Auth_Identity_V1_Identity.Reason
