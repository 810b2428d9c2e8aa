import AuthProtobuf
import AuthText
import HTTPTypes
import Hummingbird

/// The Supabase door's browser sign-in and identities (docs/supabase.md): `GET
/// /auth/v1/authorize` and the `pkce` grant (`signInWithOAuth`, `exchangeCodeForSession`),
/// `GET /auth/v1/user/identities/authorize` (`linkIdentity`), `DELETE
/// /auth/v1/user/identities/{identity_id}` (`unlinkIdentity`): the `/v1` browser flow's
/// identity methods behind Supabase's paths. Only the PKCE flow is served.
extension GatewayRoutes {
    // MARK: GET /auth/v1/authorize

    /// 302 to the provider's consent page; the callback (`/v1/oauth/{provider}/callback`, the
    /// one registered with the provider) then sends the browser to `redirect_to` with `code`,
    /// which the `pkce` grant exchanges. No `apikey` is needed (a browser opens it).
    func supabaseAuthorize(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        await supabase(request, context, anonKey: false) {
            try limit(context, as: "/v1/oauth/{provider}/authorize")
            let query = try OAuthQuery(query: request)
            let started = try await supabaseStartOAuth(query, linkUserID: "", context: context)
            return Self.found(started.authorizationURL)
        }
    }

    /// Supabase's parameters to identity's StartOAuth: `provider`, `redirect_to` (required: no
    /// site URL stands in for it), `code_challenge` with `code_challenge_method` `s256` (the
    /// implicit flow, without a challenge, and `plain` are refused).
    private func supabaseStartOAuth(
        _ query: OAuthQuery,
        linkUserID: String,
        context: GatewayRequestContext
    ) async throws -> Auth_Identity_V1_StartOAuthResponse {
        let name = query["provider"] ?? ""
        guard let provider = Provider(rawValue: name) else {
            throw SupabaseError(.badRequest, "validation_failed", "Unsupported provider: \(name.prefix(32))")
        }
        guard let challenge = query["code_challenge"], !challenge.isEmpty else {
            throw SupabaseError(
                .badRequest,
                "validation_failed",
                "Only the PKCE flow is served: set the client's flow_type to pkce"
            )
        }
        guard (query["code_challenge_method"] ?? "").lowercased() == "s256" else {
            throw SupabaseError(.badRequest, "validation_failed", "code_challenge_method must be s256")
        }
        guard let redirectTo = query["redirect_to"], !redirectTo.isEmpty else {
            throw SupabaseError(.badRequest, "validation_failed", "redirect_to is required")
        }
        do {
            return try await startOAuth(
                provider,
                redirectTo: redirectTo,
                codeChallenge: challenge,
                codeChallengeMethod: "S256",
                appState: "",
                linkUserID: linkUserID,
                context: context
            )
        } catch let error as APIError where error.reason == "provider_not_enabled" {
            throw SupabaseError(.badRequest, "provider_disabled", "Unsupported provider: provider is not enabled")
        }
    }

    // MARK: POST /auth/v1/token?grant_type=pkce

    /// `exchangeCodeForSession`: `{auth_code, code_verifier}` → the session, once (the code of a
    /// browser sign-in, or of a followed confirmation link). An unknown,
    /// used or expired code, or a verifier that does not match it, is 404
    /// `flow_state_not_found` (identity does not tell them apart; Supabase answers a wrong
    /// verifier with 400 `bad_code_verifier`).
    func supabasePKCEGrant(
        _ body: SupabaseRequest,
        _ request: Request,
        _ context: GatewayRequestContext
    ) async throws -> Response {
        guard let code = body.string("auth_code"), !code.isEmpty,
            let verifier = body.string("code_verifier"), !verifier.isEmpty
        else {
            throw SupabaseError(
                .badRequest,
                "validation_failed",
                "invalid request: both auth code and code verifier should be non-empty"
            )
        }
        let exchanged: Auth_Identity_V1_ExchangeOAuthCodeResponse
        do {
            exchanged = try await exchangeOAuthCode(code, verifier: verifier, context: context)
        } catch let error as APIError where error.reason == "invalid_grant" {
            throw SupabaseError(.notFound, "flow_state_not_found", "invalid flow state, no valid flow state found")
        }
        guard let user = exchanged.user else { throw APIError.internalError }
        // A followed confirmation link (docs/supabase.md) or a provider's browser sign-in.
        let method: String
        if exchanged.emailLink {
            method = "otp_email"
        } else if let provider = Provider(exchanged.provider) {
            method = "oidc_\(provider.rawValue)"
        } else {
            throw APIError.internalError
        }
        AuthDecisionNote.record(method: method)
        return try await supabaseSignIn(user, amr: method, request, context)
    }

    // MARK: GET /auth/v1/user/identities/authorize

    /// `linkIdentity`: the provider's consent URL for linking to the signed-in account, as
    /// `{"url"}` (the clients send `skip_http_redirect=true`; without it, a 302). The callback
    /// sends the browser to `redirect_to` with `linked=<provider>` (no code: nothing to exchange).
    func supabaseLinkAuthorize(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        await supabase(request, context) {
            let caller = try await supabaseSignedIn(request, context)
            let query = try OAuthQuery(query: request)
            let started = try await supabaseStartOAuth(query, linkUserID: caller.userID, context: context)
            if query["skip_http_redirect"] == "true" {
                return try JSONResponse.make(AuthorizationURLBody(url: started.authorizationURL))
            }
            return Self.found(started.authorizationURL)
        }
    }

    // MARK: DELETE /auth/v1/user/identities/{identity_id}

    /// `unlinkIdentity`: a provider identity (Apple, Google, Facebook) by its `identity_id` (as
    /// `GET /user` shows it); the last way to sign in is 422 `single_identity_not_deletable`; an
    /// email, phone or password identity 422 `validation_failed` (they go with their contact).
    func supabaseUnlinkIdentity(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        await supabase(request, context) {
            let caller = try await supabaseSignedIn(request, context)
            // Supabase's Swift client writes the UUID in upper case.
            let wanted = (context.parameters.get("identity_id") ?? "").lowercased()
            let identities = try await identities(of: caller.userID, context: context)
            guard
                let identity = identities.first(where: {
                    SupabaseUserBody.identityID(
                        userID: caller.userID,
                        provider: SupabaseUserBody.providerName($0.provider),
                        id: $0.id
                    ) == wanted
                })
            else {
                throw SupabaseError(.notFound, "identity_not_found", "Identity doesn't exist")
            }
            guard let provider = Provider(rawValue: identity.provider) else {
                throw SupabaseError(
                    .unprocessableContent,
                    "validation_failed",
                    "Only an Apple, Google or Facebook identity is unlinked here"
                )
            }
            do {
                try await unlinkProvider(provider, of: caller.userID, context: context)
            } catch let error as APIError where error.reason == "last_identity" {
                throw SupabaseError(
                    .unprocessableContent,
                    "single_identity_not_deletable",
                    "User must have at least 1 identity after unlinking"
                )
            }
            return try JSONResponse.make([String: String]())
        }
    }

    // MARK: POST /auth/v1/token?grant_type=id_token with link_identity

    /// `signInWithIdToken` with `link_identity: true` and the user's access token: the ID
    /// token's identity is linked to the signed-in account (verified and spent as a sign-in's,
    /// the nonce hashed), and a new session of that account answers.
    func supabaseLinkIDToken(
        _ provider: Provider,
        idToken: String,
        nonce: String,
        _ request: Request,
        _ context: GatewayRequestContext
    ) async throws -> Response {
        let caller = try await supabaseSignedIn(request, context)
        do {
            _ = try await linkProvider(
                provider,
                idToken: idToken,
                nonce: nonce,
                nonceHashed: true,
                to: caller.userID,
                context: context
            )
        } catch let error as APIError where error.reason == "identity_already_linked" {
            throw SupabaseError(
                .unprocessableContent,
                "identity_already_exists",
                "Identity is already linked to another user"
            )
        }
        let user = try await getUser(caller.userID, context: context)
        return try await supabaseSignIn(user, amr: "oidc_\(provider.rawValue)", request, context)
    }
}
