import AuthAPI
import AuthAccessToken
import AuthRPC

/// The one error type of the session service. Each ``Code`` has a stable `reason` and the RPC
/// status it travels as; handlers throw this and the RPC layer converts it through
/// ``RPCErrorConvertible``.
public struct SessionError: Error, Sendable, CustomStringConvertible {
    /// What went wrong: a stable reason (snake_case) with its RPC status code.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The reason sent on the wire, e.g. `refresh_token_reused`.
        public let reason: String
        /// The RPC status code it is sent with.
        public let status: RPCError.Code

        init(_ reason: String, _ status: RPCError.Code) {
            self.reason = reason
            self.status = status
        }

        /// A request field is missing or malformed; see ``SessionError/fieldViolations``.
        public static let invalidArgument = Code(Reason.invalidArgument, .invalidArgument)
        /// The refresh token is not one this service issued (or is malformed).
        public static let invalidRefreshToken = Code(Reason.invalidRefreshToken, .unauthenticated)
        /// An already used refresh token was presented after the grace window: the session is
        /// revoked as stolen.
        public static let refreshTokenReused = Code(Reason.refreshTokenReused, .unauthenticated)
        /// The refresh token or the whole session has expired.
        public static let sessionExpired = Code(Reason.sessionExpired, .unauthenticated)
        /// The session was revoked (logout, revoke-all, detected reuse, an operator).
        public static let sessionRevoked = Code(Reason.sessionRevoked, .unauthenticated)
        /// The access token is malformed, has a wrong signature, algorithm, type, issuer or audience.
        public static let invalidAccessToken = Code(Reason.invalidAccessToken, .unauthenticated)
        /// The access token's `exp` has passed.
        public static let accessTokenExpired = Code(Reason.accessTokenExpired, .unauthenticated)
        /// The access token names a key (`kid`) that is not (or no longer) published.
        public static let unknownSigningKey = Code(Reason.unknownSigningKey, .unauthenticated)
        /// No such session (or not the given user's).
        public static let sessionNotFound = Code(Reason.sessionNotFound, .notFound)
        /// The caller may not call this method (RotateSigningKey is for `authctl` only).
        public static let callerNotAllowed = Code(Reason.callerNotAllowed, .permissionDenied)
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
    /// For logs and people; never parsed by programs. Holds no token or secret.
    public var message: String
    /// The fields that failed validation (with ``Code/invalidArgument``).
    public var fieldViolations: [RPCError.FieldViolation]
    /// The underlying error, for logs.
    public var cause: (any Error & Sendable)?

    public init(
        _ code: Code,
        _ message: String,
        fieldViolations: [RPCError.FieldViolation] = [],
        cause: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.message = message
        self.fieldViolations = fieldViolations
        self.cause = cause
    }

    /// An access token refused by ``AccessTokenVerifier``, as the reason callers see.
    init(_ error: AccessTokenError) {
        switch error.code {
        case .invalid: self.init(.invalidAccessToken, error.message)
        case .expired: self.init(.accessTokenExpired, error.message)
        case .unknownSigningKey: self.init(.unknownSigningKey, error.message)
        }
    }

    public var description: String {
        var text = "\(code.reason): \(message)"
        if let cause { text += " (cause: \(cause))" }
        return text
    }
}

extension SessionError: RPCErrorConvertible {
    public var rpcError: RPCError {
        if code == .internal {
            return RPCError(code: .internal, message: "Internal error.", reason: code.reason)
        }
        return RPCError(code: code.status, message: message, reason: code.reason, fieldViolations: fieldViolations)
    }
}

/// The reasons as the .proto lists them (generated into AuthAPI).
private typealias Reason = Auth_Session_V1_Session.Reason
