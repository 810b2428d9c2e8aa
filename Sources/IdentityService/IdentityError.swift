import AuthAPI
import AuthRPC
import AuthServiceCore

/// The one error type of the identity service. Each ``Code`` has a stable `reason` and the RPC
/// status it travels as; handlers throw this and the RPC layer converts it through
/// ``RPCErrorConvertible``. Messages are what the apps show; none holds a password, code or token.
public typealias IdentityError = ServiceError<IdentityErrors>

/// The domain of the identity service's errors (``IdentityError``).
public enum IdentityErrors {}

extension ServiceError.Code where Domain == IdentityErrors {
    /// Request fields broke a rule; see ``IdentityError/fieldViolations``.
    public static let invalidArgument = Self(Reason.invalidArgument, .invalidArgument)
    /// A phone number that is not E.164 (or not a valid Indian mobile number for +91).
    public static let invalidPhone = Self(Reason.invalidPhone, .invalidArgument)
    /// An email address that does not match the accepted form or is over 255 characters.
    public static let invalidEmail = Self(Reason.invalidEmail, .invalidArgument)
    /// No such user (or it was deleted).
    public static let userNotFound = Self(Reason.userNotFound, .notFound)
    /// Sign-up with an email another account has.
    public static let emailTaken = Self(Reason.emailTaken, .alreadyExists)
    /// Wrong email or password (the same answer for both).
    public static let invalidCredentials = Self(Reason.invalidCredentials, .unauthenticated)
    /// Too many failed password sign-ins for this email in the window.
    public static let tooManyAttempts = Self(Reason.tooManyAttempts, .resourceExhausted)
    /// The client IP's account checks are spent for the hour.
    public static let rateLimited = Self(Reason.rateLimited, .resourceExhausted)
    /// The email's password met the consecutive-failure limit: locked until a password reset
    /// or an operator's unlock.
    public static let factorLocked = Self(Reason.factorLocked, .permissionDenied)
    /// ChangePassword's old password is wrong.
    public static let wrongPassword = Self(Reason.wrongPassword, .unauthenticated)
    /// The ID token is malformed, badly signed, for another audience or issuer, or mistimed.
    public static let invalidIDToken = Self(Reason.invalidIDToken, .unauthenticated)
    /// The ID token's `exp` has passed.
    public static let idTokenExpired = Self(Reason.idTokenExpired, .unauthenticated)
    /// The ID token was already used to sign in.
    public static let idTokenReplayed = Self(Reason.idTokenReplayed, .unauthenticated)
    /// The provider identity is linked to another account.
    public static let identityAlreadyLinked = Self(Reason.identityAlreadyLinked, .alreadyExists)
    /// Unlinking would leave the account no way to sign in.
    public static let lastIdentity = Self(Reason.lastIdentity, .failedPrecondition)
    /// No identity of that provider is linked to the account.
    public static let identityNotFound = Self(Reason.identityNotFound, .notFound)
    /// The nonce is missing or does not match the token's.
    public static let invalidNonce = Self(Reason.invalidNonce, .unauthenticated)
    /// StartOAuth's redirect_to is not on AUTH_OAUTH_REDIRECT_URLS.
    public static let redirectNotAllowed = Self(Reason.redirectNotAllowed, .invalidArgument)
    /// FinishOAuth's state is unknown, expired, used, or of another provider.
    public static let invalidState = Self(Reason.invalidState, .invalidArgument)
    /// ExchangeOAuthCode's code is unknown, expired or used, or the verifier does not match.
    public static let invalidGrant = Self(Reason.invalidGrant, .invalidArgument)
    /// Another account has proved this phone or email.
    public static let contactTaken = Self(Reason.contactTaken, .alreadyExists)
    /// The provider is not configured on this deployment.
    public static let providerNotEnabled = Self(Reason.providerNotEnabled, .failedPrecondition)
    /// The provider's keys could not be fetched; safe to retry.
    public static let providerUnavailable = Self(Reason.providerUnavailable, .unavailable)
    /// The database cannot be reached; safe to retry.
    public static let unavailable = Self(Reason.unavailable, .unavailable)
    /// A database statement ran out of time.
    public static let deadlineExceeded = Self(Reason.deadlineExceeded, .deadlineExceeded)
    /// The caller cancelled.
    public static let cancelled = Self(Reason.cancelled, .cancelled)
    /// A bug or a broken invariant; the message sent to callers says nothing more.
    public static let `internal` = Self(Reason.`internal`, .internal)
}

extension ServiceError where Domain == IdentityErrors {
    static let invalidCredentialsMessage = "Invalid email or password"
    static let emailTakenMessage = "This email is already registered. Try logging in instead."
}

/// The reasons as the .proto lists them (generated into AuthAPI).
private typealias Reason = Auth_Identity_V1_Identity.Reason
