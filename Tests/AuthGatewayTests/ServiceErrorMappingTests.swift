import AuthRPC
import Testing

@testable import AuthGateway

@Suite struct ServiceErrorMappingTests {
    func map(
        _ code: RPCError.Code,
        _ reason: String,
        service: String = "identity",
        rules: ServiceErrorMapping.Rules = .plain,
        retryAfter: UInt32? = nil,
        attempts: UInt32? = nil,
        violations: [RPCError.FieldViolation] = []
    ) -> APIError {
        ServiceErrorMapping.apiError(
            for: RPCError(
                code: code,
                message: "m",
                reason: reason,
                retryAfterSeconds: retryAfter,
                attemptsRemaining: attempts,
                fieldViolations: violations
            ),
            service: service,
            rules: rules
        )
    }

    @Test(arguments: [
        (RPCError.Code.invalidArgument, "invalid_phone", 400, "invalid_phone"),
        (.invalidArgument, "invalid_email", 400, "invalid_email"),
        (.alreadyExists, "email_taken", 409, "email_taken"),
        (.unauthenticated, "invalid_credentials", 401, "invalid_credentials"),
        (.unauthenticated, "invalid_id_token", 401, "invalid_id_token"),
        (.unauthenticated, "id_token_expired", 401, "invalid_id_token"),
        (.unauthenticated, "invalid_nonce", 401, "invalid_id_token"),
        (.failedPrecondition, "provider_not_enabled", 400, "provider_not_enabled"),
        (.notFound, "verification_not_found", 404, "verification_not_found"),
        (.failedPrecondition, "code_expired", 410, "code_expired"),
        (.failedPrecondition, "destination_not_allowed", 400, "destination_not_allowed"),
        (.unauthenticated, "invalid_refresh_token", 401, "invalid_refresh_token"),
        (.unauthenticated, "refresh_token_reused", 401, "refresh_token_reused"),
        (.unauthenticated, "session_expired", 401, "session_expired"),
        (.unauthenticated, "session_revoked", 401, "session_revoked"),
        (.unauthenticated, "invalid_access_token", 401, "invalid_token"),
        (.unauthenticated, "access_token_expired", 401, "invalid_token"),
        (.notFound, "session_not_found", 404, "session_not_found"),
        (.unavailable, "provider_unavailable", 503, "unavailable"),
        (.unavailable, "", 503, "unavailable"),
        (.deadlineExceeded, "deadline_exceeded", 503, "unavailable"),
        (.permissionDenied, "caller_not_allowed", 500, "internal"),
        (.permissionDenied, "factor_locked", 403, "factor_locked"),
    ])
    func theTable(code: RPCError.Code, reason: String, status: Int, error: String) {
        let mapped = map(code, reason)
        #expect(mapped.status.code == status)
        #expect(mapped.reason == error)
        #expect(!mapped.message.isEmpty)
    }

    @Test func limitsCarryRetryAfterAndSayWhenInTheMessage() {
        let limited = map(.resourceExhausted, "rate_limited", service: "otp-dispatch", retryAfter: 120)
        #expect(limited.status == .tooManyRequests)
        #expect(limited.retryAfter == 120)
        #expect(limited.message == "Too many requests. Please try again in 2 minutes.")
        let locked = map(.resourceExhausted, "too_many_attempts", service: "otp-dispatch", retryAfter: 900)
        #expect(locked.message == "Too many attempts. Please try again in 15 minutes.")
        let signInLocked = map(.resourceExhausted, "too_many_attempts", retryAfter: 840)
        #expect(signInLocked.message == "Too many failed attempts. Please try again in 14 minutes.")
        let soon = map(.resourceExhausted, "resend_too_soon", service: "otp-dispatch", retryAfter: 45)
        #expect(soon.message == "Please wait 45 seconds before requesting a new code.")
        #expect(APIError.minutes(42) == "1 minute")
    }

    /// Issue 19, item 6: the consecutive-failure limit lasts until an unlock, so no retry_after.
    @Test func aLockedFactorIsForbiddenAndSaysHowToUnlockIt() {
        let password = map(.permissionDenied, "factor_locked")
        #expect(password.status == .forbidden)
        #expect(password.retryAfter == nil)
        #expect(password.message.contains("Reset your password"))
        let codes = map(.permissionDenied, "factor_locked", service: "otp-dispatch")
        #expect(codes.status == .forbidden)
        #expect(codes.message.contains("contact support"))
    }

    @Test func invalidCodeCarriesTheAttemptsLeft() {
        let wrong = map(.unauthenticated, "invalid_code", service: "otp-dispatch", attempts: 3)
        #expect(wrong.status == .unauthorized)
        #expect(wrong.attemptsRemaining == 3)
        #expect(wrong.message == "Invalid code. Please try again.")
    }

    @Test func routeRules() {
        var login = ServiceErrorMapping.Rules()
        login.credentialsRoute = true
        #expect(map(.invalidArgument, "invalid_email", rules: login).reason == "invalid_credentials")
        #expect(map(.invalidArgument, "invalid_argument", rules: login).reason == "invalid_credentials")

        var verification = ServiceErrorMapping.Rules()
        verification.verificationRoute = true
        #expect(
            map(.invalidArgument, "invalid_argument", service: "otp-dispatch", rules: verification).status == .notFound
        )

        var signedIn = ServiceErrorMapping.Rules()
        signedIn.signedInUser = true
        #expect(map(.notFound, "user_not_found", rules: signedIn).reason == "invalid_token")

        #expect(map(.unauthenticated, "wrong_password").message == "Your current password is incorrect.")
    }

    /// Issue 20: a form whose only broken field is the email (or the phone) answers like one
    /// with several broken fields: 422 `validation_failed` with `fields`.
    @Test func aFormsOnlyBrokenContactIsA422Too() {
        var rules = ServiceErrorMapping.Rules()
        rules.validationFields = ["display_name": "display_name", "email": "email", "password": "password"]
        let email = map(
            .invalidArgument,
            "invalid_email",
            rules: rules,
            violations: [
                RPCError.FieldViolation(
                    field: "email",
                    reason: "invalid_email",
                    description: "Please enter a valid email address."
                )
            ]
        )
        #expect(email.status == .unprocessableContent)
        #expect(email.fields == ["email": "Please enter a valid email address."])
        // Outside a form (e.g. /v1/otp/send) it stays 400 `invalid_email`.
        #expect(map(.invalidArgument, "invalid_email").status == .badRequest)
    }

    @Test func fieldViolationsBecomeA422InTheRequestsOwnNames() {
        var rules = ServiceErrorMapping.Rules()
        rules.validationFields = ["old_password": "current_password", "new_password": "new_password"]
        let one = map(
            .invalidArgument,
            "invalid_argument",
            rules: rules,
            violations: [
                RPCError.FieldViolation(
                    field: "new_password",
                    reason: "too_short",
                    description: "Password must be at least 8 characters."
                )
            ]
        )
        #expect(one.status == .unprocessableContent)
        #expect(one.reason == "validation_failed")
        #expect(one.fields == ["new_password": "Password must be at least 8 characters."])
        #expect(one.message == "Password must be at least 8 characters.")
        let two = map(
            .invalidArgument,
            "invalid_argument",
            rules: rules,
            violations: [
                RPCError.FieldViolation(
                    field: "new_password",
                    reason: "required",
                    description: "Password is required."
                ),
                RPCError.FieldViolation(
                    field: "old_password",
                    reason: "required",
                    description: "Password is required."
                ),
            ]
        )
        #expect(two.message == "Please correct: current_password, new_password.")
        // Without the route's field names, invalid_argument is a 400.
        #expect(map(.invalidArgument, "invalid_argument").status == .badRequest)
    }

    /// Issue 19: `DELETE /v1/me` needs a session signed in within `AUTH_GATEWAY_REAUTH_SECONDS`;
    /// otherwise 401 `reauthentication_required`.
    @Test func deletionNeedsARecentSignIn() {
        #expect(!GatewayRoutes.needsReauthentication(sessionCreatedAt: 1_000, now: 1_300, window: .seconds(300)))
        #expect(GatewayRoutes.needsReauthentication(sessionCreatedAt: 1_000, now: 1_301, window: .seconds(300)))
        #expect(APIError.reauthenticationRequired.status == .unauthorized)
        #expect(APIError.reauthenticationRequired.reason == "reauthentication_required")
    }
}
