import AsyncHTTPClient
import AuthCrypto
import AuthText
import Testing

@testable import AuthDevProvider

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The provider over real HTTP on loopback, as the backend and a browser reach it.
@Suite struct DevOAuthProviderTests {
    static let redirectURI = "http://127.0.0.1:1/auth/callback"

    @Test func discoveryDocumentsNameTheEndpointsAndTheJWKSServesTheSigningKey() async throws {
        try await withProvider { provider, http in
            for p in [DevOAuthProvider.Provider.google, .apple] {
                let answer = try await http.get(provider.discoveryURL(p))
                #expect(answer.status == 200)
                #expect(answer.headers["content-type"] == "application/json")
                let document = try JSONDecoder().decode(Discovery.self, from: Data(answer.body.utf8))
                let base = provider.baseURL + "/" + p.rawValue
                #expect(provider.issuer(p) == base)
                #expect(document.issuer == base)
                #expect(document.authorization_endpoint == base + "/authorize")
                #expect(document.token_endpoint == base + "/token")
                #expect(document.jwks_uri == base + "/jwks")
                #expect(document.response_types_supported == ["code"])
                #expect(document.subject_types_supported == ["public"])
                #expect(document.id_token_signing_alg_values_supported == ["ES256"])
                #expect(document.code_challenge_methods_supported == (p == .google ? ["S256"] : nil))

                let jwks = try JSONDecoder().decode(
                    JWKSet.self,
                    from: Data(try await http.get(document.jwks_uri).body.utf8)
                )
                #expect(jwks.keys.count == 1)
                #expect(jwks.keys.first?.kid?.isEmpty == false)
                #expect(jwks.keys.first?.alg == "ES256")
            }
            #expect(try await http.get(provider.discoveryURL(.facebook)).status == 404)
            #expect(try await http.get(provider.baseURL + "/nowhere").status == 404)
            #expect(provider.facebookAuthorizeURL == provider.baseURL + "/facebook/authorize")
            #expect(provider.facebookTokenURL == provider.baseURL + "/facebook/token")
            #expect(provider.facebookGraphURL == provider.baseURL + "/facebook")
        }
    }

    @Test func authorizeRedirectsWithACodeAndTheState() async throws {
        try await withProvider { provider, http in
            let answer = try await http.authorize(
                provider,
                .google,
                ["state": "st&te=1", "scope": "openid email", "login_hint": "Ada@Example.com"]
            )
            #expect(answer.status == 302)
            let (target, parameters) = try #require(answer.redirect)
            #expect(target == Self.redirectURI)
            #expect(parameters["state"] == "st&te=1")
            let code = try #require(parameters["code"])
            #expect(Base64URL.decode(code)?.count == 24)

            // The request is recorded with its query decoded.
            let recorded = try #require(provider.requests.last)
            #expect(recorded.method == "GET")
            #expect(recorded.path == "/google/authorize")
            #expect(recorded.query["state"] == "st&te=1")
            #expect(recorded.query["scope"] == "openid email")

            // A redirect URI with a query of its own keeps it.
            let withQuery = try await http.authorize(
                provider,
                .google,
                ["redirect_uri": "http://127.0.0.1:1/cb?from=app", "state": "s"]
            )
            #expect(withQuery.headers["location"]?.hasPrefix("http://127.0.0.1:1/cb?from=app&code=") == true)
        }
    }

    @Test func authorizeShowsAnErrorPageForABadClientOrRedirectURI() async throws {
        try await withProvider { provider, http in
            for overrides in [
                ["client_id": "someone-else"],
                ["redirect_uri": ""],
                ["response_type": "token"],
            ] {
                let answer = try await http.authorize(provider, .google, overrides)
                #expect(answer.status == 400)
                #expect(answer.headers["location"] == nil)
                #expect(answer.headers["content-type"]?.hasPrefix("text/plain") == true)
            }
        }
    }

    @Test func codeWithPKCEGivesAnIDTokenThatVerifiesAgainstTheJWKSAndIsSingleUse() async throws {
        try await withProvider { provider, http in
            let verifier = Base64URL.encode(SecureRandom.bytes(count: 32))
            let answer = try await http.authorize(
                provider,
                .google,
                [
                    "nonce": "n-0S6_WzA2Mj", "login_hint": "Ada@Example.com",
                    "code_challenge": Base64URL.encode(SHA256.hash(verifier)), "code_challenge_method": "S256",
                ]
            )
            let code = try #require(answer.redirect?.parameters["code"])
            let exchange = [
                "grant_type": "authorization_code", "code": code, "redirect_uri": Self.redirectURI,
                "client_id": "dev-google-client", "client_secret": "dev-google-secret", "code_verifier": verifier,
            ]
            let tokenAnswer = try await http.postForm(provider.baseURL + "/google/token", exchange)
            #expect(tokenAnswer.status == 200)
            #expect(tokenAnswer.headers["cache-control"] == "no-store")
            let tokens = try JSONDecoder().decode(Tokens.self, from: Data(tokenAnswer.body.utf8))
            #expect(tokens.token_type == "Bearer")
            #expect(tokens.expires_in == 3600)
            #expect(!tokens.access_token.isEmpty)

            let claims: GoogleClaims = try await http.verifiedClaims(
                try #require(tokens.id_token),
                jwksURL: provider.baseURL + "/google/jwks"
            )
            #expect(claims.iss == provider.issuer(.google))
            #expect(claims.aud == "dev-google-client")
            #expect(claims.sub == "dev-" + Hex.lowercase(SHA256.hash("ada@example.com")).prefix(16))
            #expect(claims.email == "Ada@Example.com")
            #expect(claims.email_verified == true)
            #expect(claims.name == "Dev User")
            #expect(claims.nonce == "n-0S6_WzA2Mj")
            #expect(claims.exp - claims.iat == 600)
            #expect(!claims.jti.isEmpty)

            let again = try await http.postForm(provider.baseURL + "/google/token", exchange)
            #expect(again.status == 400)
            #expect(try again.oauthError().error == "invalid_grant")
        }
    }

    @Test func theDefaultPersonSignsInWithoutAnEmailHintAndNoNonceIsOmitted() async throws {
        try await withProvider { provider, http in
            let code = try #require(try await http.authorize(provider, .google, [:]).redirect?.parameters["code"])
            let tokens = try await http.exchangeAtGoogle(provider, code: code)
            let claims: GoogleClaims = try await http.verifiedClaims(
                try #require(tokens.id_token),
                jwksURL: provider.baseURL + "/google/jwks"
            )
            #expect(claims.email == "dev.user@example.com")
            #expect(claims.sub == "dev-" + Hex.lowercase(SHA256.hash("dev.user@example.com")).prefix(16))
            #expect(claims.nonce == nil)
        }
    }

    @Test func aWrongVerifierIsInvalidGrantAndSpendsTheCode() async throws {
        try await withProvider { provider, http in
            let verifier = Base64URL.encode(SecureRandom.bytes(count: 32))
            let code = try #require(
                try await http.authorize(
                    provider,
                    .google,
                    ["code_challenge": Base64URL.encode(SHA256.hash(verifier)), "code_challenge_method": "S256"]
                ).redirect?.parameters["code"]
            )
            var exchange = [
                "grant_type": "authorization_code", "code": code, "redirect_uri": Self.redirectURI,
                "client_id": "dev-google-client", "client_secret": "dev-google-secret",
                "code_verifier": Base64URL.encode(SecureRandom.bytes(count: 32)),
            ]
            let wrong = try await http.postForm(provider.baseURL + "/google/token", exchange)
            #expect(wrong.status == 400)
            let error = try wrong.oauthError()
            #expect(error.error == "invalid_grant")
            #expect(error.error_description == "PKCE verification failed")

            exchange["code_verifier"] = verifier
            let right = try await http.postForm(provider.baseURL + "/google/token", exchange)
            #expect(try right.oauthError().error == "invalid_grant")

            // Without a verifier at all, also refused.
            let other = try #require(
                try await http.authorize(
                    provider,
                    .google,
                    ["code_challenge": Base64URL.encode(SHA256.hash(verifier)), "code_challenge_method": "S256"]
                ).redirect?.parameters["code"]
            )
            exchange["code"] = other
            exchange["code_verifier"] = nil
            #expect(
                try await http.postForm(provider.baseURL + "/google/token", exchange).oauthError().error
                    == "invalid_grant"
            )
        }
    }

    @Test func aWrongSecretIsInvalidClientAndLeavesTheCodeUnspent() async throws {
        try await withProvider { provider, http in
            let code = try #require(try await http.authorize(provider, .google, [:]).redirect?.parameters["code"])
            let wrong = try await http.postForm(
                provider.baseURL + "/google/token",
                [
                    "grant_type": "authorization_code", "code": code, "redirect_uri": Self.redirectURI,
                    "client_id": "dev-google-client", "client_secret": "not-the-secret",
                ]
            )
            #expect(wrong.status == 401)
            #expect(try wrong.oauthError().error == "invalid_client")
            // The client check comes before the code's: the code was never presented.
            #expect(try await http.exchangeAtGoogle(provider, code: code).id_token != nil)
        }
    }

    @Test func appleAcceptsAClientSecretSignedWithTheConfiguredKeyOnly() async throws {
        let backendKey = try ES256PrivateKey()
        var configuration = DevOAuthProvider.Configuration()
        configuration.appleClientSecretKey = backendKey.publicKey
        try await withProvider(configuration) { provider, http in
            let now = Int64(Date().timeIntervalSince1970)
            for (key, kid, accepted) in [
                (try ES256PrivateKey(), "DEVKEY0001", false),
                (backendKey, "OTHERKEY01", false),
                (backendKey, "DEVKEY0001", true),
            ] {
                let code = try #require(
                    try await http.authorize(
                        provider,
                        .apple,
                        ["nonce": "apple-nonce", "login_hint": "ann@example.com"]
                    )
                    .redirect?.parameters["code"]
                )
                let secret = try AppleSecretClaims.sign(
                    AppleSecretClaims(
                        iss: "DEVTEAM001",
                        iat: now,
                        exp: now + 3600,
                        aud: "https://appleid.apple.com",
                        sub: "dev.apple.services"
                    ),
                    key: key,
                    kid: kid
                )
                let answer = try await http.postForm(
                    provider.baseURL + "/apple/token",
                    [
                        "grant_type": "authorization_code", "code": code, "redirect_uri": Self.redirectURI,
                        "client_id": "dev.apple.services", "client_secret": secret,
                    ]
                )
                if !accepted {
                    #expect(answer.status == 401)
                    #expect(try answer.oauthError().error == "invalid_client")
                    continue
                }
                #expect(answer.status == 200)
                let tokens = try JSONDecoder().decode(Tokens.self, from: Data(answer.body.utf8))
                let claims: AppleClaims = try await http.verifiedClaims(
                    try #require(tokens.id_token),
                    jwksURL: provider.baseURL + "/apple/jwks"
                )
                #expect(claims.iss == provider.issuer(.apple))
                #expect(claims.aud == "dev.apple.services")
                #expect(claims.email == "ann@example.com")
                #expect(claims.email_verified == "true")
                #expect(claims.nonce == "apple-nonce")
                #expect(claims.name == nil)
            }
        }
    }

    @Test func formPostCarriesTheUserOnTheFirstConsentOnly() async throws {
        try await withProvider { provider, http in
            let query = [
                "response_mode": "form_post", "scope": "name email", "state": "<\"&'>", "login_hint": "eve@example.com",
            ]
            let first = try await http.authorize(provider, .apple, query)
            #expect(first.status == 200)
            #expect(first.headers["content-type"]?.hasPrefix("text/html") == true)
            #expect(!first.body.contains("<\"&'>"))
            #expect(DevOAuthProvider.formAction(inPage: first.body) == Self.redirectURI)
            let fields = DevOAuthProvider.formFields(inPage: first.body)
            #expect(fields["state"] == "<\"&'>")
            #expect(fields["code"]?.isEmpty == false)
            let user = try JSONDecoder().decode(AppleUser.self, from: Data(try #require(fields["user"]).utf8))
            #expect(user.name.firstName == "Dev")
            #expect(user.name.lastName == "User")
            #expect(user.email == "eve@example.com")

            let second = DevOAuthProvider.formFields(inPage: try await http.authorize(provider, .apple, query).body)
            #expect(second["code"]?.isEmpty == false)
            #expect(second["code"] != fields["code"])
            #expect(second["user"] == nil)
        }
    }

    @Test func loginHintDenyRefusesTheAuthorization() async throws {
        try await withProvider { provider, http in
            let answer = try await http.authorize(provider, .google, ["login_hint": "deny", "state": "xyz"])
            #expect(answer.status == 302)
            #expect(
                answer.headers["location"]
                    == Self.redirectURI
                    + "?error=access_denied&error_description=The%20user%20denied%20the%20request&state=xyz"
            )

            let apple = try await http.authorize(
                provider,
                .apple,
                ["login_hint": "deny", "state": "xyz", "response_mode": "form_post"]
            )
            #expect(
                DevOAuthProvider.formFields(inPage: apple.body) == [
                    "error": "user_cancelled_authorize", "state": "xyz",
                ]
            )
        }
    }

    @Test func facebookTokenAndGraphMeCheckTheAppSecretProof() async throws {
        try await withProvider { provider, http in
            let authorize = try await http.get(
                provider.facebookAuthorizeURL + "?"
                    + FormURLEncoding.encode([
                        (name: "response_type", value: "code"), (name: "client_id", value: "dev-facebook-app"),
                        (name: "redirect_uri", value: Self.redirectURI), (name: "state", value: "fb"),
                        (name: "login_hint", value: "fay@example.com"),
                    ])
            )
            let code = try #require(authorize.redirect?.parameters["code"])
            // Facebook's /oauth/access_token takes its parameters in a GET query.
            let tokenAnswer = try await http.get(
                provider.facebookTokenURL + "?"
                    + FormURLEncoding.encode([
                        (name: "client_id", value: "dev-facebook-app"),
                        (name: "client_secret", value: "dev-facebook-secret"),
                        (name: "redirect_uri", value: Self.redirectURI), (name: "code", value: code),
                        (name: "grant_type", value: "authorization_code"),
                    ])
            )
            #expect(tokenAnswer.status == 200)
            let tokens = try JSONDecoder().decode(Tokens.self, from: Data(tokenAnswer.body.utf8))
            #expect(tokens.id_token == nil)
            let proof = Hex.lowercase(
                HMACSHA256.authenticationCode(
                    for: Array(tokens.access_token.utf8),
                    key: Array("dev-facebook-secret".utf8)
                )
            )

            func me(_ proof: String, fields: String?) async throws -> HTTPAnswer {
                var query = [
                    (name: "access_token", value: tokens.access_token), (name: "appsecret_proof", value: proof),
                ]
                if let fields { query.append((name: "fields", value: fields)) }
                return try await http.get(provider.facebookGraphURL + "/me?" + FormURLEncoding.encode(query))
            }
            let right = try await me(proof, fields: "id,name,email")
            #expect(right.status == 200)
            let person = try JSONDecoder().decode([String: String].self, from: Data(right.body.utf8))
            #expect(
                person == [
                    "id": "dev-" + String(Hex.lowercase(SHA256.hash("fay@example.com")).prefix(16)),
                    "name": "Dev User", "email": "fay@example.com",
                ]
            )
            let defaults = try JSONDecoder().decode(
                [String: String].self,
                from: Data(try await me(proof, fields: nil).body.utf8)
            )
            #expect(Set(defaults.keys) == ["id", "name"])

            let wrong = try await me(String(repeating: "0", count: 64), fields: "id")
            #expect(wrong.status == 400)
            let error = try JSONDecoder().decode(GraphError.self, from: Data(wrong.body.utf8))
            #expect(error.error.code == 190)
            #expect(error.error.type == "OAuthException")
            #expect(error.error.message == "Invalid OAuth access token.")
        }
    }

    @Test func aTakenPortIsAnErrorNotAHang() async throws {
        try await withProvider { provider, _ in
            await #expect(throws: (any Error).self) {
                try await DevOAuthProvider.with(port: provider.port, configuration: .init()) { _ in }
            }
        }
    }

    @Test func setTokenDelayMakesTheTokenEndpointAnswerLate() async throws {
        try await withProvider { provider, http in
            let code = try #require(try await http.authorize(provider, .google, [:]).redirect?.parameters["code"])
            let delay = Duration.milliseconds(300)
            provider.setTokenDelay(delay)
            let clock = ContinuousClock()
            let start = clock.now
            let tokens = try await http.exchangeAtGoogle(provider, code: code)
            #expect(clock.now - start >= delay)
            #expect(tokens.id_token != nil)
            provider.setTokenDelay(nil)
        }
    }
}

// MARK: Fixture

/// Runs `body` with a provider and an HTTP client that does not follow redirects.
private func withProvider(
    _ configuration: DevOAuthProvider.Configuration = .init(),
    _ body: (DevOAuthProvider, TestHTTP) async throws -> Void
) async throws {
    var clientConfiguration = HTTPClient.Configuration()
    clientConfiguration.redirectConfiguration = .disallow
    let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
    let result: Result<Void, any Error>
    do {
        result = .success(
            try await DevOAuthProvider.with(configuration: configuration) { provider in
                try await body(provider, TestHTTP(client: client))
            }
        )
    } catch {
        result = .failure(error)
    }
    try await client.shutdown()
    try result.get()
}

struct HTTPAnswer {
    var status: Int
    /// Lower-cased names.
    var headers: [String: String]
    var body: String

    /// The Location's URL without its query, and the query's parameters.
    var redirect: (target: String, parameters: [String: String])? {
        guard let location = headers["location"] else { return nil }
        guard let question = location.firstIndex(of: "?") else { return (location, [:]) }
        return (
            String(location[..<question]),
            FormURLEncoding.decode(form: location[location.index(after: question)...])
        )
    }

    func oauthError() throws -> OAuthErrorBody {
        try JSONDecoder().decode(OAuthErrorBody.self, from: Data(body.utf8))
    }
}

struct TestHTTP {
    var client: HTTPClient

    func send(_ request: HTTPClientRequest) async throws -> HTTPAnswer {
        let response = try await client.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 20)
        var headers: [String: String] = [:]
        for (name, value) in response.headers { headers[name.lowercased()] = value }
        return HTTPAnswer(
            status: Int(response.status.code),
            headers: headers,
            body: String(decoding: body.readableBytesView, as: UTF8.self)
        )
    }

    func get(_ url: String) async throws -> HTTPAnswer {
        try await send(HTTPClientRequest(url: url))
    }

    func postForm(_ url: String, _ form: [String: String]) async throws -> HTTPAnswer {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        let pairs = form.sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) }
        request.body = .bytes(Array(FormURLEncoding.encode(pairs).utf8))
        return try await send(request)
    }

    /// GET /<provider>/authorize with a valid request, `overrides` replacing or adding parameters.
    func authorize(
        _ provider: DevOAuthProvider,
        _ which: DevOAuthProvider.Provider,
        _ overrides: [String: String]
    ) async throws -> HTTPAnswer {
        let clientID = DevOAuthProvider.Configuration().clientID(for: which)
        var query = [
            "response_type": "code", "client_id": clientID,
            "redirect_uri": DevOAuthProviderTests.redirectURI, "scope": "openid email",
        ]
        query.merge(overrides) { $1 }
        let pairs = query.sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) }
        return try await get(provider.baseURL + "/" + which.rawValue + "/authorize?" + FormURLEncoding.encode(pairs))
    }

    /// Redeems `code` at Google's token endpoint with the right client and no verifier.
    func exchangeAtGoogle(_ provider: DevOAuthProvider, code: String) async throws -> Tokens {
        let answer = try await postForm(
            provider.baseURL + "/google/token",
            [
                "grant_type": "authorization_code", "code": code,
                "redirect_uri": DevOAuthProviderTests.redirectURI, "client_id": "dev-google-client",
                "client_secret": "dev-google-secret",
            ]
        )
        try #require(answer.status == 200, "token endpoint answered \(answer.status): \(answer.body)")
        return try JSONDecoder().decode(Tokens.self, from: Data(answer.body.utf8))
    }

    /// The claims of `idToken`, after checking its signature with the key of the served JWK Set
    /// that its `kid` names.
    func verifiedClaims<Claims: Decodable>(_ idToken: String, jwksURL: String) async throws -> Claims {
        let jwks = try JSONDecoder().decode(JWKSet.self, from: Data(try await get(jwksURL).body.utf8))
        let parts = try JWS.parse(idToken)
        let kid = try #require(parts.header.kid)
        let jwk = try #require(jwks.keys(withID: kid).first)
        let payload = try JWS.verify(parts, expectedAlgorithm: .es256, key: try ES256PublicKey(jwk: jwk))
        return try JSONDecoder().decode(Claims.self, from: Data(payload))
    }
}

// MARK: Wire shapes

struct Discovery: Decodable {
    var issuer: String
    var authorization_endpoint: String
    var token_endpoint: String
    var jwks_uri: String
    var response_types_supported: [String]
    var subject_types_supported: [String]
    var id_token_signing_alg_values_supported: [String]
    var code_challenge_methods_supported: [String]?
}

struct Tokens: Decodable {
    var access_token: String
    var token_type: String
    var expires_in: Int
    var id_token: String?
}

struct OAuthErrorBody: Decodable {
    var error: String
    var error_description: String?
}

struct GoogleClaims: Decodable {
    var iss: String
    var aud: String
    var sub: String
    var email: String
    var email_verified: Bool
    var iat: Int64
    var exp: Int64
    var jti: String
    var nonce: String?
    var name: String?
}

struct AppleClaims: Decodable {
    var iss: String
    var aud: String
    var sub: String
    var email: String
    var email_verified: String
    var iat: Int64
    var exp: Int64
    var nonce: String?
    var name: String?
}

struct AppleUser: Decodable {
    struct Name: Decodable {
        var firstName: String
        var lastName: String
    }
    var name: Name
    var email: String
}

struct GraphError: Decodable {
    struct Body: Decodable {
        var message: String
        var type: String
        var code: Int
    }
    var error: Body
}

/// The claims of an Apple client secret, as the backend writes them.
struct AppleSecretClaims: Encodable {
    var iss: String
    var iat: Int64
    var exp: Int64
    var aud: String
    var sub: String

    static func sign(_ claims: AppleSecretClaims, key: ES256PrivateKey, kid: String) throws -> String {
        try JWS.signES256(payload: Array(try JSONEncoder().encode(claims)), key: key, kid: kid)
    }
}
