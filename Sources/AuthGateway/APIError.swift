import AuthAPI
import AuthRPC
import HTTPTypes
import Hummingbird

/// The one error type of the gateway: an HTTP status and the JSON error body
/// `{"error": reason, "message": text, "retry_after"?, "attempts_remaining"?, "fields"?}`.
/// Every failure of a request ends as one of these, in ``ErrorResponseMiddleware``.
public struct APIError: Error, Sendable, Equatable, CustomStringConvertible {
    public var status: HTTPResponse.Status
    /// Stable, snake_case: what programs switch on.
    public var reason: String
    /// A sentence the app can show.
    public var message: String
    /// 429: seconds until a retry can succeed (also sent as `Retry-After`).
    public var retryAfter: Int?
    /// `invalid_code`: wrong codes the destination may still enter.
    public var attemptsRemaining: Int?
    /// 422: the request's own field names, each with the text to show under it.
    public var fields: [String: String]?
    /// For the log only (never sent): what the gateway was doing, the service's own message.
    public var detail: String?

    public init(
        _ status: HTTPResponse.Status,
        _ reason: String,
        _ message: String,
        retryAfter: Int? = nil,
        attemptsRemaining: Int? = nil,
        fields: [String: String]? = nil,
        detail: String? = nil
    ) {
        self.status = status
        self.reason = reason
        self.message = message
        self.retryAfter = retryAfter.map { max(1, $0) }
        self.attemptsRemaining = attemptsRemaining
        self.fields = fields
        self.detail = detail
    }

    public var description: String {
        "\(status.code) \(reason): \(message)" + (detail.map { " (\($0))" } ?? "")
    }

    // MARK: The gateway's own answers

    /// 400: malformed JSON, a wrong type, a missing or unknown member, an unknown enum value.
    static func invalidRequest(_ why: String) -> APIError {
        APIError(.badRequest, "invalid_request", "The request is not valid: \(why)")
    }

    static let invalidToken = APIError(
        .unauthorized,
        "invalid_token",
        "Your session has expired. Please sign in again."
    )
    static let reauthenticationRequired = APIError(
        .unauthorized,
        "reauthentication_required",
        "For your security, please sign in again before deleting your account."
    )
    static let payloadTooLarge = APIError(.contentTooLarge, "payload_too_large", "The request is too large.")
    /// A provider's callback without a valid signature (or with none to check it against).
    static let invalidSignature = APIError(.forbidden, "invalid_signature", "The request is not signed.")
    static let unsupportedMediaType = APIError(
        .unsupportedMediaType,
        "unsupported_media_type",
        "The request must be sent as application/json."
    )
    static let unavailable = APIError(
        .serviceUnavailable,
        "unavailable",
        "The service is temporarily unavailable. Please try again."
    )
    static let internalError = APIError(.internalServerError, "internal", "Something went wrong. Please try again.")
    static let accountNotFound = APIError(.notFound, "account_not_found", "No account found. Create one?")
    static let accountExists = APIError(
        .conflict,
        "account_exists",
        "An account already exists with this phone number or email. Try logging in instead."
    )
    static let verificationNotFound = APIError(
        .notFound,
        "verification_not_found",
        "This code is no longer valid. Please request a new one."
    )
    /// 409: another account has proved this phone or email.
    static func contactTaken(phone: Bool) -> APIError {
        APIError(
            .conflict,
            "contact_taken",
            phone
                ? "This phone number is already used by another account."
                : "This email is already used by another account."
        )
    }
    static let identityNotFound = APIError(
        .notFound,
        "identity_not_found",
        "No such sign-in method is linked to your account."
    )
    static let sessionNotFound = APIError(.notFound, "session_not_found", "This session was not found.")
    static let invalidCredentials = APIError(.unauthorized, "invalid_credentials", "Invalid email or password")
    static let invalidIDToken = APIError(
        .unauthorized,
        "invalid_id_token",
        "Authentication verification failed. Please try again."
    )
    static let routeNotFound = APIError(.notFound, "not_found", "There is no such route.")
    static let methodNotAllowed = APIError(
        .methodNotAllowed,
        "method_not_allowed",
        "This route does not take this method."
    )

    static func rateLimited(retryAfter: Int) -> APIError {
        APIError(
            .tooManyRequests,
            "rate_limited",
            "Too many requests. Please try again in \(minutes(retryAfter)).",
            retryAfter: retryAfter
        )
    }

    /// 422 from the fields that failed: one field's text, or "Please correct: a, b."
    static func validationFailed(_ fields: [String: String]) -> APIError {
        let message =
            fields.count == 1
            ? fields.values.first! : "Please correct: \(fields.keys.sorted().joined(separator: ", "))."
        return APIError(.unprocessableContent, "validation_failed", message, fields: fields)
    }

    /// "1 minute", "14 minutes": whole minutes, rounded up.
    static func minutes(_ seconds: Int) -> String {
        let minutes = max(1, (seconds + 59) / 60)
        return minutes == 1 ? "1 minute" : "\(minutes) minutes"
    }
}

/// How a failed service call becomes an ``APIError``: one table for every route
/// (docs/gateway.md#from-a-service-error-to-an-http-answer), and the few places where a route
/// reads a reason differently, named by ``Rules``.
enum ServiceErrorMapping {
    /// Route-specific readings of a service's reasons.
    struct Rules: Sendable {
        /// `invalid_argument` with field violations is a 422 whose `fields` use these request
        /// names (service field → request member); nil: `invalid_argument` is a 400.
        var validationFields: [String: String]? = nil
        /// `/v1/login`: an email that is not an address is `invalid_credentials`, like a wrong password.
        var credentialsRoute = false
        /// A verification id the service refuses as malformed is 404 `verification_not_found`
        /// ("not a live one, whatever its shape").
        var verificationRoute = false
        /// The signed-in user is gone (`user_not_found`): 401 `invalid_token`.
        var signedInUser = false
        /// `wrong_password` (the current password at `/v1/me/password`).
        var changePassword = false

        static let plain = Rules()
    }

    static func apiError(for error: RPCError, service: String, rules: Rules = .plain) -> APIError {
        let detail = "\(service): \(error.code) \(error.reason): \(error.message)"
        let retryAfter = error.retryAfterSeconds.map { Int($0) }
        func make(_ status: HTTPResponse.Status, _ reason: String, _ message: String) -> APIError {
            APIError(status, reason, message, retryAfter: retryAfter, detail: detail)
        }
        // Transport and capacity first: whatever the reason, the caller can only try again.
        switch error.code {
        case .unavailable, .deadlineExceeded, .cancelled, .aborted:
            var unavailable = APIError.unavailable
            unavailable.detail = detail
            return unavailable
        default: break
        }
        // A form's fields (sign-up, profile, password): one broken field answers like several, 422
        // `validation_failed` with `fields` (issue 20: a sign-up whose only broken field was the
        // email answered 400 `invalid_email`, against the contract).
        if let names = rules.validationFields,
            [IdentityReason.invalidPhone, IdentityReason.invalidEmail].contains(error.reason),
            let failed = validationFailed(error, names: names, detail: detail)
        {
            return failed
        }
        switch error.reason {
        // identity
        case IdentityReason.invalidPhone:
            return make(.badRequest, "invalid_phone", "Please enter a valid phone number.")
        case IdentityReason.invalidEmail:
            if rules.credentialsRoute { return withDetail(.invalidCredentials, detail) }
            return make(.badRequest, "invalid_email", "Please enter a valid email address.")
        case IdentityReason.identityAlreadyLinked:
            return make(.conflict, "identity_already_linked", "This account is already linked to another user.")
        case IdentityReason.lastIdentity:
            return make(
                .conflict,
                "last_identity",
                "This is the only way to sign in to your account. Add another one first."
            )
        case IdentityReason.contactTaken:
            // identity's message names the phone or the email, as `contactTaken(phone:)` does.
            return make(.conflict, "contact_taken", error.message)
        case IdentityReason.redirectNotAllowed:
            return make(
                .badRequest,
                "redirect_not_allowed",
                "redirect_to is not one of the redirect URLs this deployment allows."
            )
        case IdentityReason.invalidState:
            return make(.badRequest, "invalid_state", GatewayRoutes.invalidStateMessage)
        case IdentityReason.invalidGrant:
            return make(
                .badRequest,
                "invalid_grant",
                "The sign-in code is not valid (unknown, expired or already used) or the verifier does not match."
            )
        case IdentityReason.identityNotFound:
            return withDetail(.identityNotFound, detail)
        case IdentityReason.emailTaken:
            return make(.conflict, "email_taken", "This email is already registered. Try logging in instead.")
        case IdentityReason.invalidCredentials: return withDetail(.invalidCredentials, detail)
        case IdentityReason.wrongPassword:
            return make(.unauthorized, "invalid_credentials", "Your current password is incorrect.")
        case IdentityReason.tooManyAttempts, OTPReason.tooManyAttempts:
            let seconds = retryAfter ?? 900
            let text = service == "otp-dispatch" ? "Too many attempts." : "Too many failed attempts."
            return APIError(
                .tooManyRequests,
                "too_many_attempts",
                "\(text) Please try again in \(APIError.minutes(seconds)).",
                retryAfter: seconds,
                detail: detail
            )
        case IdentityReason.factorLocked, OTPReason.factorLocked:
            // The consecutive-failure limit (issue 19, item 6): no retry_after, it lasts until a
            // password reset (passwords) or an operator's unlock.
            let message =
                service == "otp-dispatch"
                ? "Too many wrong codes: codes to this phone number or email are locked. Please contact support."
                : "Too many failed attempts: password sign-in is locked for this email. Reset your password to unlock it."
            return make(.forbidden, "factor_locked", message)
        case IdentityReason.providerNotEnabled:
            // `/v1/idtoken` names the provider in the message (it knows which one it asked for).
            return make(
                .badRequest,
                "provider_not_enabled",
                "This Sign-In is not configured. Please use email/password."
            )
        case IdentityReason.invalidIDToken, IdentityReason.idTokenExpired, IdentityReason.idTokenReplayed,
            IdentityReason.invalidNonce:
            return withDetail(.invalidIDToken, detail)
        case IdentityReason.userNotFound:
            if rules.signedInUser { return withDetail(.invalidToken, detail) }
            return make(.notFound, "user_not_found", "No account was found.")
        // otp-dispatch
        case OTPReason.verificationNotFound: return withDetail(.verificationNotFound, detail)
        case OTPReason.invalidCode:
            return APIError(
                .unauthorized,
                "invalid_code",
                "Invalid code. Please try again.",
                attemptsRemaining: Int(error.attemptsRemaining ?? 0),
                detail: detail
            )
        case OTPReason.codeExpired:
            return make(.gone, "code_expired", "This code has expired. Please request a new one.")
        case OTPReason.resendTooSoon:
            let seconds = max(1, retryAfter ?? 60)
            return APIError(
                .tooManyRequests,
                "resend_too_soon",
                "Please wait \(seconds) \(seconds == 1 ? "second" : "seconds") before requesting a new code.",
                retryAfter: seconds,
                detail: detail
            )
        case OTPReason.rateLimited, IdentityReason.rateLimited:
            var limited = APIError.rateLimited(retryAfter: retryAfter ?? 60)
            limited.detail = detail
            return limited
        case OTPReason.countryThrottled:
            return APIError(
                .tooManyRequests,
                "country_throttled",
                "We can't send codes to this country right now. Please try again later or use your email.",
                retryAfter: retryAfter ?? 3600,
                detail: detail
            )
        case OTPReason.invalidSignature: return withDetail(.invalidSignature, detail)
        case OTPReason.destinationNotAllowed:
            return make(
                .badRequest,
                "destination_not_allowed",
                "We can't send codes to this number. Please use another number or your email."
            )
        // session
        case SessionReason.invalidRefreshToken:
            return make(
                .unauthorized,
                "invalid_refresh_token",
                "Your session is no longer valid. Please sign in again."
            )
        case SessionReason.refreshTokenReused:
            return make(
                .unauthorized,
                "refresh_token_reused",
                "For your security you have been signed out. Please sign in again."
            )
        case SessionReason.sessionExpired:
            return make(.unauthorized, "session_expired", "Your session has expired. Please sign in again.")
        case SessionReason.sessionRevoked:
            return make(.unauthorized, "session_revoked", "You have been signed out. Please sign in again.")
        case SessionReason.invalidAccessToken, SessionReason.accessTokenExpired, SessionReason.unknownSigningKey:
            return withDetail(.invalidToken, detail)
        case SessionReason.sessionNotFound: return withDetail(.sessionNotFound, detail)
        // every service
        case RPCError.Reason.malformedRequest:
            // The RPC client could not encode the request: only the client's input can cause it
            // (the JSON reader refuses what it knows of, such as NUL in a string).
            var invalid = APIError.invalidRequest("a value cannot be sent on.")
            invalid.detail = detail
            return invalid
        case IdentityReason.invalidArgument, OTPReason.invalidArgument, SessionReason.invalidArgument:
            if rules.verificationRoute { return withDetail(.verificationNotFound, detail) }
            if rules.credentialsRoute { return withDetail(.invalidCredentials, detail) }
            if let names = rules.validationFields, let failed = validationFailed(error, names: names, detail: detail) {
                return failed
            }
            var invalid = APIError.invalidRequest(
                error.fieldViolations.first.map { "\($0.field): \($0.description)" } ?? "a value is not valid."
            )
            invalid.detail = detail
            return invalid
        default:
            // A status the gateway has no answer for (a permission or programming error between
            // the services): the client cannot fix it; logged with the detail.
            return withDetail(.internalError, detail)
        }
    }

    /// 422 `validation_failed` with the violations of the form's fields (`names`: service field →
    /// request member); nil when none of them is a form field.
    private static func validationFailed(_ error: RPCError, names: [String: String], detail: String) -> APIError? {
        var fields: [String: String] = [:]
        for violation in error.fieldViolations {
            guard let name = names[violation.field] else { continue }
            fields[name] = violation.description.isEmpty ? "This value is not valid." : violation.description
        }
        guard !fields.isEmpty else { return nil }
        var failed = APIError.validationFailed(fields)
        failed.detail = detail
        return failed
    }

    private static func withDetail(_ error: APIError, _ detail: String) -> APIError {
        var error = error
        error.detail = detail
        return error
    }
}

private typealias IdentityReason = Auth_Identity_V1_Identity.Reason
private typealias OTPReason = Auth_Otp_V1_OTP.Reason
private typealias SessionReason = Auth_Session_V1_Session.Reason
