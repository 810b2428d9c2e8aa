import AuthAPI
import AuthCrypto
import AuthProtobuf
import AuthRPC
import AuthServiceCore
import AuthText

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Browser sign-in (docs/identity.md, "Browser sign-in"): the authorization-code flow with PKCE
/// through the backend. StartOAuth stores the flow and answers the provider's URL; FinishOAuth
/// takes the provider's answer at the callback, signs the person in (or links) by the rules of
/// ID-token sign-in, and answers where the browser goes next: the app's `redirect_to` with a
/// one-time code, or with `error` (OAuth 2.0 §4.1.2.1); ExchangeOAuthCode gives the user for
/// that code and the app's PKCE verifier, once.
extension IdentityService {
    public func startOAuth(
        request: Auth_Identity_V1_StartOAuthRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_StartOAuthResponse {
        var validator = FieldValidator()
        let provider = Self.provider(request.provider)
        if provider == nil { validator.fail("provider", "required", "A provider is required.") }
        if request.redirectTo.isEmpty { validator.fail("redirect_to", "required", "redirect_to is required.") }
        if !PKCE.isChallenge(request.codeChallenge) {
            validator.fail(
                "code_challenge",
                request.codeChallenge.isEmpty ? "required" : "invalid_value",
                "code_challenge must be the base64url SHA-256 of the verifier (43 characters)."
            )
        }
        if request.codeChallengeMethod != "S256" {
            validator.fail("code_challenge_method", "invalid_value", "code_challenge_method must be S256.")
        }
        if request.appState.utf8.count > 512 {
            validator.fail("state", "too_long", "state must be at most 512 bytes.")
        }
        let linkUserID = request.linkUserID.isEmpty ? nil : validator.userID(request.linkUserID, field: "link_user_id")
        _ = validator.clientIP(request.clientIP, context: context)
        try validator.check()
        guard let provider else { throw IdentityError(.internal, "validated provider missing") }
        guard let client = oauthClients[provider] else {
            throw IdentityError(.providerNotEnabled, "Sign in with \(provider.rawValue.capitalized) is not available.")
        }
        // Checked after the provider: the allow-list is the deployment's, one for every provider.
        guard configuration.oauth.allows(redirectTo: request.redirectTo) else {
            throw IdentityError(.redirectNotAllowed, "redirect_to is not one of this deployment's redirect URLs.")
        }
        let endpoints: OAuthProviderEndpoints
        do {
            endpoints = try await client.endpoints().0
        } catch {
            logger.warning(
                "A provider's discovery failed",
                metadata: ["identity.provider": "\(provider.rawValue)", "error": "\(error)"]
            )
            throw IdentityError(.providerUnavailable, "\(provider.rawValue.capitalized) cannot be reached; try again.")
        }
        let now = clock.microsecondNow()
        let state = PKCE.randomToken()
        let rawNonce = PKCE.randomToken()
        // Apple's tokens carry the nonce as the app's SHA-256 of it (seed 002 §2.5); the token
        // verifier checks the same way for both flows, so Apple is sent the hash.
        let sentNonce = provider == .apple ? Hex.lowercase(SHA256.hash(rawNonce)) : rawNonce
        let providerVerifier = client.sendsPKCE ? PKCE.randomToken() : ""
        try await oauthStore.begin(
            OAuthFlow(
                provider: provider,
                redirectTo: request.redirectTo,
                appState: request.appState,
                codeChallenge: request.codeChallenge,
                nonce: rawNonce,
                providerCodeVerifier: providerVerifier,
                linkUserID: linkUserID
            ),
            state: state,
            expiresAt: now.addingTimeInterval(configuration.oauth.stateLifetime.timeInterval),
            now: now
        )
        let url = client.authorizationURL(
            endpoint: endpoints.authorization,
            state: state,
            nonce: sentNonce,
            codeChallenge: providerVerifier.isEmpty ? nil : PKCE.challenge(of: providerVerifier)
        )
        return Auth_Identity_V1_StartOAuthResponse(
            authorizationURL: url,
            expiresIn: Int64(configuration.oauth.stateLifetime.components.seconds)
        )
    }

    public func finishOAuth(
        request: Auth_Identity_V1_FinishOAuthRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_FinishOAuthResponse {
        var validator = FieldValidator()
        let provider = Self.provider(request.provider)
        if provider == nil { validator.fail("provider", "required", "A provider is required.") }
        let clientIP = validator.clientIP(request.clientIP, context: context)
        try validator.check()
        guard let provider else { throw IdentityError(.internal, "validated provider missing") }
        let now = clock.microsecondNow()
        let invalidState = IdentityError(
            .invalidState,
            "This sign-in link is not valid any more (unknown, expired or already used). Please start again."
        )
        guard !request.state.isEmpty, request.state.utf8.count <= 512,
            let flow = try await oauthStore.finish(state: request.state, now: now), flow.provider == provider
        else { throw invalidState }
        let back = OAuthRedirect(to: flow.redirectTo, appState: flow.appState)

        func failed(_ error: String, _ reason: String, log: String) -> Auth_Identity_V1_FinishOAuthResponse {
            logger.info(
                "A browser sign-in failed",
                metadata: [
                    "identity.provider": "\(provider.rawValue)", "oauth.error": "\(error)",
                    "oauth.reason": "\(reason)", "oauth.detail": "\(log)",
                ]
            )
            return .init(redirectURL: back.url(["error": error, "error_description": reason]), outcome: error)
        }

        if !request.error.isEmpty {
            // The person refused, or the provider did (Apple: user_cancelled_authorize).
            let reason = OAuthRedirect.isToken(request.error) ? request.error : "access_denied"
            return failed("access_denied", reason, log: String(request.errorDescription.prefix(200)))
        }
        guard !request.code.isEmpty, request.code.utf8.count <= 2048 else {
            return failed("server_error", "missing_code", log: "the callback carried neither code nor error")
        }
        guard let client = oauthClients[provider] else {
            return failed("server_error", "provider_not_enabled", log: "the provider was disabled during the flow")
        }

        var identity: ProviderIdentity
        do {
            let (endpoints, verifier) = try await client.endpoints()
            let tokens = try await client.exchange(
                code: request.code,
                codeVerifier: flow.providerCodeVerifier,
                endpoint: endpoints.token
            )
            if let graph = endpoints.graph {
                guard let accessToken = tokens.accessToken, !accessToken.isEmpty else {
                    return failed("server_error", "token_exchange_failed", log: "no access_token")
                }
                identity = try await client.facebookUser(accessToken: accessToken, graph: graph)
            } else {
                guard let idToken = tokens.idToken, !idToken.isEmpty, let verifier else {
                    return failed("server_error", "invalid_id_token", log: "no id_token")
                }
                do {
                    identity = try await verifiedIdentity(
                        provider,
                        idToken,
                        rawNonce: flow.nonce,
                        context,
                        now: now,
                        using: verifier
                    )
                } catch let error as IdentityError where error.code == .providerUnavailable {
                    return failed("temporarily_unavailable", "provider_unavailable", log: "\(error)")
                } catch let error as IdentityError {
                    return failed("server_error", "invalid_id_token", log: "\(error.code): \(error.message)")
                }
            }
        } catch let failure as OAuthProviderFailure {
            switch failure {
            case .unavailable(let detail):
                return failed("temporarily_unavailable", "provider_unavailable", log: detail)
            case .refused(let detail):
                return failed("server_error", "token_exchange_failed", log: detail)
            }
        }
        if identity.name == nil, let name = Self.appleUserName(request.userJson) { identity.name = name }

        if let userID = flow.linkUserID {
            switch try await store.link(
                identity,
                to: userID,
                audit: audit(.providerLinked, method: provider.method, clientIP, context, at: now)
            ) {
            case .linked, .alreadyThis:
                logger.info(
                    "Provider identity linked",
                    metadata: ["user.id": "\(userID)", "identity.method": "\(provider.method)"]
                )
                return .init(redirectURL: back.url(["linked": provider.rawValue]), outcome: "linked")
            case .otherAccount:
                return failed("invalid_request", "identity_already_linked", log: "linked to another account")
            case .noUser:
                return failed("invalid_request", "user_not_found", log: "the linking account was deleted")
            }
        }

        let result = try await signIn(identity, clientIP, context, now: now)
        let code = PKCE.randomToken()
        try await oauthStore.grant(
            OAuthGrant(
                userID: result.user.id,
                provider: provider,
                codeChallenge: flow.codeChallenge,
                created: result.created
            ),
            code: code,
            expiresAt: now.addingTimeInterval(configuration.oauth.codeLifetime.timeInterval),
            now: now
        )
        return .init(redirectURL: back.url(["code": code]), outcome: "signed_in")
    }

    public func exchangeOAuthCode(
        request: Auth_Identity_V1_ExchangeOAuthCodeRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_ExchangeOAuthCodeResponse {
        var validator = FieldValidator()
        if request.code.isEmpty { validator.fail("code", "required", "code is required.") }
        if request.codeVerifier.isEmpty { validator.fail("code_verifier", "required", "code_verifier is required.") }
        _ = validator.clientIP(request.clientIP, context: context)
        try validator.check()
        let invalidGrant = IdentityError(
            .invalidGrant,
            "The sign-in code is not valid (unknown, expired or already used) or the verifier does not match."
        )
        guard request.code.utf8.count <= 256, PKCE.isVerifier(request.codeVerifier) else { throw invalidGrant }
        // Spent by this first presentation, whatever the verifier.
        guard let grant = try await oauthStore.redeem(code: request.code, now: clock.microsecondNow()),
            ConstantTime.equals(
                Array(PKCE.challenge(of: request.codeVerifier).utf8),
                Array(grant.codeChallenge.utf8)
            ),
            let user = try await store.user(id: grant.userID)
        else { throw invalidGrant }
        return Auth_Identity_V1_ExchangeOAuthCodeResponse(
            user: user.proto,
            created: grant.created,
            provider: grant.provider.map(Self.proto) ?? .unspecified,
            emailLink: grant.provider == nil
        )
    }

    /// A one-time code for a user whose emailed confirmation link was followed by a PKCE
    /// client: redeemed by ExchangeOAuthCode like a browser sign-in's. The gateway calls it only
    /// after otp-dispatch checked the link's code, so the user's email is proved.
    public func issueSignInCode(
        request: Auth_Identity_V1_IssueSignInCodeRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_IssueSignInCodeResponse {
        var validator = FieldValidator()
        let userID = validator.userID(request.userID, field: "user_id")
        if !PKCE.isChallenge(request.codeChallenge) {
            validator.fail(
                "code_challenge",
                request.codeChallenge.isEmpty ? "required" : "invalid_value",
                "code_challenge must be the base64url SHA-256 of the verifier (43 characters)."
            )
        }
        try validator.check()
        guard let userID, try await store.user(id: userID) != nil else {
            throw IdentityError(.userNotFound, "No user has this id.")
        }
        let now = clock.microsecondNow()
        let code = PKCE.randomToken()
        try await oauthStore.grant(
            OAuthGrant(userID: userID, provider: nil, codeChallenge: request.codeChallenge, created: false),
            code: code,
            expiresAt: now.addingTimeInterval(configuration.oauth.codeLifetime.timeInterval),
            now: now
        )
        return Auth_Identity_V1_IssueSignInCodeResponse(code: code)
    }

    /// Apple's form_post `user` on the first consent: `{"name":{"firstName","lastName"},"email"}`.
    static func appleUserName(_ json: String) -> String? {
        guard !json.isEmpty, json.utf8.count <= 4096, case .object(let user)? = try? JSONValue.parse(Array(json.utf8)),
            case .object(let name)? = user["name"]
        else { return nil }
        let joined = [name["firstName"]?.stringValue, name["lastName"]?.stringValue]
            .compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: " ")
        return ContactRules.isValidDisplayName(joined) ? joined : nil
    }

    static func proto(_ provider: IdentityProvider) -> Auth_Identity_V1_Provider {
        switch provider {
        case .apple: .apple
        case .google: .google
        case .facebook: .facebook
        }
    }
}

/// The app's `redirect_to` with parameters added to its own query, and the app's `state` last.
struct OAuthRedirect {
    var to: String
    var appState: String

    func url(_ parameters: [String: String]) -> String {
        var pairs = parameters.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        if !appState.isEmpty { pairs.append(("state", appState)) }
        return FormURLEncoding.appending(pairs.map { (name: $0.0, value: $0.1) }, to: to)
    }

    /// A provider's error code worth passing on: 1-64 characters of `[a-z_]`.
    static func isToken(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count)
            && text.utf8.allSatisfy { ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || $0 == UInt8(ascii: "_") }
    }
}
