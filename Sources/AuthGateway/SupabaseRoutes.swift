import AuthProtobuf
import AuthText
import HTTPTypes
import Hummingbird

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The Supabase Auth (GoTrue) door under `/auth/v1` (issue 22; docs/supabase.md): the same
/// services, users, sessions and limits as `/v1`, answered in Supabase's shapes so that its
/// clients sign in unchanged. Lenient where Supabase's clients send more than we read (extra and
/// null members are ignored); errors in Supabase's two shapes (``SupabaseError``).
extension GatewayRoutes {
    static let supabaseAPIVersion = HTTPField.Name("X-Supabase-Api-Version")!
    static let supabaseErrorCode = HTTPField.Name("x-sb-error-code")!
    static let apikey = HTTPField.Name("apikey")!

    /// Runs `body` with Supabase's error shapes: any failure becomes a ``SupabaseError``.
    /// `anonKey` false: the route takes no `apikey` (a browser opens it).
    func supabase(
        _ request: Request,
        _ context: GatewayRequestContext,
        anonKey: Bool = true,
        _ body: () async throws -> Response
    ) async -> Response {
        let modern = request.headers[Self.supabaseAPIVersion].map { $0 >= "2024-01-01" } ?? false
        do {
            if anonKey { try checkAnonKey(request) }
            return try await body()
        } catch let error as SupabaseError {
            return error.response(modern: modern)
        } catch let error as APIError {
            if error.status.code >= 500 {
                logger.warning(
                    "Supabase door: a service failed",
                    metadata: ["error": "\(error)", "request_id": "\(context.requestID)"]
                )
            }
            return SupabaseError(error).response(modern: modern)
        } catch {
            logger.error("Supabase door: unexpected error", metadata: ["error": "\(error)"])
            return SupabaseError(.internalServerError, "unexpected_failure", "Unexpected failure").response(
                modern: modern
            )
        }
    }

    /// `AUTH_SUPABASE_ANON_KEYS`: when set, the `apikey` header must be one of them (401 otherwise).
    private func checkAnonKey(_ request: Request) throws {
        guard !supabaseAnonKeys.isEmpty else { return }
        guard let key = request.headers[Self.apikey], supabaseAnonKeys.contains(key) else {
            throw SupabaseError(.unauthorized, "no_authorization", "Invalid API key")
        }
    }

    // MARK: GET /auth/v1/health, /auth/v1/.well-known/jwks.json

    func supabaseHealth(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        await supabase(request, context) {
            try JSONResponse.make(
                ["name": "GoTrue", "version": "auth-backend", "description": "Supabase Auth API of the auth backend"]
            )
        }
    }

    func supabaseJWKS(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        await supabase(request, context) { try await jwks(request, context: context) }
    }

    // MARK: GET /auth/v1/settings

    /// What this deployment signs in with, as Supabase's `settings`: `external` names every
    /// provider Supabase knows (the clients read the ones they offer), on for `email` and `phone`
    /// (codes and passwords), for Apple, Google and Facebook when identity has their ID-token or
    /// browser sign-in, off for the rest; sign-up open, the email and phone confirmed first.
    func supabaseSettings(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        await supabase(request, context) {
            try limit(context)
            let methods = try await backends.call(.identity, context) { options in
                try await backends.identity.getSignInMethods(
                    Auth_Identity_V1_GetSignInMethodsRequest(),
                    options: options
                )
            }
            let enabled = Set(methods.idTokenProviders + methods.redirectProviders)
            var external: [String: Bool] = [:]
            for name in Self.supabaseExternalProviders { external[name] = false }
            external["email"] = true
            external["phone"] = true
            for provider in Provider.allCases { external[provider.rawValue] = enabled.contains(provider.proto) }
            return try JSONResponse.make(
                SupabaseSettingsBody(
                    external: external,
                    disableSignup: false,
                    mailerAutoconfirm: false,
                    phoneAutoconfirm: false,
                    smsProvider: "",
                    samlEnabled: false
                )
            )
        }
    }

    /// The providers Supabase's `settings.external` lists (supabase/auth's `ProviderSettings`).
    static let supabaseExternalProviders = [
        "anonymous_users", "apple", "azure", "bitbucket", "discord", "email", "facebook", "figma", "fly", "github",
        "gitlab", "google", "kakao", "keycloak", "linkedin", "linkedin_oidc", "notion", "phone", "slack", "slack_oidc",
        "snapchat", "spotify", "twitch", "twitter", "workos", "zoom",
    ]

    // MARK: POST /auth/v1/token?grant_type=password|refresh_token

    func supabaseToken(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        await supabase(request, context) {
            let body = try await SupabaseRequest.read(request)
            let grant = try OAuthQuery(query: request)["grant_type"] ?? ""
            // The same budgets as the /v1 door's routes for the same operations: two doors are
            // not twice the guesses.
            let operations = [
                "password": "/v1/login", "refresh_token": "/v1/token/refresh", "id_token": "/v1/idtoken",
                "pkce": "/v1/oauth/token",
            ]
            try limit(context, as: operations[grant])
            switch grant {
            case "password": return try await supabasePasswordGrant(body, request, context)
            case "refresh_token": return try await supabaseRefreshGrant(body, request, context)
            case "id_token": return try await supabaseIDTokenGrant(body, request, context)
            case "pkce": return try await supabasePKCEGrant(body, request, context)
            default:
                throw SupabaseError(.badRequest, "validation_failed", "unsupported_grant_type")
            }
        }
    }

    private func supabasePasswordGrant(
        _ body: SupabaseRequest,
        _ request: Request,
        _ context: GatewayRequestContext
    ) async throws -> Response {
        let password = body.string("password") ?? ""
        let email = body.string("email").flatMap { $0.isEmpty ? nil : $0 }
        let phone = body.string("phone").flatMap { $0.isEmpty ? nil : $0 }
        guard (email == nil) != (phone == nil) else {
            throw SupabaseError(.badRequest, "validation_failed", "An email address or a phone number is required")
        }
        AuthDecisionNote.record(contact: email ?? phone, method: "password")
        // A phone as Supabase's clients send it: with or without its `+`.
        let e164 = phone.map { $0.hasPrefix("+") ? $0 : "+" + $0 }
        let user = try await checkPassword(email: email ?? "", phone: e164 ?? "", password: password, context: context)
        // Supabase confirms the contact first (docs/supabase.md).
        if email != nil, !user.emailVerified {
            throw SupabaseError(.badRequest, "email_not_confirmed", "Email not confirmed")
        }
        if phone != nil, !user.phoneVerified {
            throw SupabaseError(.badRequest, "phone_not_confirmed", "Phone not confirmed")
        }
        return try await supabaseSignIn(user, amr: "pwd", request, context)
    }

    private func supabaseRefreshGrant(
        _ body: SupabaseRequest,
        _ request: Request,
        _ context: GatewayRequestContext
    ) async throws -> Response {
        guard let refreshToken = body.string("refresh_token"), !refreshToken.isEmpty else {
            throw SupabaseError(
                .badRequest,
                "refresh_token_not_found",
                "Invalid Refresh Token: Refresh Token Not Found"
            )
        }
        let refreshed = try await backends.call(.session, context) { options in
            try await backends.session.refresh(
                Auth_Session_V1_RefreshRequest(
                    refreshToken: refreshToken,
                    clientIP: context.clientIP,
                    device: try device(request, JSONRequest(members: [:]))
                ),
                options: options
            )
        }
        guard let tokens = refreshed.tokens else { throw APIError.internalError }
        return try await supabaseSession(tokens, userID: refreshed.userID, context: context)
    }

    /// Starts a Supabase-format session for `user` (the device from the request's
    /// `User-Agent`) and answers the session body: every sign-in of this door.
    func supabaseSignIn(
        _ user: Auth_Identity_V1_User,
        amr: String,
        also: [String] = [],
        _ request: Request,
        _ context: GatewayRequestContext
    ) async throws -> Response {
        let tokens = try await issueSession(
            format: .supabase,
            user,
            amr: amr,
            also: also,
            device: try device(request, JSONRequest(members: [:])),
            context: context
        )
        return try await supabaseSession(tokens, userID: user.id, context: context)
    }

    /// The session body, its user read afresh (``supabaseUser(_:context:)``).
    func supabaseSession(
        _ tokens: Auth_Session_V1_TokenPair,
        userID: String,
        context: GatewayRequestContext
    ) async throws -> Response {
        try JSONResponse.make(
            SupabaseSessionBody(tokens: tokens, user: try await supabaseUser(userID, context: context), now: Date())
        )
    }

    /// The user with its identities, in one identity call (GetUser `with_identities`).
    func supabaseUser(_ userID: String, context: GatewayRequestContext) async throws -> SupabaseUserBody {
        let response = try await backends.call(.identity, context, rules: Self.signedInUserRules) { options in
            try await backends.identity.getUser(
                Auth_Identity_V1_GetUserRequest(userID: userID, withIdentities: true),
                options: options
            )
        }
        guard let user = response.user else { throw APIError.internalError }
        return SupabaseUserBody(user: user, identities: response.identities)
    }

    // MARK: GET /auth/v1/user

    func supabaseGetUser(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        await supabase(request, context) {
            let caller = try await supabaseSignedIn(request, context)
            return try JSONResponse.make(try await supabaseUser(caller.userID, context: context))
        }
    }

    // MARK: POST /auth/v1/logout?scope=global|local|others

    func supabaseLogout(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        await supabase(request, context) {
            let caller = try await supabaseSignedIn(request, context)
            // Supabase's default is global.
            let scope = try OAuthQuery(query: request)["scope"] ?? "global"
            switch scope {
            case "local":
                _ = try await backends.call(.session, context) { options in
                    try await backends.session.revoke(
                        Auth_Session_V1_RevokeRequest(
                            sessionID: caller.sessionID,
                            userID: caller.userID,
                            reason: "logout"
                        ),
                        options: options
                    )
                }
            case "global", "others":
                _ = try await backends.call(.session, context) { options in
                    try await backends.session.revokeAll(
                        Auth_Session_V1_RevokeAllRequest(
                            userID: caller.userID,
                            exceptSessionID: scope == "others" ? caller.sessionID : "",
                            reason: scope == "others" ? "logout_others" : "logout_global"
                        ),
                        options: options
                    )
                }
            default:
                throw SupabaseError(
                    .badRequest,
                    "validation_failed",
                    "Unsupported logout scope \"\(scope.prefix(32))\""
                )
            }
            return JSONResponse.noContent
        }
    }

    /// The caller of an authenticated route: no `Authorization` is 401 `no_authorization`; a token
    /// that is not a live session's (an anon key included) is 403 `bad_jwt`, as Supabase answers.
    func supabaseSignedIn(
        _ request: Request,
        _ context: GatewayRequestContext
    ) async throws -> AccessTokenAuthenticator.SignedIn {
        guard request.headers[.authorization] != nil else {
            throw SupabaseError(.unauthorized, "no_authorization", "This endpoint requires a valid Bearer token")
        }
        do {
            return try await signedIn(request, context)
        } catch let error as APIError where error.reason == "invalid_token" {
            throw SupabaseError(
                .forbidden,
                "bad_jwt",
                "invalid JWT: unable to parse or verify signature, token is expired or its session is gone"
            )
        }
    }

    // MARK: Everything else under /auth/v1

    /// What this door does not serve, answered as Supabase answers it when the feature is off:
    /// the admin API 403 `not_admin`; MFA 422 `mfa_totp_enroll_not_enabled` to enrol (POST
    /// `/factors`), 404 `mfa_factor_not_found` for a factor; anything else (SAML's `/sso`
    /// included) Supabase's JSON 404, which its clients decode.
    func supabaseNotFound(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        await supabase(request, context) {
            let path = request.uri.path
            if path == "/auth/v1/admin" || path.hasPrefix("/auth/v1/admin/") {
                throw SupabaseError(.forbidden, "not_admin", "User not allowed")
            }
            if path == "/auth/v1/factors" {
                throw SupabaseError(
                    .unprocessableContent,
                    "mfa_totp_enroll_not_enabled",
                    "MFA enroll is disabled for TOTP"
                )
            }
            if path.hasPrefix("/auth/v1/factors/") {
                throw SupabaseError(.notFound, "mfa_factor_not_found", "Factor not found")
            }
            throw SupabaseError(.notFound, "not_found", "Not Found: this Supabase Auth endpoint is not served here")
        }
    }
}

/// A Supabase-door request body: a JSON object, read leniently (unknown and null members are
/// ignored, as Supabase's clients send `gotrue_meta_security`, `data: null`, `options`); at most
/// 16 KiB.
struct SupabaseRequest: Sendable {
    var members: [String: JSONValue]

    static func read(_ request: Request) async throws -> SupabaseRequest {
        let buffer: ByteBuffer
        do {
            buffer = try await JSONRequest.body(of: request)
        } catch {
            throw SupabaseError(.contentTooLarge, "request_too_large", "Request body too large")
        }
        guard buffer.readableBytes > 0 else { return SupabaseRequest(members: [:]) }
        let value = buffer.withUnsafeReadableBytes { try? JSONValue.parse($0, maxDepth: JSONRequest.maxDepth) }
        guard case .object(let members)? = value else {
            throw SupabaseError(.badRequest, "bad_json", "Could not parse request body as JSON")
        }
        return SupabaseRequest(members: members)
    }

    func string(_ name: String) -> String? { members[name]?.stringValue }

    /// A boolean member; nil when absent, null or not a boolean.
    func bool(_ name: String) -> Bool? {
        if case .bool(let value)? = members[name] { return value }
        return nil
    }

    /// An object member's members (`data`); empty when absent, null or not an object.
    func object(_ name: String) -> [String: JSONValue] {
        if case .object(let value)? = members[name] { return value }
        return [:]
    }
}

/// A Supabase Auth error: since API version 2024-01-01 (the request's `X-Supabase-Api-Version`,
/// echoed) `{"code": "<error_code>", "message": "..."}`, before it
/// `{"code": <status>, "error_code": "...", "msg": "..."}` with `x-sb-error-code`.
struct SupabaseError: Error, Sendable {
    var status: HTTPResponse.Status
    var code: String
    var message: String
    var retryAfter: Int?
    /// `weak_password`: why (Supabase's `length`, `characters`, `pwned`), sent as
    /// `weak_password: {reasons}`.
    var weakPasswordReasons: [String]?

    init(_ status: HTTPResponse.Status, _ code: String, _ message: String, retryAfter: Int? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    /// The nearest Supabase code for one of our answers (docs/supabase.md lists them).
    init(_ error: APIError) {
        switch error.reason {
        case "invalid_credentials":
            self.init(.badRequest, "invalid_credentials", "Invalid login credentials")
        case "rate_limited", "too_many_attempts", "factor_locked":
            self.init(.tooManyRequests, "over_request_rate_limit", error.message, retryAfter: error.retryAfter)
        case "invalid_refresh_token":
            self.init(.badRequest, "refresh_token_not_found", "Invalid Refresh Token: Refresh Token Not Found")
        case "refresh_token_reused":
            self.init(.badRequest, "refresh_token_already_used", "Invalid Refresh Token: Already Used")
        case "session_expired":
            self.init(.badRequest, "session_expired", "Session expired")
        case "session_revoked":
            self.init(.badRequest, "session_not_found", "Session not found")
        case "invalid_token":
            self.init(.forbidden, "bad_jwt", "invalid JWT")
        case "invalid_request", "validation_failed", "invalid_email", "invalid_phone":
            self.init(.badRequest, "validation_failed", error.message)
        case "payload_too_large":
            self.init(.contentTooLarge, "request_too_large", error.message)
        case "unavailable":
            self.init(.serviceUnavailable, "unexpected_failure", error.message)
        case "internal":
            self.init(.internalServerError, "unexpected_failure", error.message)
        default:
            self.init(error.status, error.reason, error.message)
        }
    }

    func response(modern: Bool) -> Response {
        var headers: HTTPFields = [
            .contentType: "application/json; charset=utf-8", .cacheControl: "no-store",
            HTTPField.Name("Pragma")!: "no-cache",
        ]
        if let retryAfter { headers[.retryAfter] = "\(retryAfter)" }
        struct WeakPassword: Encodable {
            var reasons: [String]
        }
        struct Modern: Encodable {
            var code: String
            var message: String
            var weak_password: WeakPassword?
        }
        struct Legacy: Encodable {
            var code: Int
            var error_code: String
            var msg: String
            var weak_password: WeakPassword?
        }
        let weak = weakPasswordReasons.map(WeakPassword.init)
        let body: ByteBuffer?
        if modern {
            headers[GatewayRoutes.supabaseAPIVersion] = "2024-01-01"
            body = try? JSONResponse.body(Modern(code: code, message: message, weak_password: weak))
        } else {
            headers[GatewayRoutes.supabaseErrorCode] = code
            body = try? JSONResponse.body(
                Legacy(code: Int(status.code), error_code: code, msg: message, weak_password: weak)
            )
        }
        return Response(
            status: status,
            headers: headers,
            body: ResponseBody(byteBuffer: body ?? ByteBuffer(string: "{}"))
        )
    }
}
