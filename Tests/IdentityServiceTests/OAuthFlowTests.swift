import AsyncHTTPClient
import AuthCrypto
import AuthDevProvider
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import Foundation
import Testing

@testable import IdentityService

/// Browser sign-in at identity's RPC level (issue 21 §1), against the stand-in provider, with
/// the injected clock for the lifetimes: a state lasts 10 minutes, the app's code 5.
@Suite struct OAuthFlowTests {
    static let appURL = "laten://auth/callback"

    /// An identity whose Google redirect flow points at `provider`; the clock starts now (the
    /// stand-in's ID tokens carry the real time).
    static func withGoogleFlow(
        _ body: (IdentityFixture, DevOAuthProvider, HTTPClient) async throws -> Void
    ) async throws {
        try await DevOAuthProvider.with(configuration: .init()) { provider in
            var settings = HTTPClient.Configuration()
            settings.redirectConfiguration = .disallow
            let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: settings)
            do {
                try await withIdentityService(clock: ManualClock(Date())) { configuration in
                    configuration.oauth.publicURL = "https://auth.example.test"
                    configuration.oauth.redirectURLs = [appURL]
                    configuration.oauth.clients[.google] = OAuthClientConfiguration(
                        provider: .google,
                        clientID: "dev-google-client",
                        secret: .fixed("dev-google-secret"),
                        endpoints: .discovery(URL(string: provider.discoveryURL(.google))!)
                    )
                } _: { fixture in
                    try await body(fixture, provider, http)
                }
            } catch {
                try? await http.shutdown()
                throw error
            }
            try await http.shutdown()
        }
    }

    /// StartOAuth, then the stand-in's consent: the callback's `state` and `code`.
    static func consent(
        _ fixture: IdentityFixture,
        _ http: HTTPClient,
        pkce: (verifier: String, challenge: String),
        email: String
    ) async throws -> (state: String, code: String) {
        let started = try await fixture.client.startOAuth(
            Auth_Identity_V1_StartOAuthRequest(
                provider: .google,
                redirectTo: appURL,
                codeChallenge: pkce.challenge,
                codeChallengeMethod: "S256",
                appState: "app",
                clientIP: "203.0.113.7"
            )
        )
        #expect(started.expiresIn == 600)
        let url = started.authorizationURL + "&login_hint=" + email.replacingOccurrences(of: "@", with: "%40")
        let response = try await http.execute(HTTPClientRequest(url: url), timeout: .seconds(10))
        let location = try #require(response.headers.first(name: "Location"))
        #expect(location.hasPrefix("https://auth.example.test/v1/oauth/google/callback?"), "\(location)")
        let query = Self.query(location)
        return (try #require(query["state"]), try #require(query["code"]))
    }

    static func query(_ url: String) -> [String: String] {
        var values: [String: String] = [:]
        for item in URLComponents(string: url)?.queryItems ?? [] { values[item.name] = item.value ?? "" }
        return values
    }

    static func pkce() -> (verifier: String, challenge: String) {
        let verifier = Base64URL.encode(SecureRandom.bytes(count: 32))
        return (verifier, Base64URL.encode(SHA256.hash(verifier)))
    }

    @Test func aStateLastsTenMinutes() async throws {
        try await Self.withGoogleFlow { fixture, _, http in
            let first = try await Self.consent(fixture, http, pkce: Self.pkce(), email: "first@example.com")
            let second = try await Self.consent(fixture, http, pkce: Self.pkce(), email: "second@example.com")
            // Stored as hashes only.
            let stored = try await fixture.query("SELECT state_hash FROM @oauth_flows ORDER BY expires_at")
            #expect(try stored.map { try $0[0].bytes } == [SHA256.hash(first.state), SHA256.hash(second.state)])
            fixture.clock.advance(seconds: 599)
            let done = try await fixture.client.finishOAuth(
                Auth_Identity_V1_FinishOAuthRequest(provider: .google, state: first.state, code: first.code)
            )
            #expect(done.outcome == "signed_in", "\(done.redirectURL)")
            #expect(Self.query(done.redirectURL)["state"] == "app")
            fixture.clock.advance(seconds: 1)
            await expectRPCError(.invalidArgument, "invalid_state") {
                try await fixture.client.finishOAuth(
                    Auth_Identity_V1_FinishOAuthRequest(provider: .google, state: second.state, code: second.code)
                )
            }
            #expect(try await fixture.query("SELECT 1 FROM @oauth_flows").count == 0)
        }
    }

    @Test func theAppsCodeLastsFiveMinutesAndWorksOnce() async throws {
        try await Self.withGoogleFlow { fixture, _, http in
            var codes: [(code: String, verifier: String)] = []
            for email in ["quick@example.com", "slow@example.com"] {
                let pkce = Self.pkce()
                let consented = try await Self.consent(fixture, http, pkce: pkce, email: email)
                let finished = try await fixture.client.finishOAuth(
                    Auth_Identity_V1_FinishOAuthRequest(provider: .google, state: consented.state, code: consented.code)
                )
                codes.append(
                    (try #require(Self.query(finished.redirectURL)["code"], "\(finished.redirectURL)"), pkce.verifier)
                )
            }
            fixture.clock.advance(seconds: 299)
            let exchanged = try await fixture.client.exchangeOAuthCode(
                Auth_Identity_V1_ExchangeOAuthCodeRequest(code: codes[0].code, codeVerifier: codes[0].verifier)
            )
            #expect(exchanged.user?.email == "quick@example.com")
            #expect(exchanged.created)
            #expect(exchanged.provider == .google)
            await expectRPCError(.invalidArgument, "invalid_grant") {
                try await fixture.client.exchangeOAuthCode(
                    Auth_Identity_V1_ExchangeOAuthCodeRequest(code: codes[0].code, codeVerifier: codes[0].verifier)
                )
            }
            fixture.clock.advance(seconds: 1)
            await expectRPCError(.invalidArgument, "invalid_grant") {
                try await fixture.client.exchangeOAuthCode(
                    Auth_Identity_V1_ExchangeOAuthCodeRequest(code: codes[1].code, codeVerifier: codes[1].verifier)
                )
            }
            let audit = try await fixture.operatorClient.listAuditEvents(
                Auth_Identity_V1_ListAuditEventsRequest(userID: exchanged.user?.id ?? "")
            )
            #expect(audit.events.map(\.method).contains("oidc_google"))
        }
    }

    @Test func startRefusesWhatItCannotSendBackSafely() async throws {
        try await Self.withGoogleFlow { fixture, _, _ async throws in
            let pkce = Self.pkce()
            func start(
                _ provider: Auth_Identity_V1_Provider,
                _ redirect: String,
                _ challenge: String,
                _ method: String
            )
                async throws -> Auth_Identity_V1_StartOAuthResponse
            {
                try await fixture.client.startOAuth(
                    Auth_Identity_V1_StartOAuthRequest(
                        provider: provider,
                        redirectTo: redirect,
                        codeChallenge: challenge,
                        codeChallengeMethod: method
                    )
                )
            }
            await expectRPCError(.invalidArgument, "redirect_not_allowed") {
                try await start(.google, "https://evil.example/cb", pkce.challenge, "S256")
            }
            await expectRPCError(.failedPrecondition, "provider_not_enabled") {
                try await start(.facebook, Self.appURL, pkce.challenge, "S256")
            }
            await expectRPCError(.invalidArgument, "invalid_argument") {
                try await start(.google, Self.appURL, pkce.verifier + "x", "S256")
            }
            await expectRPCError(.invalidArgument, "invalid_argument") {
                try await start(.google, Self.appURL, pkce.challenge, "plain")
            }
            #expect(try await fixture.query("SELECT 1 FROM @oauth_flows").count == 0)
        }
    }

    /// Apple's client secret: an ES256 JWT for the team, verifiable with the key's public half.
    @Test func appleClientSecretIsAShortES256JWTForTheTeam() async throws {
        let key = try ES256PrivateKey()
        let clock = ManualClock()
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        let fetcher = HTTPJWKSFetcher()
        let client = OAuthProviderClient(
            configuration: OAuthClientConfiguration(
                provider: .apple,
                clientID: "com.laten.web",
                secret: .apple(teamID: "TEAM123456", keyID: "KEY1234567", privateKey: key),
                endpoints: .discovery(URL(string: "https://appleid.apple.com/.well-known/openid-configuration")!)
            ),
            callbackURL: "https://auth.example.test/v1/oauth/apple/callback",
            http: http,
            timeout: .seconds(1),
            clock: clock,
            jwksFetcher: fetcher,
            jwksRefetchInterval: .seconds(60),
            jwksLifetime: .seconds(3600),
            clockSkew: 60
        )
        let secret = try client.clientSecret()
        try await http.shutdown()
        await fetcher.shutdown()
        let parts = try JWS.parse(secret)
        #expect(parts.header.alg == "ES256")
        #expect(parts.header.kid == "KEY1234567")
        _ = try JWS.verify(parts, expectedAlgorithm: .es256, key: key.publicKey)
        let claims = try #require(try JSONSerialization.jsonObject(with: Data(parts.payload)) as? [String: Any])
        let now = Int(clock.now().timeIntervalSince1970)
        #expect(claims["iss"] as? String == "TEAM123456")
        #expect(claims["sub"] as? String == "com.laten.web")
        #expect(claims["aud"] as? String == "https://appleid.apple.com")
        #expect(claims["iat"] as? Int == now)
        #expect(claims["exp"] as? Int == now + 300)
    }

    @Test func theAppsRedirectKeepsItsQueryAndGetsItsStateLast() {
        let redirect = OAuthRedirect(to: "laten://auth/callback?screen=home", appState: "a b&c")
        #expect(redirect.url(["code": "xyz"]) == "laten://auth/callback?screen=home&code=xyz&state=a%20b%26c")
        #expect(OAuthRedirect(to: "laten://cb", appState: "").url(["linked": "google"]) == "laten://cb?linked=google")
        #expect(OAuthRedirect.isToken("user_cancelled_authorize"))
        #expect(!OAuthRedirect.isToken("<script>"))
    }
}

/// IssueSignInCode: the code a followed confirmation link ends in for a PKCE client, redeemed
/// by ExchangeOAuthCode once, with the verifier, within five minutes.
@Suite struct IssueSignInCodeTests {
    @Test func theCodeIsExchangedOnceWithItsVerifier() async throws {
        try await withIdentityService(clock: ManualClock(Date())) { fixture in
            let user = try await fixture.signUp(email: "linked@example.com")
            let pkce = OAuthFlowTests.pkce()
            let issued = try await fixture.client.issueSignInCode(
                Auth_Identity_V1_IssueSignInCodeRequest(userID: user.id, codeChallenge: pkce.challenge)
            )
            await expectRPCError(.invalidArgument, "invalid_grant") {
                try await fixture.client.exchangeOAuthCode(
                    Auth_Identity_V1_ExchangeOAuthCodeRequest(
                        code: issued.code,
                        codeVerifier: OAuthFlowTests.pkce().verifier
                    )
                )
            }
            let again = try await fixture.client.issueSignInCode(
                Auth_Identity_V1_IssueSignInCodeRequest(userID: user.id, codeChallenge: pkce.challenge)
            )
            fixture.clock.advance(seconds: 299)
            let exchanged = try await fixture.client.exchangeOAuthCode(
                Auth_Identity_V1_ExchangeOAuthCodeRequest(code: again.code, codeVerifier: pkce.verifier)
            )
            #expect(exchanged.user?.id == user.id)
            #expect(exchanged.emailLink)
            #expect(exchanged.provider == .unspecified)
            #expect(!exchanged.created)
            let late = try await fixture.client.issueSignInCode(
                Auth_Identity_V1_IssueSignInCodeRequest(userID: user.id, codeChallenge: pkce.challenge)
            )
            fixture.clock.advance(seconds: 300)
            await expectRPCError(.invalidArgument, "invalid_grant") {
                try await fixture.client.exchangeOAuthCode(
                    Auth_Identity_V1_ExchangeOAuthCodeRequest(code: late.code, codeVerifier: pkce.verifier)
                )
            }
        }
    }

    @Test func anUnknownUserOrABadChallengeIsRefused() async throws {
        try await withIdentityService { fixture in
            await expectRPCError(.notFound, "user_not_found") {
                try await fixture.client.issueSignInCode(
                    Auth_Identity_V1_IssueSignInCodeRequest(
                        userID: UUID().uuidString,
                        codeChallenge: OAuthFlowTests.pkce().challenge
                    )
                )
            }
            let user = try await fixture.signUp(email: "challenge@example.com")
            let error = await #expect(throws: RPCError.self) {
                try await fixture.client.issueSignInCode(
                    Auth_Identity_V1_IssueSignInCodeRequest(userID: user.id, codeChallenge: "short")
                )
            }
            #expect(error?.fieldViolations.map(\.field) == ["code_challenge"])
        }
    }
}
