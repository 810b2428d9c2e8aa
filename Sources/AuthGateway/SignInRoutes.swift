import AuthAPI
import AuthConfiguration
import AuthCrypto
import AuthProtobuf
import AuthText
import HTTPTypes
import Hummingbird
import Logging

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The routes of the API (docs/gateway.md#routes), each implemented by calls to the services.
/// This file: the unauthenticated routes that send codes and sign in.
struct GatewayRoutes: Sendable {
    let backends: Backends
    let authenticator: AccessTokenAuthenticator
    /// Per client IP and route, on every unauthenticated `/v1` and `/api` route.
    let routeLimiter: RateLimiter
    let jwksMaxAge: Duration
    /// `DELETE /v1/me` needs a session signed in at most this long ago (`AUTH_GATEWAY_REAUTH_SECONDS`).
    var reauthenticationWindow: Duration = .seconds(300)
    /// `AUTH_PUBLIC_URL`: the URL providers sign their callbacks against.
    var publicURL: String?
    /// `AUTH_SUPABASE_ANON_KEYS`: the `apikey` values the Supabase door accepts (empty: any).
    var supabaseAnonKeys: Set<String> = []
    /// `AUTH_OAUTH_REDIRECT_URLS`: where a followed confirmation link may send the browser.
    var redirectAllowList = RedirectAllowList()
    let logger: Logger

    enum Purpose: String, CaseIterable { case login, signup, auto }
    enum Provider: String, CaseIterable {
        case apple, google, facebook

        var proto: Auth_Identity_V1_Provider {
            switch self {
            case .apple: .apple
            case .google: .google
            case .facebook: .facebook
            }
        }
    }
    enum Scope: String, CaseIterable { case local, global, others }
    enum Platform: String, CaseIterable { case ios, android, web }

    /// The optional members every sign-in and refresh body takes to name the device.
    static let deviceFields: Set<String> = ["device_name", "platform"]
    /// The longest `device_name`, in bytes of UTF-8 (session's limit).
    static let maxDeviceNameBytes = 128

    /// Takes one request from the client's budget for this operation, or answers 429
    /// `rate_limited`. Budgets are kept per operation, not per path: the seed apps' alias
    /// `/api/auth/login` spends `/v1/login`'s (two paths were once two budgets, twice the guesses).
    func limit(_ context: GatewayRequestContext, as operationPath: String? = nil) throws {
        let route = operationPath ?? context.endpointPath ?? ""
        let operation = Self.operationAliases[route] ?? route
        let decision = routeLimiter.acquire("\(operation) \(IPAddress.rateLimitKey(of: context.clientIP))", now: .now)
        guard decision.allowed else { throw APIError.rateLimited(retryAfter: decision.retryAfterSeconds) }
    }

    /// Paths that are another name of one operation, to the operation's own path.
    static let operationAliases: [String: String] = ["/api/auth/login": "/v1/login"]

    /// The device of a session: `device_name` and `platform` from the body when given (checked
    /// before anything is done, a 400 naming the member otherwise) and the app's `User-Agent`
    /// (at most 512 bytes, printable).
    func device(_ request: Request, _ body: JSONRequest) throws(APIError) -> Auth_Session_V1_Device {
        var device = Auth_Session_V1_Device()
        if let name = try body.string("device_name") {
            guard !name.isEmpty, name.utf8.count <= Self.maxDeviceNameBytes,
                !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            else {
                throw APIError.invalidRequest(
                    "`device_name` must be 1 to \(Self.maxDeviceNameBytes) bytes of text without control characters."
                )
            }
            device.name = name
        }
        if body.has("platform") {
            device.platform = try body.choice("platform", default: Platform?.none).rawValue
        }
        if let agent = request.headers[.userAgent] {
            let printable = agent.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }
            var text = String(String.UnicodeScalarView(printable))
            while text.utf8.count > 512 { text.removeLast() }
            device.userAgent = text
        }
        return device
    }

    /// Starts a session for `user` (session's Issue): both doors' sign-ins.
    /// `also`: more methods the session records (the Supabase door's `recovery`); `format`
    /// `.supabase`: the access tokens carry the claims Supabase's clients read, with the user's
    /// email and phone.
    func issueSession(
        format: Auth_Session_V1_AccessTokenFormat = .standard,
        _ user: Auth_Identity_V1_User,
        amr: String,
        also: [String] = [],
        device: Auth_Session_V1_Device,
        context: GatewayRequestContext
    ) async throws -> Auth_Session_V1_TokenPair {
        AuthDecisionNote.record(userID: user.id)
        var issue = Auth_Session_V1_IssueRequest(
            userID: user.id,
            amr: [amr] + also,
            device: device,
            clientIP: context.clientIP,
            tokenFormat: format
        )
        if format == .supabase {
            issue.email = user.email
            issue.phone = user.phone
        }
        let request = issue
        let issued = try await backends.call(.session, context) { options in
            try await backends.session.issue(request, options: options)
        }
        guard let tokens = issued.tokens else { throw APIError.internalError }
        return tokens
    }

    /// Starts a session for `user` and answers with the session body.
    func signIn(
        _ user: Auth_Identity_V1_User,
        amr: String,
        isNewUser: Bool,
        device: Auth_Session_V1_Device,
        context: GatewayRequestContext,
        status: HTTPResponse.Status = .ok,
        verificationID: String?? = nil
    ) async throws -> Response {
        let tokens = try await issueSession(user, amr: amr, device: device, context: context)
        return try JSONResponse.make(
            SessionBody(tokens: tokens, user: user, isNewUser: isNewUser, verificationID: verificationID),
            status: status
        )
    }

    static func isSixDigitCode(_ code: String) -> Bool {
        code.utf8.count == 6 && code.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    static func verificationBody(
        id: String,
        channel: Auth_Otp_V1_Channel,
        masked: String,
        expiresIn: UInt32,
        resendAfter: UInt32,
        attemptsRemaining: UInt32
    ) -> VerificationBody {
        VerificationBody(
            verificationID: id,
            channel: channel == .sms ? "sms" : "email",
            destination: masked,
            expiresIn: Int(expiresIn),
            resendAfter: Int(resendAfter),
            attemptsRemaining: Int(attemptsRemaining)
        )
    }

    /// A started verification's answer (`/v1/otp/send`, `/v1/me/contact`).
    static func verificationBody(_ started: Auth_Otp_V1_StartResponse) -> VerificationBody {
        verificationBody(
            id: started.verificationID,
            channel: started.channel,
            masked: started.maskedDestination,
            expiresIn: started.expiresIn,
            resendAfter: started.resendAfter,
            attemptsRemaining: started.attemptsRemaining
        )
    }

    // MARK: POST /v1/otp/send

    func sendCode(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        try limit(context)
        let body = try await JSONRequest.read(request, allowed: ["phone", "email", "purpose", "locale"])
        let phone = try body.string("phone")
        let email = try body.string("email")
        guard (phone == nil) != (email == nil) else {
            throw APIError.invalidRequest("exactly one of `phone` and `email` is required.")
        }
        AuthDecisionNote.record(contact: phone ?? email, method: phone != nil ? "otp_sms" : "otp_email")
        let purpose = try body.choice("purpose", default: Purpose.auto)
        let locale = try body.string("locale") ?? ""
        guard locale.isEmpty || LanguageTag.isValid(locale) else {
            throw APIError.invalidRequest("`locale` must be a language tag such as en-IN.")
        }
        // `login`'s "no account found" and `signup`'s "account exists" tell whether an account
        // exists: one of the client IP's account checks, counted by identity (issue 19, item 7;
        // issue 23 §4). `auto` tells nothing.
        let exists = try await backends.call(.identity, context) { options in
            try await backends.identity.contactExists(
                Auth_Identity_V1_ContactExistsRequest(
                    phone: phone ?? "",
                    email: email ?? "",
                    clientIP: context.clientIP,
                    accountCheck: purpose != .auto
                ),
                options: options
            )
        }.exists
        let otpPurpose: Auth_Otp_V1_Purpose
        switch purpose {
        case .login:
            guard exists else { throw APIError.accountNotFound }
            otpPurpose = .login
        case .signup:
            guard !exists else { throw APIError.accountExists }
            otpPurpose = .signup
        case .auto:
            otpPurpose = exists ? .login : .signup
        }
        let started = try await backends.call(.otpDispatch, context) { options in
            try await backends.otp.start(
                Auth_Otp_V1_StartRequest(
                    destination: phone ?? email ?? "",
                    purpose: otpPurpose,
                    locale: locale,
                    clientIP: context.clientIP
                ),
                options: options
            )
        }
        return try JSONResponse.make(Self.verificationBody(started))
    }

    // MARK: POST /v1/otp/resend

    func resendCode(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        try limit(context)
        let body = try await JSONRequest.read(request, allowed: ["verification_id"])
        let verificationID = try body.requiredString("verification_id")
        var rules = ServiceErrorMapping.Rules()
        rules.verificationRoute = true
        let resent = try await backends.call(.otpDispatch, context, rules: rules) { options in
            try await backends.otp.resend(
                Auth_Otp_V1_ResendRequest(verificationID: verificationID, clientIP: context.clientIP),
                options: options
            )
        }
        AuthDecisionNote.record(
            masked: resent.maskedDestination,
            method: resent.channel == .sms ? "otp_sms" : "otp_email"
        )
        return try JSONResponse.make(
            Self.verificationBody(
                id: resent.verificationID,
                channel: resent.channel,
                masked: resent.maskedDestination,
                expiresIn: resent.expiresIn,
                resendAfter: resent.resendAfter,
                attemptsRemaining: resent.attemptsRemaining
            )
        )
    }

    // MARK: GET /v1/otp/{verification_id}

    /// Where a code's message is and when it may be resent ("SMS not received?"): 404
    /// `verification_not_found` for an id that is not a pending verification.
    func codeStatus(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        try limit(context)
        guard let text = context.parameters.get("verification_id"), let id = UUID(uuidString: text) else {
            throw APIError.verificationNotFound
        }
        var rules = ServiceErrorMapping.Rules()
        rules.verificationRoute = true
        let status = try await backends.call(.otpDispatch, context, rules: rules) { options in
            try await backends.otp.getDeliveryStatus(
                Auth_Otp_V1_GetDeliveryStatusRequest(verificationID: id.uuidString.lowercased()),
                options: options
            )
        }
        guard status.pending else { throw APIError.verificationNotFound }
        return try JSONResponse.make(
            CodeStatusBody(
                status: Self.deliveryStatusName(status.state),
                channel: status.channel == .sms ? "sms" : "email",
                destination: status.maskedDestination,
                expiresIn: Int(status.expiresIn),
                resendAfter: Int(status.resendAfter),
                resendsRemaining: Int(status.resendsRemaining)
            )
        )
    }

    /// A message's state as apps see it. A test destination's code is never sent but reads
    /// `sent` (it is "on its way" as far as the app knows); a verification whose message is
    /// not written yet reads `queued`.
    static func deliveryStatusName(_ state: Auth_Otp_V1_DeliveryState) -> String {
        switch state {
        case .sent, .notSentTestDestination: "sent"
        case .delivered: "delivered"
        case .failed: "failed"
        default: "queued"
        }
    }

    /// Checks a code with otp-dispatch; `purposes` are the ones this route accepts: another
    /// purpose's verification is not a live one here (404), and otp-dispatch leaves it untouched.
    /// otp-dispatch's Check of `code` against the verification `verificationID`, or (the
    /// Supabase door) against the newest pending one of `destination`.
    func checkCode(
        verificationID: String = "",
        destination: String = "",
        linkToken: String = "",
        code: String,
        purposes: Set<Auth_Otp_V1_Purpose>,
        context: GatewayRequestContext
    ) async throws -> Auth_Otp_V1_CheckResponse {
        guard !linkToken.isEmpty || Self.isSixDigitCode(code) else {
            throw APIError.invalidRequest("`code` must be 6 digits.")
        }
        var rules = ServiceErrorMapping.Rules()
        rules.verificationRoute = true
        let checked = try await backends.call(.otpDispatch, context, rules: rules) { options in
            try await backends.otp.check(
                Auth_Otp_V1_CheckRequest(
                    verificationID: verificationID,
                    code: code,
                    clientIP: context.clientIP,
                    acceptedPurposes: purposes.sorted { $0.rawValue < $1.rawValue },
                    destination: destination,
                    linkToken: linkToken
                ),
                options: options
            )
        }
        AuthDecisionNote.record(contact: checked.destination, method: checked.channel == .sms ? "otp_sms" : "otp_email")
        // otp-dispatch refuses other purposes itself; this only guards against an older one.
        guard purposes.contains(checked.purpose) else {
            var notFound = APIError.verificationNotFound
            notFound.detail = "a code for purpose \(checked.purpose) was sent to this route"
            throw notFound
        }
        return checked
    }

    // MARK: POST /v1/otp/verify

    func verifyCode(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        try limit(context)
        let body = try await JSONRequest.read(request, allowed: Self.deviceFields.union(["verification_id", "code"]))
        let device = try device(request, body)
        let verificationID = try body.requiredString("verification_id")
        let code = try body.requiredString("code")
        let checked = try await checkCode(
            verificationID: verificationID,
            code: code,
            purposes: [.login, .signup, .verify],
            context: context
        )
        let (user, created) = try await account(provedBy: checked, context: context)
        return try await signIn(
            user,
            amr: checked.channel == .sms ? "otp_sms" : "otp_email",
            isNewUser: created,
            device: device,
            context: context
        )
    }

    /// The account a proved sign-in code signs in to (both doors): identity's
    /// FindOrCreateByContact marks the phone or email verified, creating the account if none has
    /// it. Only a sign-up's own `verify` code proves the email for the person who set the
    /// password; any other proves it for the code's holder, and identity then clears a password
    /// set before the proof (docs/security.md, pre-hijacking), ending every session of whoever
    /// set it.
    func account(
        provedBy checked: Auth_Otp_V1_CheckResponse,
        context: GatewayRequestContext
    ) async throws -> (user: Auth_Identity_V1_User, created: Bool) {
        let isSMS = checked.channel == .sms
        let found = try await backends.call(.identity, context) { options in
            try await backends.identity.findOrCreateByContact(
                Auth_Identity_V1_FindOrCreateByContactRequest(
                    phone: isSMS ? checked.destination : "",
                    email: isSMS ? "" : checked.destination,
                    clientIP: context.clientIP,
                    signupVerification: checked.purpose == .verify
                ),
                options: options
            )
        }
        guard let user = found.user else { throw APIError.internalError }
        if found.passwordCleared {
            try await backends.revokeAllSessions(userID: user.id, reason: "contact_proved_password_cleared", context)
        }
        return (user, found.created)
    }

    // MARK: POST /v1/signup

    func signUp(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        try limit(context)
        let body = try await JSONRequest.read(
            request,
            allowed: Self.deviceFields.union(["display_name", "email", "password"])
        )
        let device = try device(request, body)
        let displayName = try body.requiredString("display_name")
        let email = try body.requiredString("email")
        let password = try body.requiredString("password")
        AuthDecisionNote.record(contact: email, method: "password")
        // 409 `email_taken` tells whether an account exists: one of the client IP's account
        // checks, counted by identity (issue 19, item 7; issue 23 §4).
        let user = try await createAccount(
            Auth_Identity_V1_SignUpRequest(
                displayName: displayName,
                email: email,
                password: password,
                accountCheck: true
            ),
            context: context
        )
        // The email verification code. The account exists already: if the code cannot be sent
        // now, the app asks for one later (`verification_id` null), the sign-up still stands.
        var verificationID: String?? = .some(nil)
        do {
            let started = try await backends.call(.otpDispatch, context) { options in
                try await backends.otp.start(
                    Auth_Otp_V1_StartRequest(destination: user.email, purpose: .verify, clientIP: context.clientIP),
                    options: options
                )
            }
            verificationID = .some(started.verificationID)
        } catch let error as APIError {
            logger.warning(
                "Sign-up: the email verification code was not sent",
                metadata: ["error": "\(error)", "user.id": "\(user.id)"]
            )
        }
        return try await signIn(
            user,
            amr: "pwd",
            isNewUser: true,
            device: device,
            context: context,
            status: .created,
            verificationID: verificationID
        )
    }

    /// identity's SignUp (both doors): a refused field is 422 `validation_failed` with `fields`
    /// named as the request's members; a taken email 409 `email_taken`.
    func createAccount(
        _ signUp: Auth_Identity_V1_SignUpRequest,
        context: GatewayRequestContext
    ) async throws -> Auth_Identity_V1_User {
        var request = signUp
        request.clientIP = context.clientIP
        var rules = ServiceErrorMapping.Rules()
        rules.validationFields = ["display_name": "display_name", "email": "email", "password": "password"]
        let created = try await backends.call(.identity, context, rules: rules) { options in
            try await backends.identity.signUp(request, options: options)
        }
        guard let user = created.user else { throw APIError.internalError }
        return user
    }

    // MARK: POST /v1/login, POST /api/auth/login

    func logIn(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        try limit(context)
        let body = try await JSONRequest.read(request, allowed: Self.deviceFields.union(["email", "password"]))
        let device = try device(request, body)
        let email = try body.requiredString("email")
        let password = try body.requiredString("password")
        AuthDecisionNote.record(contact: email, method: "password")
        let user = try await checkPassword(email: email, password: password, context: context)
        return try await signIn(user, amr: "pwd", isNewUser: false, device: device, context: context)
    }

    /// identity's SignInWithPassword (an email that is not an address is `invalid_credentials`,
    /// like a wrong password): both doors' password sign-in.
    func checkPassword(
        email: String,
        phone: String = "",
        password: String,
        context: GatewayRequestContext
    ) async throws
        -> Auth_Identity_V1_User
    {
        var rules = ServiceErrorMapping.Rules()
        rules.credentialsRoute = true
        let signedIn = try await backends.call(.identity, context, rules: rules) { options in
            try await backends.identity.signInWithPassword(
                Auth_Identity_V1_SignInWithPasswordRequest(
                    email: email,
                    password: password,
                    clientIP: context.clientIP,
                    phone: phone
                ),
                options: options
            )
        }
        guard let user = signedIn.user else { throw APIError.internalError }
        return user
    }

    // MARK: POST /v1/idtoken

    func signInWithIDToken(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        try limit(context)
        let body = try await JSONRequest.read(
            request,
            allowed: Self.deviceFields.union(["provider", "id_token", "nonce", "display_name"])
        )
        let device = try device(request, body)
        let provider = try body.choice("provider", default: Provider?.none)
        let idToken = try body.requiredString("id_token")
        let nonce = try body.string("nonce")
        let displayName = try body.string("display_name") ?? ""
        AuthDecisionNote.record(method: "oidc_\(provider.rawValue)")
        if provider != .facebook, (nonce ?? "").isEmpty {
            throw APIError.invalidRequest("`nonce` is required for \(provider.rawValue).")
        }
        let rpcProvider = provider.proto
        let signedIn: Auth_Identity_V1_SignInWithIDTokenResponse
        do {
            signedIn = try await backends.call(.identity, context) { options in
                try await backends.identity.signInWithIDToken(
                    Auth_Identity_V1_SignInWithIDTokenRequest(
                        provider: rpcProvider,
                        idToken: idToken,
                        rawNonce: nonce ?? "",
                        displayName: displayName,
                        clientIP: context.clientIP
                    ),
                    options: options
                )
            }
        } catch var error as APIError where error.reason == "provider_not_enabled" {
            error.message =
                "\(provider.rawValue.prefix(1).uppercased() + provider.rawValue.dropFirst()) Sign-In is not configured. Please use email/password."
            throw error
        }
        guard let user = signedIn.user else { throw APIError.internalError }
        return try await signIn(
            user,
            amr: "oidc_\(provider.rawValue)",
            isNewUser: signedIn.created,
            device: device,
            context: context
        )
    }

    // MARK: POST /v1/password/reset

    func requestPasswordReset(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        try limit(context)
        let body = try await JSONRequest.read(request, allowed: ["email"])
        let email = try body.requiredString("email")
        AuthDecisionNote.record(contact: email)
        let exists = try await backends.call(.identity, context) { options in
            try await backends.identity.contactExists(
                Auth_Identity_V1_ContactExistsRequest(email: email),
                options: options
            )
        }.exists
        // The same answer whether or not the account exists, here and on every route the id is
        // used with afterwards: without an account the id is a decoy verification, counted by
        // every limit like a real one and never sent (issue 19, item 7). When otp-dispatch
        // refuses the start (a limit), either way the id is one that is not live.
        var verificationID = SecureRandom.uuid().uuidString.lowercased()
        do {
            verificationID = try await backends.call(.otpDispatch, context) { options in
                try await backends.otp.start(
                    Auth_Otp_V1_StartRequest(
                        destination: email,
                        purpose: .passwordReset,
                        clientIP: context.clientIP,
                        decoy: !exists
                    ),
                    options: options
                )
            }.verificationID
        } catch let error as APIError where error.status != .serviceUnavailable {
            logger.notice("Password reset: no code sent", metadata: ["error": "\(error)"])
        }
        return try JSONResponse.make(PasswordResetStartedBody(verificationID: verificationID), status: .accepted)
    }

    // MARK: POST /v1/password/reset/confirm

    func confirmPasswordReset(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        try limit(context)
        let body = try await JSONRequest.read(
            request,
            allowed: Self.deviceFields.union(["verification_id", "code", "password"])
        )
        let device = try device(request, body)
        let verificationID = try body.requiredString("verification_id")
        let code = try body.requiredString("code")
        let password = try body.requiredString("password")
        var passwordRules = ServiceErrorMapping.Rules()
        passwordRules.validationFields = ["password": "password", "new_password": "password"]
        // The new password first: a 422 leaves the verification and its attempts untouched.
        _ = try await backends.call(.identity, context, rules: passwordRules) { options in
            try await backends.identity.validatePassword(
                Auth_Identity_V1_ValidatePasswordRequest(password: password),
                options: options
            )
        }
        let checked = try await checkCode(
            verificationID: verificationID,
            code: code,
            purposes: [.passwordReset],
            context: context
        )
        // Every session ends before the password changes (issue 19: a RevokeAll lost after the
        // change left them alive, and the consumed code allowed no second try). If session
        // cannot be reached, the answer is 503 and the password is unchanged.
        let owner: Auth_Identity_V1_GetUserResponse
        do {
            owner = try await backends.call(.identity, context) { options in
                try await backends.identity.getUserByEmail(
                    Auth_Identity_V1_GetUserByEmailRequest(email: checked.destination),
                    options: options
                )
            }
        } catch let error as APIError where error.reason == "user_not_found" {
            // Deleted since the code was sent.
            var notFound = APIError.verificationNotFound
            notFound.detail = error.detail
            throw notFound
        }
        guard let ownerID = owner.user?.id else { throw APIError.internalError }
        try await backends.revokeAllSessions(userID: ownerID, reason: "password_reset", context)
        let reset: Auth_Identity_V1_ResetPasswordResponse
        do {
            reset = try await backends.call(.identity, context, rules: passwordRules) { options in
                try await backends.identity.resetPassword(
                    Auth_Identity_V1_ResetPasswordRequest(
                        email: checked.destination,
                        newPassword: password,
                        clientIP: context.clientIP
                    ),
                    options: options
                )
            }
        } catch let error as APIError where error.reason == "user_not_found" {
            // Deleted since the code was sent.
            var notFound = APIError.verificationNotFound
            notFound.detail = error.detail
            throw notFound
        }
        guard let user = reset.user else { throw APIError.internalError }
        // Again after the change, for a session started with the old password in between
        // (best effort: the ones from before the change are already gone).
        do {
            try await backends.revokeAllSessions(userID: user.id, reason: "password_reset", context)
        } catch {
            logger.warning(
                "Password reset: the second revocation failed",
                metadata: ["error": "\(error)", "user.id": "\(user.id)"]
            )
        }
        return try await signIn(user, amr: "otp_email", isNewUser: false, device: device, context: context)
    }

    // MARK: POST /v1/token/refresh

    func refresh(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        try limit(context)
        let body = try await JSONRequest.read(request, allowed: Self.deviceFields.union(["refresh_token"]))
        let device = try device(request, body)
        let refreshToken = try body.requiredString("refresh_token")
        let refreshed: Auth_Session_V1_RefreshResponse
        do {
            refreshed = try await backends.call(.session, context) { options in
                try await backends.session.refresh(
                    Auth_Session_V1_RefreshRequest(
                        refreshToken: refreshToken,
                        clientIP: context.clientIP,
                        device: device
                    ),
                    options: options
                )
            }
        } catch let error as APIError where error.reason == "invalid_request" {
            // An empty token: not one the service issued.
            throw ServiceErrorMapping.invalidRefreshToken(detail: error.detail)
        }
        guard let tokens = refreshed.tokens else { throw APIError.internalError }
        // A session service older than RefreshResponse.user_id leaves it empty: the new token's
        // subject then says it.
        let userID =
            refreshed.userID.isEmpty
            ? try await authenticator.verifyLocally(tokens.accessToken).subject : refreshed.userID
        let user: Auth_Identity_V1_User
        do {
            user = try await getUser(userID, context: context)
        } catch let error as APIError where error.reason == "invalid_token" {
            throw ServiceErrorMapping.invalidRefreshToken(detail: error.detail)
        }
        return try JSONResponse.make(SessionBody(tokens: tokens, user: user, isNewUser: false))
    }

    /// The signed-in user (`user_not_found`: 401 `invalid_token`).
    func getUser(_ userID: String, context: GatewayRequestContext) async throws -> Auth_Identity_V1_User {
        var rules = ServiceErrorMapping.Rules()
        rules.signedInUser = true
        let response = try await backends.call(.identity, context, rules: rules) { options in
            try await backends.identity.getUser(Auth_Identity_V1_GetUserRequest(userID: userID), options: options)
        }
        guard let user = response.user else { throw APIError.internalError }
        return user
    }
}

extension ServiceErrorMapping {
    static func invalidRefreshToken(detail: String?) -> APIError {
        APIError(
            .unauthorized,
            "invalid_refresh_token",
            "Your session is no longer valid. Please sign in again.",
            detail: detail
        )
    }
}
