import AuthAPI
import AuthAccessToken
import AuthRPC
import AuthServiceCore

/// The one error type of the session service. Each ``Code`` has a stable `reason` and the RPC
/// status it travels as; handlers throw this and the RPC layer converts it through
/// ``RPCErrorConvertible``.
public typealias SessionError = ServiceError<SessionErrors>

/// The domain of the session service's errors (``SessionError``).
public enum SessionErrors {}

extension ServiceError.Code where Domain == SessionErrors {
    /// A request field is missing or malformed; see ``SessionError/fieldViolations``.
    public static let invalidArgument = Self(Reason.invalidArgument, .invalidArgument)
    /// The refresh token is not one this service issued (or is malformed).
    public static let invalidRefreshToken = Self(Reason.invalidRefreshToken, .unauthenticated)
    /// An already used refresh token was presented after the grace window: the session is
    /// revoked as stolen.
    public static let refreshTokenReused = Self(Reason.refreshTokenReused, .unauthenticated)
    /// The refresh token or the whole session has expired.
    public static let sessionExpired = Self(Reason.sessionExpired, .unauthenticated)
    /// The session was revoked (logout, revoke-all, detected reuse, an operator).
    public static let sessionRevoked = Self(Reason.sessionRevoked, .unauthenticated)
    /// The access token is malformed, has a wrong signature, algorithm, type, issuer or audience.
    public static let invalidAccessToken = Self(Reason.invalidAccessToken, .unauthenticated)
    /// The access token's `exp` has passed.
    public static let accessTokenExpired = Self(Reason.accessTokenExpired, .unauthenticated)
    /// The access token names a key (`kid`) that is not (or no longer) published.
    public static let unknownSigningKey = Self(Reason.unknownSigningKey, .unauthenticated)
    /// No such session (or not the given user's).
    public static let sessionNotFound = Self(Reason.sessionNotFound, .notFound)
    /// The caller may not call this method (RotateSigningKey is for `authctl` only).
    public static let callerNotAllowed = Self(Reason.callerNotAllowed, .permissionDenied)
    /// The database cannot be reached; safe to retry.
    public static let unavailable = Self(Reason.unavailable, .unavailable)
    /// A database statement ran out of time.
    public static let deadlineExceeded = Self(Reason.deadlineExceeded, .deadlineExceeded)
    /// The caller cancelled.
    public static let cancelled = Self(Reason.cancelled, .cancelled)
    /// A bug or a broken invariant; the message sent to callers says nothing more.
    public static let `internal` = Self(Reason.`internal`, .internal)
}

extension ServiceError where Domain == SessionErrors {
    /// An access token refused by ``AccessTokenVerifier``, as the reason callers see.
    init(_ error: AccessTokenError) {
        switch error.code {
        case .invalid: self.init(.invalidAccessToken, error.message)
        case .expired: self.init(.accessTokenExpired, error.message)
        case .unknownSigningKey: self.init(.unknownSigningKey, error.message)
        }
    }
}

/// The reasons as the .proto lists them (generated into AuthAPI).
private typealias Reason = Auth_Session_V1_Session.Reason
