import AsyncHTTPClient
import AuthCrypto
import AuthDevProvider
import AuthTestSupport
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// Issue 21 §1 and §2: the browser sign-in (authorization-code flow with PKCE through the
/// backend) and linking by it, through a gateway and an identity of their own (the redirect
/// flows configured) over the fixture's session, otp-dispatch and database, against the
/// stand-in provider `AuthDevProvider` on loopback. The browser is the test: it follows each
/// redirect by hand, as ASWebAuthenticationSession would, and stops at the app's URL.
extension GatewayEndToEndTests {
    @Suite(.timeLimit(.minutes(2))) struct BrowserSignIn {
        static let appURL = "laten://auth/callback"

        // MARK: Sign-in, per provider

        @Test func googleSignsInOnceByCodeAndVerifier() async throws {
            try await Browser.with { browser in
                let email = GatewayFixture.newEmail("google")
                let pkce = PKCEPair()
                let landed = try await browser.signIn("google", pkce: pkce, loginHint: email, appState: "s-1")
                #expect(landed.scheme == "laten", "\(landed)")
                #expect(landed.query["state"] == "s-1")
                let code = try #require(landed.query["code"])
                #expect(landed.query["error"] == nil)

                let session = try await browser.exchange(code: code, verifier: pkce.verifier)
                #expect(session.status == 200, "\(session)")
                #expect(session["is_new_user"] as? Bool == true)
                #expect(session.user["email"] as? String == email)
                #expect(session.user["email_verified"] as? Bool == true)
                let current = try await browser.fixture.get(
                    "/v1/session",
                    token: session.accessToken,
                    base: browser.gateway
                )
                let amr = (current["session"] as? [String: Any])?["amr"] as? [String]
                #expect(amr == ["oidc_google"], "\(current)")

                // The code is spent: a second exchange is invalid_grant.
                let again = try await browser.exchange(code: code, verifier: pkce.verifier)
                #expect(again.status == 400 && again.error == "invalid_grant", "\(again)")

                // A second sign-in by the same Google account finds the same user.
                let pkce2 = PKCEPair()
                let second = try await browser.signIn("google", pkce: pkce2, loginHint: email)
                let session2 = try await browser.exchange(
                    code: try #require(second.query["code"]),
                    verifier: pkce2.verifier
                )
                #expect(session2["is_new_user"] as? Bool == false)
                #expect(session2.user["id"] as? String == session.user["id"] as? String)

                // PKCE went to Google too, and the token request carried its verifier.
                let tokenRequests = browser.provider.requests.filter { $0.path == "/google/token" }
                #expect(tokenRequests.count == 2)
                #expect(tokenRequests.allSatisfy { ($0.form["code_verifier"] ?? "").count >= 43 })
                #expect(tokenRequests.allSatisfy { $0.form["client_secret"] == "dev-google-secret" })
            }
        }

        /// Supabase's official client signs in with a Google ID token from the stand-in (as
        /// Google's native SDK hands one to the app): the door takes the token's nonce as the
        /// SHA-256 of the raw one for Google too (Supabase's rule), and refuses the raw nonce.
        @Test func theSupabaseClientSignsInWithAGoogleIDTokenWhoseNonceIsHashed() async throws {
            try await Browser.with(googleIDTokenClientID: "dev-google-native") { browser in
                let email = GatewayFixture.newEmail("supabase-google-native")
                let nonce = Base64URL.encode(SecureRandom.bytes(count: 16))
                let token = try browser.provider.nativeIDToken(
                    .google,
                    email: email,
                    clientID: "dev-google-native",
                    nonce: AppleStandIn.hashedNonce(nonce)
                )
                let seen = try await GatewayEndToEndTests.SupabaseDoor.journeys([
                    "id-token", browser.gateway, "google", token, nonce,
                ])
                #expect(seen["id_token"] as? String == "google", "\(seen)")
                // The raw nonce in the token (the /v1 door's rule for Google) is refused here.
                let raw = try browser.provider.nativeIDToken(
                    .google,
                    email: email,
                    clientID: "dev-google-native",
                    nonce: nonce
                )
                let refused = try await browser.fixture.post(
                    "/auth/v1/token?grant_type=id_token",
                    ["provider": "google", "id_token": raw, "nonce": nonce],
                    base: browser.gateway
                )
                #expect(refused.status == 400 && refused.string("error_code") == "bad_oidc_token", "\(refused)")
            }
        }

        /// Supabase's official client on the browser sign-in (issue 22): signInWithOAuth with
        /// PKCE through `/auth/v1/authorize`, exchangeCodeForSession (the `pkce` grant), then
        /// linkIdentity for Facebook through the same flow, and getUserIdentities/unlinkIdentity.
        @Test func theSupabaseClientSignsInLinksAndUnlinksThroughTheBrowser() async throws {
            try await Browser.with { browser in
                let email = GatewayFixture.newEmail("supabase-google")
                let started = try await GatewayEndToEndTests.SupabaseDoor.journeys([
                    "oauth-url", browser.gateway, "google", Self.appURL,
                ])
                let url = try #require(started["url"] as? String)
                let verifier = try #require(started["verifier"] as? String)
                // The browser opens the client's URL (no apikey): the gateway sends it to Google.
                let authorize = try await browser.fixture.get(
                    String(url.dropFirst(browser.gateway.count)),
                    base: browser.gateway
                )
                let consent = try #require(authorize.header("Location"), "\(authorize)")
                let landed = try await browser.finish(consent, loginHint: email)
                let code = try #require(landed.query["code"], "\(landed)")

                let exchanged = try await GatewayEndToEndTests.SupabaseDoor.journeys([
                    "oauth-exchange", browser.gateway, code, verifier, "facebook", Self.appURL,
                ])
                #expect(exchanged["email"] as? String == email, "\(exchanged)")
                #expect((exchanged["providers"] as? [String])?.contains("google") == true)
                let linkURL = try #require(exchanged["link_url"] as? String)
                let linked = try await browser.finish(linkURL, loginHint: email)
                #expect(linked.query["linked"] == "facebook", "\(linked)")

                let listed = try await GatewayEndToEndTests.SupabaseDoor.journeys([
                    "identities", browser.gateway,
                    try #require(exchanged["access_token"] as? String),
                    try #require(exchanged["refresh_token"] as? String),
                ])
                #expect(listed["before"] as? [String] == ["email", "facebook", "google"], "\(listed)")
                #expect(listed["after"] as? [String] == ["email", "facebook"])

                // An account whose only way in is Facebook (its email is not taken as proved):
                // its identity cannot be unlinked.
                let pkce = PKCEPair()
                let onlyFacebook = try await browser.signIn(
                    "facebook",
                    pkce: pkce,
                    loginHint: GatewayFixture.newEmail("supabase-facebook")
                )
                let session = try await browser.exchange(
                    code: try #require(onlyFacebook.query["code"]),
                    verifier: pkce.verifier
                )
                let user = try await browser.fixture.get(
                    "/auth/v1/user",
                    token: session.accessToken,
                    base: browser.gateway
                )
                let identities = try #require(user["identities"] as? [[String: Any]], "\(user)")
                #expect(identities.map { $0["provider"] as? String } == ["facebook"])
                let identityID = try #require(identities.first?["identity_id"] as? String)
                let refused = try await browser.fixture.send(
                    .DELETE,
                    // Upper case, as Supabase's Swift client writes a UUID in a path.
                    "/auth/v1/user/identities/\(identityID.uppercased())",
                    authorization: "Bearer \(session.accessToken)",
                    base: browser.gateway
                )
                #expect(refused.status == 422, "\(refused)")
                #expect(refused.string("error_code") == "single_identity_not_deletable")
                let unknown = try await browser.fixture.send(
                    .DELETE,
                    "/auth/v1/user/identities/00000000-0000-8000-8000-000000000000",
                    authorization: "Bearer \(session.accessToken)",
                    base: browser.gateway
                )
                #expect(unknown.status == 404 && unknown.string("error_code") == "identity_not_found", "\(unknown)")
            }
        }

        @Test func appleFormPostNamesTheNewUserOnFirstConsent() async throws {
            try await Browser.with { browser in
                let email = GatewayFixture.newEmail("apple")
                let pkce = PKCEPair()
                let landed = try await browser.signIn("apple", pkce: pkce, loginHint: email)
                let code = try #require(landed.query["code"], "\(landed)")
                let session = try await browser.exchange(code: code, verifier: pkce.verifier)
                #expect(session.status == 200, "\(session)")
                #expect(session["is_new_user"] as? Bool == true)
                // Apple's ID token has no name: the name came from the form's `user`.
                #expect(session.user["name"] as? String == "Dev User", "\(session.user)")
                // Apple's token endpoint was given a client secret signed with the team's key
                // (the stand-in checks its signature, issuer, subject and audience).
                let tokenRequests = browser.provider.requests.filter { $0.path == "/apple/token" }
                #expect(tokenRequests.count == 1)
                #expect(tokenRequests.first?.form["code_verifier"] == nil)
            }
        }

        @Test func facebookReadsTheUserFromTheGraphAPIWithAppSecretProof() async throws {
            try await Browser.with { browser in
                let email = GatewayFixture.newEmail("facebook")
                let pkce = PKCEPair()
                let landed = try await browser.signIn("facebook", pkce: pkce, loginHint: email)
                let session = try await browser.exchange(
                    code: try #require(landed.query["code"], "\(landed)"),
                    verifier: pkce.verifier
                )
                #expect(session.status == 200, "\(session)")
                #expect(session.user["name"] as? String == "Dev User")
                // Facebook does not say the email is verified: it is kept unverified.
                #expect(session.user["email_verified"] as? Bool != true, "\(session.user)")
                let graph = browser.provider.requests.filter { $0.path == "/facebook/me" }
                #expect(graph.count == 1)
                #expect(graph.first?.query["appsecret_proof"]?.count == 64)
            }
        }

        // MARK: Failures

        @Test func aReplayedStateAWrongVerifierAndAForeignRedirectAreRefused() async throws {
            try await Browser.with { browser in
                // The callback's state is single use: replayed, 400 invalid_state as JSON.
                let pkce = PKCEPair()
                let started = try await browser.start("google", pkce: pkce)
                let callback = try await browser.consent(started, loginHint: GatewayFixture.newEmail("replay"))
                let first = try await browser.callback(callback)
                #expect(first.status == 302, "\(first)")
                let replayed = try await browser.callback(callback)
                #expect(replayed.status == 400 && replayed.error == "invalid_state", "\(replayed)")
                #expect(replayed.header("Location") == nil)

                // A wrong verifier spends the code: the right one then fails too.
                let code = try #require(Landing(first.header("Location") ?? "").query["code"])
                let wrong = try await browser.exchange(code: code, verifier: PKCEPair().verifier)
                #expect(wrong.status == 400 && wrong.error == "invalid_grant", "\(wrong)")
                let right = try await browser.exchange(code: code, verifier: pkce.verifier)
                #expect(right.status == 400 && right.error == "invalid_grant", "\(right)")

                // A redirect_to off the allow-list: 400 and no redirect (no open redirector).
                for foreign in ["https://evil.example/cb", "laten://auth/callbackx", "laten://auth/callback#x"] {
                    let refused = try await browser.authorize("google", redirectTo: foreign, pkce: PKCEPair())
                    #expect(refused.status == 400 && refused.error == "redirect_not_allowed", "\(foreign): \(refused)")
                    #expect(refused.header("Location") == nil)
                }
                // The app's own query on an allowed URL is kept.
                let withQuery = try await browser.signIn(
                    "google",
                    pkce: PKCEPair(),
                    redirectTo: Self.appURL + "?screen=home",
                    loginHint: GatewayFixture.newEmail("query")
                )
                #expect(withQuery.query["screen"] == "home" && withQuery.query["code"] != nil, "\(withQuery)")

                // An unknown state, and a missing challenge.
                let unknown = try await browser.fixture.get(
                    "/v1/oauth/google/callback?state=nope&code=x",
                    base: browser.gateway
                )
                #expect(unknown.status == 400 && unknown.error == "invalid_state", "\(unknown)")
                let noChallenge = try await browser.fixture.get(
                    "/v1/oauth/google/authorize?redirect_to=laten%3A%2F%2Fauth%2Fcallback&code_challenge_method=S256",
                    base: browser.gateway
                )
                #expect(noChallenge.status == 400 && noChallenge.error == "invalid_request", "\(noChallenge)")
            }
        }

        @Test func theProvidersRefusalAndSilenceComeBackToTheAppAsRedirects() async throws {
            try await Browser.with(providerTimeoutMS: 500) { browser in
                // Identity reads each provider's discovery on its first authorize, a new
                // connection within the same 500 ms, which a loaded machine can miss (a 503,
                // in 2 of 3 runs beside the other gateway tests): read once it is cached.
                try await browser.readDiscovery(of: ["google", "apple"])
                // The person refuses: access_denied, with the app's state.
                let denied = try await browser.signIn("google", pkce: PKCEPair(), loginHint: "deny", appState: "s-2")
                #expect(denied.query["error"] == "access_denied", "\(denied)")
                #expect(denied.query["state"] == "s-2")
                #expect(denied.query["code"] == nil)
                // Apple's cancel in form_post mode is access_denied too.
                let cancelled = try await browser.signIn("apple", pkce: PKCEPair(), loginHint: "deny")
                #expect(cancelled.query["error"] == "access_denied", "\(cancelled)")

                // The token endpoint does not answer within AUTH_OAUTH_PROVIDER_TIMEOUT_MS.
                browser.provider.setTokenDelay(.seconds(3))
                let silent = try await browser.signIn(
                    "google",
                    pkce: PKCEPair(),
                    loginHint: GatewayFixture.newEmail("late")
                )
                #expect(silent.query["error"] == "temporarily_unavailable", "\(silent)")
                #expect(silent.query["error_description"] == "provider_unavailable")
                browser.provider.setTokenDelay(nil)
            }
        }

        /// An ID token that fails verification (here: its issuer is not the one configured, which
        /// overrides discovery's) comes back as `server_error` / `invalid_id_token`.
        @Test func anIDTokenThatFailsVerificationIsAServerErrorRedirect() async throws {
            try await Browser.with(identityVariables: ["AUTH_OIDC_GOOGLE_ISSUER": "https://accounts.google.com"]) {
                browser in
                let landed = try await browser.signIn(
                    "google",
                    pkce: PKCEPair(),
                    loginHint: GatewayFixture.newEmail("issuer"),
                    appState: "s-3"
                )
                #expect(landed.query["error"] == "server_error", "\(landed)")
                #expect(landed.query["error_description"] == "invalid_id_token")
                #expect(landed.query["state"] == "s-3")
                #expect(landed.query["code"] == nil)
            }
        }

        @Test func aProviderWithoutRedirectFlowIsNotEnabled() async throws {
            try await Browser.with(providers: ["google"]) { browser in
                let refused = try await browser.authorize("facebook", redirectTo: Self.appURL, pkce: PKCEPair())
                #expect(refused.status == 400 && refused.error == "provider_not_enabled", "\(refused)")
            }
        }

        /// A provider whose discovery cannot be read: `authorize` answers 503 (there is no flow
        /// yet, so nothing to redirect to), and nothing is stored.
        @Test func anUnreachableProviderIsUnavailableAtAuthorize() async throws {
            try await Browser.with(
                providers: ["google"],
                providerTimeoutMS: 500,
                identityVariables: [
                    "AUTH_OIDC_GOOGLE_DISCOVERY_URL": "http://127.0.0.1:1/.well-known/openid-configuration"
                ]
            ) { browser in
                let refused = try await browser.authorize("google", redirectTo: Self.appURL, pkce: PKCEPair())
                #expect(refused.status == 503 && refused.error == "unavailable", "\(refused)")
                #expect(refused.header("Location") == nil)
            }
        }

        // MARK: Linking by the redirect flow (§2)

        @Test func aSignedInAccountLinksGoogleInTheBrowser() async throws {
            try await Browser.with { browser in
                let fixture = browser.fixture
                let phone = GatewayFixture.newPhone()
                let signedIn = try await fixture.signInWithCode(phone: phone, base: browser.gateway)
                let token = signedIn.accessToken
                let email = GatewayFixture.newEmail("link")
                let pkce = PKCEPair()
                let started = try await fixture.post(
                    "/v1/me/identities/google/authorize",
                    [
                        "redirect_to": Self.appURL, "code_challenge": pkce.challenge, "code_challenge_method": "S256",
                        "state": "link-1",
                    ],
                    token: token,
                    base: browser.gateway
                )
                #expect(started.status == 200, "\(started)")
                let url = try #require(started.string("url"))
                let callback = try await browser.consent(url, loginHint: email)
                let landed = Landing(try await browser.callback(callback).header("Location") ?? "")
                #expect(landed.query["linked"] == "google", "\(landed)")
                #expect(landed.query["state"] == "link-1")
                #expect(landed.query["code"] == nil)
                let identities = try await fixture.get("/v1/me/identities", token: token, base: browser.gateway)
                let providers = (identities["identities"] as? [[String: Any]] ?? []).compactMap {
                    $0["provider"] as? String
                }
                #expect(Set(providers) == ["phone", "google"], "\(identities)")

                // The same Google account cannot be linked to a second account.
                let other = try await fixture.signInWithCode(phone: GatewayFixture.newPhone(), base: browser.gateway)
                let again = try await fixture.post(
                    "/v1/me/identities/google/authorize",
                    ["redirect_to": Self.appURL, "code_challenge": pkce.challenge, "code_challenge_method": "S256"],
                    token: other.accessToken,
                    base: browser.gateway
                )
                let refusedCallback = try await browser.consent(try #require(again.string("url")), loginHint: email)
                let refused = Landing(try await browser.callback(refusedCallback).header("Location") ?? "")
                #expect(refused.query["error"] == "invalid_request", "\(refused)")
                #expect(refused.query["error_description"] == "identity_already_linked")

                // Signing in with that Google account now finds the phone's account.
                let pkce2 = PKCEPair()
                let viaGoogle = try await browser.signIn("google", pkce: pkce2, loginHint: email)
                let session = try await browser.exchange(
                    code: try #require(viaGoogle.query["code"]),
                    verifier: pkce2.verifier
                )
                #expect(session.user["id"] as? String == signedIn.user["id"] as? String, "\(session)")
                #expect(session["is_new_user"] as? Bool == false)
            }
        }
    }
}

/// A PKCE verifier and its S256 challenge.
struct PKCEPair {
    let verifier = Base64URL.encode(SecureRandom.bytes(count: 32))
    var challenge: String { Base64URL.encode(SHA256.hash(verifier)) }
}

/// Where a redirect lands: its URL and query parameters.
struct Landing: CustomStringConvertible {
    let url: String
    let scheme: String?
    let query: [String: String]

    init(_ url: String) {
        self.url = url
        let components = URLComponents(string: url)
        scheme = components?.scheme
        var query: [String: String] = [:]
        for item in components?.queryItems ?? [] { query[item.name] = item.value ?? "" }
        self.query = query
    }

    var description: String { url }
}

/// The test's browser: a gateway and an identity whose redirect flows point at a stand-in
/// provider, over the fixture's other services.
struct Browser {
    let fixture: GatewayFixture
    let provider: DevOAuthProvider
    let gateway: String

    static func with(
        providers: Set<String> = ["google", "apple", "facebook"],
        providerTimeoutMS: Int = 10_000,
        identityVariables: [String: String] = [:],
        googleIDTokenClientID: String? = nil,
        _ body: (Browser) async throws -> Void
    ) async throws {
        let fixture = try fixtureOrFail()
        let appleKey = try ES256PrivateKey()
        var configuration = DevOAuthProvider.Configuration()
        configuration.appleClientSecretKey = appleKey.publicKey
        try await DevOAuthProvider.with(configuration: configuration) { provider in
            var variables = [
                "AUTH_PUBLIC_URL": GatewayFixture.publicURL,
                "AUTH_OAUTH_REDIRECT_URLS": BrowserSignInTestsURLs.allowed,
                "AUTH_OAUTH_PROVIDER_TIMEOUT_MS": "\(providerTimeoutMS)",
            ]
            if providers.contains("google") {
                variables["AUTH_OIDC_GOOGLE_DISCOVERY_URL"] = provider.discoveryURL(.google)
                variables["AUTH_OAUTH_GOOGLE_CLIENT_ID"] = configuration.googleClientID
                variables["AUTH_OAUTH_GOOGLE_CLIENT_SECRET"] = configuration.googleClientSecret
            }
            if providers.contains("apple") {
                variables["AUTH_OIDC_APPLE_DISCOVERY_URL"] = provider.discoveryURL(.apple)
                variables["AUTH_OAUTH_APPLE_CLIENT_ID"] = configuration.appleClientID
                variables["AUTH_OAUTH_APPLE_TEAM_ID"] = configuration.appleTeamID
                variables["AUTH_OAUTH_APPLE_KEY_ID"] = configuration.appleKeyID
                variables["AUTH_OAUTH_APPLE_PRIVATE_KEY"] = try appleKey.pemRepresentation
            }
            if providers.contains("facebook") {
                variables["AUTH_OAUTH_FACEBOOK_CLIENT_ID"] = configuration.facebookClientID
                variables["AUTH_OAUTH_FACEBOOK_CLIENT_SECRET"] = configuration.facebookClientSecret
                variables["AUTH_OAUTH_FACEBOOK_AUTHORIZE_URL"] = provider.facebookAuthorizeURL
                variables["AUTH_OAUTH_FACEBOOK_TOKEN_URL"] = provider.facebookTokenURL
                variables["AUTH_OAUTH_FACEBOOK_GRAPH_URL"] = provider.facebookGraphURL
            }
            if let googleIDTokenClientID {
                // Google's ID-token sign-in (native SDK tokens) against the stand-in's keys.
                variables["AUTH_OIDC_GOOGLE_CLIENT_IDS"] = googleIDTokenClientID
                variables["AUTH_OIDC_GOOGLE_ISSUER"] = provider.issuer(.google)
                variables["AUTH_OIDC_GOOGLE_JWKS_URL"] = provider.issuer(.google) + "/jwks"
            }
            variables["AUTH_IDENTITY_ACCOUNT_CHECKS_PER_HOUR"] = "1000000"
            variables.merge(identityVariables) { $1 }
            let (identity, identityPort) = try await fixture.startIdentity(variables)
            let (gateway, base) = try await fixture.startGateway(
                identityPort: identityPort,
                [
                    "AUTH_GATEWAY_RATE_LIMIT_PER_MINUTE": "1000000",
                    "AUTH_PUBLIC_URL": GatewayFixture.publicURL,
                ]
            )
            func stop() async {
                await gateway.terminate(grace: .seconds(5))
                await identity.terminate(grace: .seconds(5))
            }
            do {
                try await body(Browser(fixture: fixture, provider: provider, gateway: base))
            } catch {
                await stop()
                throw error
            }
            await stop()
        }
    }

    private static func fixtureOrFail() throws -> GatewayFixture {
        guard let fixture = GatewayFixture.current else {
            throw ServiceProcessError(message: "the gateway fixture is not running")
        }
        return fixture
    }

    /// `GET /v1/oauth/{provider}/authorize`: the gateway's answer.
    /// Authorizes with each provider until its discovery is read (identity caches it for an
    /// hour): at most 20 tries, each 503 (discovery not read in time) followed by another.
    func readDiscovery(of providers: [String]) async throws {
        for provider in providers {
            var reply = try await authorize(
                provider,
                redirectTo: GatewayEndToEndTests.BrowserSignIn.appURL,
                pkce: PKCEPair()
            )
            var tries = 1
            while reply.status == 503, tries < 20 {
                reply = try await authorize(
                    provider,
                    redirectTo: GatewayEndToEndTests.BrowserSignIn.appURL,
                    pkce: PKCEPair()
                )
                tries += 1
            }
            guard reply.status == 302 else { throw ServiceProcessError(message: "authorize \(provider): \(reply)") }
        }
    }

    func authorize(
        _ provider: String,
        redirectTo: String,
        pkce: PKCEPair,
        appState: String? = nil
    ) async throws -> GatewayFixture.Reply {
        var query = [
            ("redirect_to", redirectTo), ("code_challenge", pkce.challenge), ("code_challenge_method", "S256"),
        ]
        if let appState { query.append(("state", appState)) }
        return try await fixture.get("/v1/oauth/\(provider)/authorize?" + Self.form(query), base: gateway)
    }

    /// The provider's consent URL the gateway redirected to.
    func start(
        _ provider: String,
        pkce: PKCEPair,
        redirectTo: String = GatewayEndToEndTests.BrowserSignIn.appURL,
        appState: String? = nil
    ) async throws -> String {
        let reply = try await authorize(provider, redirectTo: redirectTo, pkce: pkce, appState: appState)
        guard reply.status == 302, let location = reply.header("Location") else {
            throw ServiceProcessError(message: "authorize: \(reply)")
        }
        #expect(reply.header("Cache-Control") == "no-store")
        return location
    }

    /// At the provider, consents as `loginHint` (an email, or `deny`): the callback the
    /// provider sends the browser to, as a request to make (GET URL, or Apple's form to post).
    func consent(_ url: String, loginHint: String?) async throws -> Callback {
        let target = loginHint.map { url + "&login_hint=" + Self.escape($0) } ?? url
        let (status, headers, body) = try await raw(.GET, target)
        if status == 302, let location = headers.first(name: "Location") {
            return .get(location)
        }
        guard status == 200, let action = DevOAuthProvider.formAction(inPage: body) else {
            throw ServiceProcessError(message: "consent: \(status) \(body)")
        }
        return .post(action, DevOAuthProvider.formFields(inPage: body))
    }

    enum Callback {
        case get(String)
        case post(String, [String: String])
    }

    /// The callback, sent to this gateway (the provider addressed it to `AUTH_PUBLIC_URL`, which
    /// stands for the gateway's public name).
    func callback(_ callback: Callback) async throws -> GatewayFixture.Reply {
        switch callback {
        case .get(let url):
            return try await fixture.get(try path(of: url), base: gateway)
        case .post(let url, let fields):
            return try await fixture.send(
                .POST,
                try path(of: url),
                raw: Self.form(fields.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }),
                contentType: "application/x-www-form-urlencoded",
                base: gateway
            )
        }
    }

    /// The whole flow to the app's URL.
    func signIn(
        _ provider: String,
        pkce: PKCEPair,
        redirectTo: String = GatewayEndToEndTests.BrowserSignIn.appURL,
        loginHint: String?,
        appState: String? = nil
    ) async throws -> Landing {
        let started = try await start(provider, pkce: pkce, redirectTo: redirectTo, appState: appState)
        let reply = try await callback(try await consent(started, loginHint: loginHint))
        guard reply.status == 302, let location = reply.header("Location") else {
            throw ServiceProcessError(message: "callback: \(reply)")
        }
        return Landing(location)
    }

    /// From the provider's consent URL to the app's URL: consent as `loginHint`, then the
    /// callback on this gateway.
    func finish(_ consentURL: String, loginHint: String?) async throws -> Landing {
        let reply = try await callback(try await consent(consentURL, loginHint: loginHint))
        guard reply.status == 302, let location = reply.header("Location") else {
            throw ServiceProcessError(message: "callback: \(reply)")
        }
        return Landing(location)
    }

    func exchange(code: String, verifier: String) async throws -> GatewayFixture.Reply {
        try await fixture.post("/v1/oauth/token", ["code": code, "code_verifier": verifier], base: gateway)
    }

    private func path(of url: String) throws -> String {
        guard url.hasPrefix(GatewayFixture.publicURL) else {
            throw ServiceProcessError(message: "the callback is not at AUTH_PUBLIC_URL: \(url)")
        }
        return String(url.dropFirst(GatewayFixture.publicURL.count))
    }

    private func raw(_ method: HTTPMethod, _ url: String) async throws -> (Int, HTTPHeaders, String) {
        var request = HTTPClientRequest(url: url)
        request.method = method
        // The stand-in provider lives for one test: no pooled connection may outlive it (see
        // GatewayFixture.send).
        request.headers.add(name: "Connection", value: "close")
        let response = try await fixture.http.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 20)
        return (Int(response.status.code), response.headers, String(buffer: body))
    }

    static func form(_ pairs: [(String, String)]) -> String {
        pairs.map { escape($0.0) + "=" + escape($0.1) }.joined(separator: "&")
    }

    static func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~")))
            ?? text
    }
}

enum BrowserSignInTestsURLs {
    static let allowed = "laten://auth/callback,https://app.example.test/done"
}
