import AuthProtobuf
import HTTPTypes
import Hummingbird

/// Browser sign-in with Google, Facebook and Apple (docs/gateway.md, "Browser sign-in"): the
/// authorization-code flow with PKCE through the backend. Identity holds the flow's state and
/// talks to the provider; these routes carry the browser between the app, the provider and
/// identity, and turn the app's one-time code into a session.
extension GatewayRoutes {
    /// The most bytes of a query parameter or form field these routes read (a provider's code,
    /// the app's state and redirect URL are far shorter).
    static let maxOAuthParameterBytes = 2048

    // MARK: GET /v1/oauth/{provider}/authorize

    /// 302 to the provider's consent page. 400 `invalid_request` for a missing or malformed
    /// parameter, `redirect_not_allowed` for a `redirect_to` off the allow-list (never a
    /// redirect), `provider_not_enabled`; 503 when the provider's discovery cannot be read.
    func oauthAuthorize(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        try limit(context)
        let provider = try oauthProvider(context)
        let query = try OAuthQuery(query: request)
        let started = try await startOAuth(
            provider,
            redirectTo: try query.required("redirect_to"),
            codeChallenge: try query.required("code_challenge"),
            codeChallengeMethod: query["code_challenge_method"] ?? "",
            appState: query["state"] ?? "",
            linkUserID: "",
            context: context
        )
        return Self.found(started.authorizationURL)
    }

    // MARK: GET|POST /v1/oauth/{provider}/callback

    /// Where the provider sends the browser back (GET with a query, or POST with a form for
    /// Apple's `response_mode=form_post`): 302 to the app's `redirect_to` with `code` and
    /// `state`, `linked`, or `error` and `error_description`. 400 `invalid_state` (JSON) when the
    /// state is unknown, expired or used: there is nowhere known to send the browser.
    func oauthCallback(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        try limit(context)
        let provider = try oauthProvider(context)
        let parameters: [(String, String)]
        if request.method == .post {
            parameters = try await FormRequest.read(request).parameters.map { ($0.name, $0.value) }
        } else {
            parameters = try FormRequest(parsing: request.uri.query ?? "").parameters.map { ($0.name, $0.value) }
        }
        let query = try OAuthQuery(parameters)
        let state = query["state"] ?? ""
        if state.isEmpty {
            throw APIError(.badRequest, "invalid_state", Self.invalidStateMessage)
        }
        let finished = try await backends.call(.identity, context) { options in
            try await backends.identity.finishOAuth(
                Auth_Identity_V1_FinishOAuthRequest(
                    provider: provider.proto,
                    state: state,
                    code: query["code"] ?? "",
                    error: query["error"] ?? "",
                    errorDescription: query["error_description"] ?? "",
                    userJson: query["user"] ?? "",
                    clientIP: context.clientIP
                ),
                options: options
            )
        }
        AuthDecisionNote.record(method: "oidc_\(provider.rawValue)")
        return Self.found(finished.redirectURL)
    }

    static let invalidStateMessage =
        "This sign-in link is not valid any more (unknown, expired or already used). Please start again."

    // MARK: POST /v1/oauth/token

    /// `{code, code_verifier}` (+ `device_name`, `platform`) → the session body, once; 400
    /// `invalid_grant` for an unknown, expired or used code or a verifier that does not match.
    func oauthToken(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        try limit(context)
        let body = try await JSONRequest.read(request, allowed: Self.deviceFields.union(["code", "code_verifier"]))
        let device = try device(request, body)
        let code = try body.requiredString("code")
        let verifier = try body.requiredString("code_verifier")
        let exchanged = try await exchangeOAuthCode(code, verifier: verifier, context: context)
        guard let user = exchanged.user, let provider = Provider(exchanged.provider) else {
            throw APIError.internalError
        }
        AuthDecisionNote.record(method: "oidc_\(provider.rawValue)")
        return try await signIn(
            user,
            amr: "oidc_\(provider.rawValue)",
            isNewUser: exchanged.created,
            device: device,
            context: context
        )
    }

    /// identity's ExchangeOAuthCode (both doors): the app's one-time code and its verifier.
    func exchangeOAuthCode(
        _ code: String,
        verifier: String,
        context: GatewayRequestContext
    ) async throws -> Auth_Identity_V1_ExchangeOAuthCodeResponse {
        try await backends.call(.identity, context) { options in
            try await backends.identity.exchangeOAuthCode(
                Auth_Identity_V1_ExchangeOAuthCodeRequest(
                    code: code,
                    codeVerifier: verifier,
                    clientIP: context.clientIP
                ),
                options: options
            )
        }
    }

    // MARK: POST /v1/me/identities/{provider}/authorize

    /// Links a provider to the signed-in account by the redirect flow: `{redirect_to,
    /// code_challenge, code_challenge_method[, state]}` → 200 `{"url"}` to open; the callback
    /// then redirects with `linked=<provider>` (or `error`).
    func linkIdentityAuthorize(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        let caller = try await signedIn(request, context)
        let provider = try oauthProvider(context)
        let body = try await JSONRequest.read(
            request,
            allowed: ["redirect_to", "code_challenge", "code_challenge_method", "state"]
        )
        let started = try await startOAuth(
            provider,
            redirectTo: try body.requiredString("redirect_to"),
            codeChallenge: try body.requiredString("code_challenge"),
            codeChallengeMethod: try body.string("code_challenge_method") ?? "",
            appState: try body.string("state") ?? "",
            linkUserID: caller.userID,
            context: context
        )
        return try JSONResponse.make(AuthorizationURLBody(url: started.authorizationURL))
    }

    // MARK: Shared

    func startOAuth(
        _ provider: Provider,
        redirectTo: String,
        codeChallenge: String,
        codeChallengeMethod: String,
        appState: String,
        linkUserID: String,
        context: GatewayRequestContext
    ) async throws -> Auth_Identity_V1_StartOAuthResponse {
        guard codeChallengeMethod == "S256" else {
            throw APIError.invalidRequest("`code_challenge_method` must be S256.")
        }
        AuthDecisionNote.record(method: "oidc_\(provider.rawValue)")
        do {
            return try await backends.call(.identity, context) { options in
                try await backends.identity.startOAuth(
                    Auth_Identity_V1_StartOAuthRequest(
                        provider: provider.proto,
                        redirectTo: redirectTo,
                        codeChallenge: codeChallenge,
                        codeChallengeMethod: codeChallengeMethod,
                        appState: appState,
                        linkUserID: linkUserID,
                        clientIP: context.clientIP
                    ),
                    options: options
                )
            }
        } catch var error as APIError where error.reason == "provider_not_enabled" {
            error.message = "\(provider.displayName) Sign-In is not configured. Please use email/password."
            throw error
        }
    }

    private func oauthProvider(_ context: GatewayRequestContext) throws -> Provider {
        guard let name = context.parameters.get("provider"), let provider = Provider(rawValue: name) else {
            throw APIError.invalidRequest("the provider must be one of apple, google, facebook.")
        }
        return provider
    }

    /// 302 with `Location`, never cached (it carries a one-time state or code).
    static func found(_ location: String) -> Response {
        Response(
            status: .found,
            headers: [.location: location, .cacheControl: "no-store"]
        )
    }
}

extension GatewayRoutes.Provider {
    init?(_ proto: Auth_Identity_V1_Provider) {
        switch proto {
        case .apple: self = .apple
        case .google: self = .google
        case .facebook: self = .facebook
        default: return nil
        }
    }

    var displayName: String { rawValue.prefix(1).uppercased() + rawValue.dropFirst() }
}

/// A browser request's parameters: each at most once and at most
/// ``GatewayRoutes/maxOAuthParameterBytes`` (400 `invalid_request` otherwise).
struct OAuthQuery {
    private var values: [String: String] = [:]

    init(_ pairs: [(String, String)]) throws(APIError) {
        for (name, value) in pairs {
            guard values[name] == nil else { throw APIError.invalidRequest("`\(name)` is given twice.") }
            guard value.utf8.count <= GatewayRoutes.maxOAuthParameterBytes else {
                throw APIError.invalidRequest("`\(name)` is too long.")
            }
            values[name] = value
        }
    }

    /// The query string, decoded as a form (`+` is a space).
    init(query request: Request) throws(APIError) {
        try self.init(FormRequest(parsing: request.uri.query ?? "").parameters.map { ($0.name, $0.value) })
    }

    subscript(_ name: String) -> String? { values[name] }

    func required(_ name: String) throws(APIError) -> String {
        guard let value = values[name], !value.isEmpty else { throw APIError.invalidRequest("`\(name)` is required.") }
        return value
    }
}

/// `POST /v1/me/identities/{provider}/authorize`'s answer.
struct AuthorizationURLBody: Encodable {
    var url: String
}
