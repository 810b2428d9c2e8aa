import AuthAPI
import AuthProtobuf
import HTTPTypes
import Hummingbird

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The authenticated routes: the signed-in user's session, profile, password, sessions.
extension GatewayRoutes {
    /// The signed-in caller of `request` (401 `invalid_token` otherwise).
    func signedIn(
        _ request: Request,
        _ context: GatewayRequestContext
    ) async throws -> AccessTokenAuthenticator.SignedIn {
        let signedIn = try await authenticator.authenticate(request, context: context)
        AuthDecisionNote.record(userID: signedIn.userID)
        return signedIn
    }

    // MARK: POST /v1/logout

    func logOut(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        let body = try await JSONRequest.read(request, allowed: ["scope", "refresh_token"], optional: true)
        let scope = try body.choice("scope", default: Scope.local)
        if let refreshToken = try body.string("refresh_token") {
            return try await logOut(refreshToken: refreshToken, scope: scope, context: context)
        }
        let caller = try await signedIn(request, context)
        switch scope {
        case .local:
            _ = try await backends.call(.session, context) { options in
                try await backends.session.revoke(
                    Auth_Session_V1_RevokeRequest(sessionID: caller.sessionID, userID: caller.userID, reason: "logout"),
                    options: options
                )
            }
        case .global, .others:
            try await revokeAll(userID: caller.userID, keeping: scope == .others ? caller.sessionID : "", context)
        }
        return JSONResponse.noContent
    }

    /// A logout by the session's refresh token (an app whose access token expired): no
    /// Authorization needed, spends the client's budget like a refresh. `others` needs the
    /// access token (it names the session to keep).
    private func logOut(refreshToken: String, scope: Scope, context: GatewayRequestContext) async throws -> Response {
        try limit(context)
        guard scope != .others else {
            throw APIError.invalidRequest(
                "`scope` `others` needs the access token of the session to keep, not a refresh token."
            )
        }
        let revoked: Auth_Session_V1_RevokeResponse
        do {
            revoked = try await backends.call(.session, context) { options in
                try await backends.session.revoke(
                    Auth_Session_V1_RevokeRequest(reason: "logout", refreshToken: refreshToken),
                    options: options
                )
            }
        } catch let error as APIError where error.reason == "invalid_request" {
            // An empty token: not one the service issued.
            throw ServiceErrorMapping.invalidRefreshToken(detail: error.detail)
        }
        AuthDecisionNote.record(userID: revoked.userID)
        if scope == .global { try await revokeAll(userID: revoked.userID, keeping: "", context) }
        return JSONResponse.noContent
    }

    private func revokeAll(userID: String, keeping sessionID: String, _ context: GatewayRequestContext) async throws {
        _ = try await backends.call(.session, context) { options in
            try await backends.session.revokeAll(
                Auth_Session_V1_RevokeAllRequest(
                    userID: userID,
                    exceptSessionID: sessionID,
                    reason: sessionID.isEmpty ? "logout_global" : "logout_others"
                ),
                options: options
            )
        }
    }

    // MARK: GET /v1/me/identities

    /// How the signed-in account can sign in: a verified phone, a verified email, a password,
    /// the linked providers.
    func myIdentities(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        let caller = try await signedIn(request, context)
        let identities = try await identities(of: caller.userID, context: context)
        return try JSONResponse.make(IdentityListBody(identities: identities.map(IdentityBody.init)))
    }

    /// identity's ListIdentities for a signed-in user (gone: 401 `invalid_token`).
    func identities(
        of userID: String,
        context: GatewayRequestContext
    ) async throws
        -> [Auth_Identity_V1_SignInIdentity]
    {
        try await backends.call(.identity, context, rules: Self.signedInUserRules) { options in
            try await backends.identity.listIdentities(
                Auth_Identity_V1_ListIdentitiesRequest(userID: userID),
                options: options
            )
        }.identities
    }

    // MARK: POST /v1/me/identities, DELETE /v1/me/identities/{provider}

    /// Links a provider to the signed-in account by an ID token from its native SDK (verified
    /// and spent as by `/v1/idtoken`): 200 with the account's identities.
    func linkIdentity(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        let caller = try await signedIn(request, context)
        let body = try await JSONRequest.read(request, allowed: ["provider", "id_token", "nonce"])
        let provider = try body.choice("provider", default: Provider?.none)
        let idToken = try body.requiredString("id_token")
        let nonce = try body.string("nonce") ?? ""
        if provider != .facebook, nonce.isEmpty {
            throw APIError.invalidRequest("`nonce` is required for \(provider.rawValue).")
        }
        let linked = try await linkProvider(
            provider,
            idToken: idToken,
            nonce: nonce,
            to: caller.userID,
            context: context
        )
        return try JSONResponse.make(IdentityListBody(identities: linked.identities.map(IdentityBody.init)))
    }

    /// identity's LinkProvider (both doors): the ID token's identity joins `userID`'s account;
    /// `nonceHashed` as the Supabase door's ID tokens.
    func linkProvider(
        _ provider: Provider,
        idToken: String,
        nonce: String,
        nonceHashed: Bool = false,
        to userID: String,
        context: GatewayRequestContext
    ) async throws -> Auth_Identity_V1_ListIdentitiesResponse {
        try await backends.call(.identity, context) { options in
            try await backends.identity.linkProvider(
                Auth_Identity_V1_LinkProviderRequest(
                    userID: userID,
                    provider: provider.proto,
                    idToken: idToken,
                    rawNonce: nonce,
                    clientIP: context.clientIP,
                    nonceHashed: nonceHashed
                ),
                options: options
            )
        }
    }

    /// Unlinks the account's identity of a provider: 204; 404 `identity_not_found`; 409
    /// `last_identity` when it is the only way left to sign in.
    func unlinkIdentity(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        let caller = try await signedIn(request, context)
        guard let name = context.parameters.get("provider"), let provider = Provider(rawValue: name) else {
            throw APIError.identityNotFound
        }
        try await unlinkProvider(provider, of: caller.userID, context: context)
        return JSONResponse.noContent
    }

    /// identity's UnlinkProvider (both doors).
    func unlinkProvider(_ provider: Provider, of userID: String, context: GatewayRequestContext) async throws {
        _ = try await backends.call(.identity, context) { options in
            try await backends.identity.unlinkProvider(
                Auth_Identity_V1_UnlinkProviderRequest(
                    userID: userID,
                    provider: provider.proto,
                    clientIP: context.clientIP
                ),
                options: options
            )
        }
    }

    // MARK: GET /v1/session

    func currentSession(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        let caller = try await signedIn(request, context)
        let user = try await getUser(caller.userID, context: context)
        let session = SessionInfoBody(
            id: caller.sessionID,
            amr: caller.claims.amr,
            createdAt: Timestamp.rfc3339(caller.sessionCreatedAt),
            expiresAt: Timestamp.rfc3339(caller.sessionExpiresAt)
        )
        return try JSONResponse.make(CurrentSessionBody(user: UserBody(user), session: session))
    }

    // MARK: GET /v1/me, PATCH /v1/me, DELETE /v1/me

    func me(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        let caller = try await signedIn(request, context)
        return try JSONResponse.make(UserBody(try await getUser(caller.userID, context: context)))
    }

    func updateMe(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        let caller = try await signedIn(request, context)
        let body = try await JSONRequest.read(request, allowed: ["display_name", "photo_url", "onboarding_completed"])
        var update = Auth_Identity_V1_UpdateProfileRequest()
        update.userID = caller.userID
        update.clientIP = context.clientIP
        if let name = try body.string("display_name") { update.displayName = Auth_Identity_V1_StringValue(value: name) }
        if let photo = try body.nullableString("photo_url") {
            // null or "" clears the photo.
            update.photoURL = Auth_Identity_V1_StringValue(value: photo ?? "")
        }
        if let done = try body.bool("onboarding_completed") {
            update.onboardingCompleted = Auth_Identity_V1_BoolValue(value: done)
        }
        var rules = ServiceErrorMapping.Rules()
        rules.signedInUser = true
        rules.validationFields = ["display_name": "display_name", "photo_url": "photo_url"]
        let updated = try await backends.call(.identity, context, rules: rules) { options in
            try await backends.identity.updateProfile(update, options: options)
        }
        guard let user = updated.user else { throw APIError.internalError }
        return try JSONResponse.make(UserBody(user))
    }

    func deleteMe(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        let caller = try await signedIn(request, context)
        // A recent sign-in (issue 19): a stolen token, or a phone left unlocked, does not delete
        // the account.
        let now = Int64(Date().timeIntervalSince1970)
        if Self.needsReauthentication(
            sessionCreatedAt: caller.sessionCreatedAt,
            now: now,
            window: reauthenticationWindow
        ) {
            throw APIError.reauthenticationRequired
        }
        var rules = ServiceErrorMapping.Rules()
        rules.signedInUser = true
        // What otp-dispatch keeps under the account's phone and email goes too (verifications,
        // limit events, locks). Read first: identity clears the contacts when it deletes. A
        // retry after a partial failure finds the user deleted (no contacts to read: they were
        // forgotten before the deletion) and deletes and revokes again, both idempotent.
        var contacts: [String] = []
        do {
            let user = try await backends.call(.identity, context) { options in
                try await backends.identity.getUser(
                    Auth_Identity_V1_GetUserRequest(userID: caller.userID),
                    options: options
                )
            }.user
            contacts = [user?.phone ?? "", user?.email ?? ""].filter { !$0.isEmpty }
        } catch let error as APIError where error.reason == "user_not_found" {}
        for contact in contacts {
            _ = try await backends.call(.otpDispatch, context) { options in
                try await backends.otp.forgetDestination(
                    Auth_Otp_V1_ForgetDestinationRequest(destination: contact),
                    options: options
                )
            }
        }
        _ = try await backends.call(.identity, context, rules: rules) { options in
            try await backends.identity.deleteUser(
                Auth_Identity_V1_DeleteUserRequest(userID: caller.userID, clientIP: context.clientIP),
                options: options
            )
        }
        try await backends.revokeAllSessions(
            userID: caller.userID,
            reason: "account_deleted",
            forgetPersonalData: true,
            context
        )
        return JSONResponse.noContent
    }

    /// Whether a session started at `sessionCreatedAt` (Unix seconds) is too old, at `now`, for
    /// what needs a recent sign-in.
    static func needsReauthentication(sessionCreatedAt: Int64, now: Int64, window: Duration) -> Bool {
        now - sessionCreatedAt > window.components.seconds
    }

    // MARK: POST /v1/me/password

    func changePassword(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        let caller = try await signedIn(request, context)
        let body = try await JSONRequest.read(request, allowed: ["current_password", "new_password"])
        let current = try body.requiredString("current_password")
        let new = try body.requiredString("new_password")
        var rules = ServiceErrorMapping.Rules()
        rules.signedInUser = true
        rules.validationFields = ["old_password": "current_password", "new_password": "new_password"]
        _ = try await backends.call(.identity, context, rules: rules) { options in
            try await backends.identity.changePassword(
                Auth_Identity_V1_ChangePasswordRequest(
                    userID: caller.userID,
                    oldPassword: current,
                    newPassword: new,
                    clientIP: context.clientIP
                ),
                options: options
            )
        }
        // After the change (it verifies the old password), retried while session is unavailable.
        try await backends.revokeAllSessions(
            userID: caller.userID,
            except: caller.sessionID,
            reason: "password_changed",
            context
        )
        return JSONResponse.noContent
    }

    // MARK: GET /v1/sessions, DELETE /v1/sessions/{id}

    func listSessions(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        let caller = try await signedIn(request, context)
        let listed = try await backends.call(.session, context) { options in
            try await backends.session.listSessions(
                Auth_Session_V1_ListSessionsRequest(userID: caller.userID),
                options: options
            )
        }
        let items = listed.sessions.map { SessionItemBody($0, currentSessionID: caller.sessionID) }
        return try JSONResponse.make(SessionListBody(sessions: items))
    }

    func revokeSession(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        let caller = try await signedIn(request, context)
        // Whatever its shape, an id that is not one of the caller's live sessions is 404.
        guard let text = context.parameters.get("id"), let id = UUID(uuidString: text) else {
            throw APIError.sessionNotFound
        }
        let revoked = try await backends.call(.session, context) { options in
            try await backends.session.revoke(
                Auth_Session_V1_RevokeRequest(
                    sessionID: id.uuidString.lowercased(),
                    userID: caller.userID,
                    reason: "revoked_by_user"
                ),
                options: options
            )
        }
        guard revoked.revoked else { throw APIError.sessionNotFound }
        return JSONResponse.noContent
    }

    // MARK: GET /.well-known/jwks.json

    func jwks(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        let keys = try await authenticator.jwksKeys()
        return Response(
            status: .ok,
            headers: [
                .contentType: "application/json; charset=utf-8",
                .cacheControl: "public, max-age=\(jwksMaxAge.components.seconds)",
            ],
            body: ResponseBody(byteBuffer: ByteBuffer(string: keys.json))
        )
    }
}
