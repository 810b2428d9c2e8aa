import AuthCrypto
import AuthProtobuf
import AuthText
import HTTPTypes
import Hummingbird

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The Supabase door's sign-up and codes (docs/supabase.md): `POST /auth/v1/signup`, `/otp`,
/// `/verify`, `/resend` and the `id_token` grant, on the same services and limits as `/v1`.
extension GatewayRoutes {
    // MARK: POST /auth/v1/signup

    /// Sign-up confirms the email first (Supabase's default): the user without a session, and a
    /// confirmation code (otp purpose `verify`, as `/v1/signup`'s). A taken email answers the
    /// same way, with a user of no account behind it, and its owner gets a notice instead: this
    /// door does not tell whether an account exists.
    func supabaseSignUp(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        await supabase(request, context) {
            try limit(context, as: "/v1/signup")
            let body = try await SupabaseRequest.read(request)
            let password = body.string("password") ?? ""
            guard body.string("email").map({ !$0.isEmpty }) == true || body.string("phone").map({ !$0.isEmpty }) == true
            else {
                // No contact at all is signInAnonymously.
                throw SupabaseError(
                    .unprocessableContent,
                    "anonymous_provider_disabled",
                    "Anonymous sign-ins are disabled"
                )
            }
            let contact = try Self.supabaseContact(body)
            AuthDecisionNote.record(contact: contact.text, method: "password")
            let link = contact.isPhone ? ConfirmationLink() : try confirmationLink(request, body)
            let metadata = body.object("data")
            let displayName = metadata["display_name"]?.stringValue ?? metadata["full_name"]?.stringValue ?? ""
            let user: Auth_Identity_V1_User
            do {
                var signUp = Auth_Identity_V1_SignUpRequest(
                    displayName: displayName,
                    password: password,
                    displayNameOptional: true,
                    hashWhenTaken: true
                )
                if contact.isPhone { signUp.phone = contact.text } else { signUp.email = contact.text }
                user = try await createAccount(signUp, context: context)
            } catch let error as APIError where ["email_taken", "contact_taken"].contains(error.reason) {
                await sendNotice(.signupAttempted, to: contact.text, context: context)
                return try JSONResponse.make(Self.unconfirmedUser(obfuscatedFor: contact))
            } catch let error as APIError where error.reason == "validation_failed" {
                throw Self.supabaseValidation(error)
            }
            // The confirmation code (by SMS for a phone), and for an email its link when asked
            // for. The account stands if it cannot be sent now: `resend` asks for another.
            do {
                try await supabaseStart(contact, purpose: .verify, link: link, context: context)
            } catch {
                logger.warning(
                    "Supabase sign-up: the confirmation code was not sent",
                    metadata: ["error": "\(error)", "user.id": "\(user.id)"]
                )
            }
            return try JSONResponse.make(Self.unconfirmedUser(user))
        }
    }

    /// A signed-up user before confirmation, as this door answers it: its only identity the
    /// email (or phone) and password. A taken contact's answer has the same shape
    /// (``unconfirmedUser(obfuscatedFor:)``).
    static func unconfirmedUser(_ user: Auth_Identity_V1_User) -> SupabaseUserBody {
        SupabaseUserBody(
            user: user,
            identities: [
                Auth_Identity_V1_SignInIdentity(
                    provider: "password",
                    id: user.email.isEmpty ? user.phone : user.email,
                    email: user.email,
                    createdAt: user.createdAt
                )
            ]
        )
    }

    /// The answer to a sign-up whose email or phone an account has: a new random id, the
    /// contact as identity stores it, now as its times, nothing confirmed.
    static func unconfirmedUser(obfuscatedFor contact: SupabaseContact) -> SupabaseUserBody {
        let now = Int64(Date().timeIntervalSince1970)
        var user = Auth_Identity_V1_User()
        user.id = SecureRandom.uuid().uuidString.lowercased()
        if contact.isPhone {
            user.phone = PhoneNumber(contact.text)?.e164 ?? contact.text
        } else {
            user.email = EmailAddress(contact.text)?.normalized ?? contact.text.lowercased()
        }
        user.createdAt = now
        user.updatedAt = now
        return unconfirmedUser(user)
    }

    /// Supabase's answer to a refused field: a weak password is 422 `weak_password` with its
    /// reasons, anything else 400 `validation_failed`.
    static func supabaseValidation(_ error: APIError) -> SupabaseError {
        if let why = error.fields?["password"] {
            var weak = SupabaseError(.unprocessableContent, "weak_password", why)
            // Supabase's reasons from identity's messages (docs/identity.md, passwords).
            weak.weakPasswordReasons = [
                why.contains("common") ? "pwned" : why.contains("uppercase") ? "characters" : "length"
            ]
            return weak
        }
        let text = error.fields?.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: "; ")
        return SupabaseError(.badRequest, "validation_failed", text ?? error.message)
    }

    /// otp-dispatch's SendNotice, best effort (logged): the answer does not wait on its outcome
    /// being known to the client.
    func sendNotice(_ notice: Auth_Otp_V1_Notice, to destination: String, context: GatewayRequestContext) async {
        do {
            _ = try await backends.call(.otpDispatch, context) { options in
                try await backends.otp.sendNotice(
                    Auth_Otp_V1_SendNoticeRequest(destination: destination, notice: notice, clientIP: context.clientIP),
                    options: options
                )
            }
        } catch {
            logger.warning("A notice was not written", metadata: ["error": "\(error)", "notice": "\(notice)"])
        }
    }

    // MARK: POST /auth/v1/otp

    /// A sign-in code by SMS or email (`signInWithOtp`): `login` for an account's contact,
    /// `signup` for a new one unless `create_user` is false (then 422 `otp_disabled`, which tells
    /// whether an account exists: one of the IP's account checks).
    func supabaseSendCode(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        await supabase(request, context) {
            try limit(context, as: "/v1/otp/send")
            let body = try await SupabaseRequest.read(request)
            let destination = try Self.supabaseContact(body)
            if let channel = body.string("channel"), channel != "sms" {
                throw SupabaseError(.badRequest, "validation_failed", "Unsupported channel: only sms is served")
            }
            let createUser = body.bool("create_user") ?? true
            AuthDecisionNote.record(contact: destination.text, method: destination.isPhone ? "otp_sms" : "otp_email")
            // Without create_user, otp_disabled tells that no account exists: an account check.
            let exists = try await contactExists(destination, accountCheck: !createUser, context: context).exists
            guard exists || createUser else {
                throw SupabaseError(.unprocessableContent, "otp_disabled", "Signups not allowed for otp")
            }
            try await supabaseStart(destination, purpose: exists ? .login : .signup, context: context)
            return try JSONResponse.make([String: String]())
        }
    }

    // MARK: POST /auth/v1/resend

    /// Another code (`resend`): a new verification of the same purpose, counted by otp-dispatch's
    /// limits like any start. `signup` resends the email's confirmation; `sms` a phone sign-in
    /// code. Answered alike whether or not the contact has an account.
    func supabaseResend(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        await supabase(request, context) {
            try limit(context, as: "/v1/otp/resend")
            let body = try await SupabaseRequest.read(request)
            let destination = try Self.supabaseContact(body)
            let type = body.string("type") ?? ""
            AuthDecisionNote.record(contact: destination.text, method: destination.isPhone ? "otp_sms" : "otp_email")
            let exists = try await contactExists(destination, context: context)
            switch type {
            case "signup" where !destination.isPhone:
                // Only an account whose email is not confirmed yet gets one; the answer is the same.
                let link = try confirmationLink(request, body)
                if exists.exists, !exists.verified {
                    try await supabaseStart(destination, purpose: .verify, link: link, context: context)
                }
            case "sms" where destination.isPhone:
                try await supabaseStart(destination, purpose: exists.exists ? .login : .signup, context: context)
            case "email_change", "phone_change":
                throw SupabaseError(
                    .badRequest,
                    "validation_failed",
                    "\(type) is not served on this door: change a contact with POST /v1/me/contact"
                )
            default:
                throw SupabaseError(.badRequest, "validation_failed", "Missing one of these types: signup, sms")
            }
            return try JSONResponse.make([String: String]())
        }
    }

    /// identity's ContactExists for the request's phone or email.
    /// `accountCheck`: the answer reaches the client, one of its IP's account checks.
    func contactExists(
        _ destination: SupabaseContact,
        accountCheck: Bool = false,
        context: GatewayRequestContext
    ) async throws -> Auth_Identity_V1_ContactExistsResponse {
        try await backends.call(.identity, context) { options in
            try await backends.identity.contactExists(
                Auth_Identity_V1_ContactExistsRequest(
                    phone: destination.isPhone ? destination.text : "",
                    email: destination.isPhone ? "" : destination.text,
                    clientIP: context.clientIP,
                    accountCheck: accountCheck
                ),
                options: options
            )
        }
    }

    /// otp-dispatch's Start, its limits as Supabase names them (`over_email_send_rate_limit`,
    /// `over_sms_send_rate_limit`).
    /// `decoy`: a verification never sent (`recover` for an email without an account); `link`:
    /// a sign-up's confirmation link.
    func supabaseStart(
        _ destination: SupabaseContact,
        purpose: Auth_Otp_V1_Purpose,
        decoy: Bool = false,
        link: ConfirmationLink = ConfirmationLink(),
        context: GatewayRequestContext
    ) async throws {
        do {
            _ = try await backends.call(.otpDispatch, context) { options in
                try await backends.otp.start(
                    Auth_Otp_V1_StartRequest(
                        destination: destination.text,
                        purpose: purpose,
                        clientIP: context.clientIP,
                        decoy: decoy,
                        subject: link.subject,
                        linkBase: link.base
                    ),
                    options: options
                )
            }
        } catch let error as APIError where Self.isSendLimit(error) {
            throw Self.sendLimitError(error, phone: destination.isPhone)
        } catch let error as APIError where error.reason == "destination_not_allowed" {
            throw SupabaseError(.badRequest, "sms_send_failed", error.message)
        }
    }

    /// otp-dispatch's start limits, as the gateway names them.
    static func isSendLimit(_ error: APIError) -> Bool {
        ["rate_limited", "resend_too_soon", "country_throttled", "too_many_attempts"].contains(error.reason)
    }

    /// A start limit as Supabase names it: `over_sms_send_rate_limit` or
    /// `over_email_send_rate_limit`, with `Retry-After`.
    static func sendLimitError(_ error: APIError, phone: Bool) -> SupabaseError {
        SupabaseError(
            .tooManyRequests,
            phone ? "over_sms_send_rate_limit" : "over_email_send_rate_limit",
            "For security purposes, you can only request this after \(error.retryAfter ?? 60) seconds.",
            retryAfter: error.retryAfter
        )
    }

    // MARK: POST /auth/v1/verify

    /// A code by contact and code (`verifyOtp`): `sms`, `email`, `magiclink` and `signup` sign in
    /// (the account is created or its contact confirmed as by `/v1/otp/verify`); `recovery`
    /// signs in for a new password; `email_change` and `phone_change` set the contact a
    /// `PUT /auth/v1/user` asked for and sign in. A wrong, expired or unknown code is 403
    /// `otp_expired`, our lockout 429 `over_request_rate_limit`.
    func supabaseVerify(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        await supabase(request, context) {
            try limit(context, as: "/v1/otp/verify")
            let body = try await SupabaseRequest.read(request)
            let type = body.string("type") ?? ""
            let served = ["sms", "email", "magiclink", "signup", "recovery", "email_change", "phone_change"]
            guard served.contains(type) else {
                if type == "invite" {
                    throw SupabaseError(.badRequest, "validation_failed", "Verify type \(type) is not served yet")
                }
                throw SupabaseError(.badRequest, "validation_failed", "Verify requires a verification type")
            }
            guard body.string("token_hash") == nil else {
                throw SupabaseError(
                    .badRequest,
                    "validation_failed",
                    "Verify by token_hash is not served: send the code"
                )
            }
            let destination = try Self.supabaseContact(body)
            guard ["sms", "phone_change"].contains(type) == destination.isPhone else {
                throw SupabaseError(
                    .badRequest,
                    "validation_failed",
                    destination.isPhone
                        ? "A phone is verified with type sms or phone_change"
                        : "An email is not verified with type \(type)"
                )
            }
            let token = (body.string("token") ?? "").trimmingWhitespace()
            switch type {
            case "recovery":
                let checked = try await supabaseCheck(token, destination, [.passwordReset], context)
                return try await supabaseRecoverySession(checked, request, context)
            case "email_change", "phone_change":
                // The code binds the change to the account that asked for it (PUT /auth/v1/user).
                let checked = try await supabaseCheck(token, destination, [.changeContact], context)
                let user: Auth_Identity_V1_User
                do {
                    user = try await changeContact(of: checked.subject, provedBy: checked, context: context)
                } catch let error as APIError where error.reason == "contact_taken" {
                    throw SupabaseError(
                        .unprocessableContent,
                        destination.isPhone ? "phone_exists" : "email_exists",
                        "Another account has confirmed this \(destination.isPhone ? "phone number" : "email address")"
                    )
                }
                return try await supabaseSignIn(
                    user,
                    amr: checked.channel == .sms ? "otp_sms" : "otp_email",
                    request,
                    context
                )
            default: break
            }
            let checked = try await supabaseCheck(token, destination, [.login, .signup, .verify], context)
            let (user, _) = try await account(provedBy: checked, context: context)
            return try await supabaseSignIn(
                user,
                amr: checked.channel == .sms ? "otp_sms" : "otp_email",
                request,
                context
            )
        }
    }

    /// otp-dispatch's Check by destination: any wrong, expired, spent or unknown code is 403
    /// `otp_expired` (Supabase's one code for all); the lockout stays 429.
    private func supabaseCheck(
        _ token: String,
        _ destination: SupabaseContact,
        _ purposes: Set<Auth_Otp_V1_Purpose>,
        _ context: GatewayRequestContext
    ) async throws -> Auth_Otp_V1_CheckResponse {
        do {
            guard Self.isSixDigitCode(token) else { throw APIError.verificationNotFound }
            return try await checkCode(destination: destination.text, code: token, purposes: purposes, context: context)
        } catch let error as APIError where Self.isSpentCode(error) {
            throw SupabaseError(.forbidden, "otp_expired", "Token has expired or is invalid")
        }
    }

    /// The `email` or `phone` of a request (exactly one): a phone is taken with or without its
    /// `+`, as Supabase's clients send it.
    static func supabaseContact(_ body: SupabaseRequest) throws -> SupabaseContact {
        let email = body.string("email").flatMap { $0.isEmpty ? nil : $0 }
        let phone = body.string("phone").flatMap { $0.isEmpty ? nil : $0 }
        switch (email, phone) {
        case (let email?, nil):
            guard EmailAddress(email) != nil else {
                throw SupabaseError(
                    .badRequest,
                    "validation_failed",
                    "Unable to validate email address: invalid format"
                )
            }
            return SupabaseContact(text: email, isPhone: false)
        case (nil, let phone?):
            let e164 = phone.hasPrefix("+") ? phone : "+" + phone
            guard PhoneNumber(e164) != nil else {
                throw SupabaseError(.badRequest, "validation_failed", "Invalid phone number format (E.164 required)")
            }
            return SupabaseContact(text: e164, isPhone: true)
        case (nil, nil):
            throw SupabaseError(
                .badRequest,
                "validation_failed",
                "Only an email address or phone number should be provided"
            )
        default:
            throw SupabaseError(
                .badRequest,
                "validation_failed",
                "Only an email address or phone number should be provided"
            )
        }
    }

    // MARK: POST /auth/v1/token?grant_type=id_token

    /// `signInWithIdToken`: Apple, Google or Facebook ID tokens, verified and spent as on
    /// `/v1/idtoken`, the nonce hashed for every provider (Supabase's rule).
    func supabaseIDTokenGrant(
        _ body: SupabaseRequest,
        _ request: Request,
        _ context: GatewayRequestContext
    ) async throws -> Response {
        let name = body.string("provider") ?? ""
        guard let provider = Provider(rawValue: name) else {
            throw SupabaseError(
                .badRequest,
                "validation_failed",
                "Custom OIDC provider \"\(name.prefix(32))\" not allowed"
            )
        }
        guard let idToken = body.string("id_token"), !idToken.isEmpty else {
            throw SupabaseError(.badRequest, "validation_failed", "id_token required")
        }
        AuthDecisionNote.record(method: "oidc_\(provider.rawValue)")
        if body.bool("link_identity") == true {
            return try await supabaseLinkIDToken(
                provider,
                idToken: idToken,
                nonce: body.string("nonce") ?? "",
                request,
                context
            )
        }
        let signedIn: Auth_Identity_V1_SignInWithIDTokenResponse
        do {
            signedIn = try await backends.call(.identity, context) { options in
                try await backends.identity.signInWithIDToken(
                    Auth_Identity_V1_SignInWithIDTokenRequest(
                        provider: provider.proto,
                        idToken: idToken,
                        rawNonce: body.string("nonce") ?? "",
                        clientIP: context.clientIP,
                        nonceHashed: true
                    ),
                    options: options
                )
            }
        } catch let error as APIError where error.reason == "provider_not_enabled" {
            throw SupabaseError(
                .badRequest,
                "provider_disabled",
                "Provider (issuer) \(provider.rawValue) is not enabled"
            )
        } catch let error as APIError where error.reason == "invalid_id_token" {
            throw SupabaseError(.badRequest, "bad_oidc_token", error.message)
        }
        guard let user = signedIn.user else { throw APIError.internalError }
        return try await supabaseSignIn(user, amr: "oidc_\(provider.rawValue)", request, context)
    }
}

/// A request's phone (E.164, `+` added when the client left it out) or email.
struct SupabaseContact: Sendable {
    var text: String
    var isPhone: Bool
}
