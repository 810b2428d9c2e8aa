import AsyncHTTPClient
import AuthConcurrency
import AuthCrypto
import AuthServiceCore
import AuthText
import AuthTime
import NIOCore
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Why a call to a provider in the redirect flow did not give what was asked; turned into the
/// `error` of the redirect back to the app.
enum OAuthProviderFailure: Error, Equatable {
    /// No answer within the deadline, or no connection: `temporarily_unavailable`.
    case unavailable(String)
    /// An answer that is not what the protocol says: `server_error`.
    case refused(String)
}

/// What discovery says about a provider (OIDC Discovery 1.0 §3), or Facebook's fixed URLs.
struct OAuthProviderEndpoints: Sendable {
    var authorization: URL
    var token: URL
    /// Google and Apple; nil for Facebook, whose web flow reads the user from the Graph API.
    var issuer: String?
    var jwks: URL?
    var graph: URL?
}

/// The tokens a provider's token endpoint answered.
struct OAuthProviderTokens: Sendable {
    var accessToken: String?
    var idToken: String?
}

/// One provider's redirect flow as identity calls it: discovery (cached for an hour), the
/// authorization URL, the token exchange (with the client secret; Apple's signed for each call),
/// and for Facebook the Graph API's `/me` with `appsecret_proof`. Every call has the deadline
/// `AUTH_OAUTH_PROVIDER_TIMEOUT_MS`; no redirect is followed; bodies are read up to 1 MiB.
final class OAuthProviderClient: Sendable {
    let configuration: OAuthClientConfiguration
    let callbackURL: String
    private let http: HTTPClient
    private let timeout: Duration
    private let clock: any WallClock
    private let jwksFetcher: any JWKSFetching
    private let jwksRefetchInterval: Duration
    private let jwksLifetime: Duration
    private let clockSkew: TimeInterval
    private let discovered = Mutex<(endpoints: OAuthProviderEndpoints, verifier: IDTokenVerifier?, at: Date)?>(nil)
    private let discoveries = SingleFlight<(OAuthProviderEndpoints, IDTokenVerifier?)>()
    static let discoveryLifetime: TimeInterval = 3_600

    init(
        configuration: OAuthClientConfiguration,
        callbackURL: String,
        http: HTTPClient,
        timeout: Duration,
        clock: any WallClock,
        jwksFetcher: any JWKSFetching,
        jwksRefetchInterval: Duration,
        jwksLifetime: Duration,
        clockSkew: TimeInterval
    ) {
        self.configuration = configuration
        self.callbackURL = callbackURL
        self.http = http
        self.timeout = timeout
        self.clock = clock
        self.jwksFetcher = jwksFetcher
        self.jwksRefetchInterval = jwksRefetchInterval
        self.jwksLifetime = jwksLifetime
        self.clockSkew = clockSkew
    }

    var provider: IdentityProvider { configuration.provider }

    /// Whether PKCE is sent toward the provider: Google and Facebook support it; Apple does
    /// not document it.
    var sendsPKCE: Bool { provider != .apple }

    // MARK: Discovery

    /// The provider's endpoints and the verifier of its ID tokens (discovered once an hour).
    func endpoints() async throws(OAuthProviderFailure) -> (OAuthProviderEndpoints, IDTokenVerifier?) {
        switch configuration.endpoints {
        case .facebook(let authorize, let token, let graph):
            return (OAuthProviderEndpoints(authorization: authorize, token: token, graph: graph), nil)
        case .discovery(let url):
            let now = clock.now()
            func fresh() -> (OAuthProviderEndpoints, IDTokenVerifier?)? {
                discovered.withLock { held in
                    guard let held, abs(now.timeIntervalSince(held.at)) < Self.discoveryLifetime else { return nil }
                    return (held.endpoints, held.verifier)
                }
            }
            if let held = fresh() { return held }
            do {
                return try await discoveries.run(reusing: fresh) { [self] in
                    let found = try await discover(url)
                    discovered.withLock { $0 = (found.0, found.1, now) }
                    return found
                }
            } catch let failure as OAuthProviderFailure {
                throw failure
            } catch {
                throw .unavailable("discovery: \(error)")
            }
        }
    }

    private func discover(_ url: URL) async throws(OAuthProviderFailure) -> (OAuthProviderEndpoints, IDTokenVerifier?) {
        let (status, body) = try await send(HTTPClientRequest(url: url.absoluteString), what: "discovery")
        guard status == 200, case .object(let document)? = try? JSONValue.parse(body),
            let authorization = document["authorization_endpoint"]?.stringValue.flatMap(Self.acceptableURL),
            let token = document["token_endpoint"]?.stringValue.flatMap(Self.acceptableURL),
            let issuer = document["issuer"]?.stringValue,
            let jwks = document["jwks_uri"]?.stringValue.flatMap(Self.acceptableURL)
        else { throw .refused("discovery answered HTTP \(status) without the endpoints") }
        let endpoints = OAuthProviderEndpoints(
            authorization: authorization,
            token: token,
            issuer: issuer,
            jwks: configuration.jwksURL ?? jwks
        )
        let verifier = IDTokenVerifier(
            configuration: OIDCProviderConfiguration(
                provider: provider,
                clientIDs: [configuration.clientID],
                issuers: configuration.issuers ?? [issuer],
                jwksURL: configuration.jwksURL ?? jwks
            ),
            keys: JWKSCache(
                url: configuration.jwksURL ?? jwks,
                fetcher: jwksFetcher,
                clock: clock,
                refetchInterval: jwksRefetchInterval,
                lifetime: jwksLifetime
            ),
            clockSkew: clockSkew
        )
        return (endpoints, verifier)
    }

    private static func acceptableURL(_ text: String) -> URL? {
        guard let url = URL(string: text), OIDCProviderConfiguration.isAcceptableProviderURL(url) else { return nil }
        return url
    }

    // MARK: The flow

    /// Where the browser goes to consent.
    func authorizationURL(
        endpoint: URL,
        state: String,
        nonce: String,
        codeChallenge: String?
    ) -> String {
        var query: [(String, String)] = [
            ("response_type", "code"),
            ("client_id", configuration.clientID),
            ("redirect_uri", callbackURL),
            ("state", state),
        ]
        switch provider {
        case .google:
            query += [("scope", "openid email profile"), ("nonce", nonce)]
        case .apple:
            // Asking for the name and email requires form_post (Apple sends them to the callback
            // once, on the first consent).
            query += [("scope", "name email"), ("response_mode", "form_post"), ("nonce", nonce)]
        case .facebook:
            query += [("scope", "email public_profile")]
        }
        if let codeChallenge { query += [("code_challenge", codeChallenge), ("code_challenge_method", "S256")] }
        return FormURLEncoding.appending(query.map { (name: $0.0, value: $0.1) }, to: endpoint.absoluteString)
    }

    /// Exchanges the provider's code at its token endpoint.
    func exchange(
        code: String,
        codeVerifier: String,
        endpoint: URL
    ) async throws(OAuthProviderFailure)
        -> OAuthProviderTokens
    {
        var fields: [(String, String)] = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", callbackURL),
            ("client_id", configuration.clientID),
            ("client_secret", try clientSecret()),
        ]
        if !codeVerifier.isEmpty { fields.append(("code_verifier", codeVerifier)) }
        var request = HTTPClientRequest(url: endpoint.absoluteString)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "Accept", value: "application/json")
        request.body = .bytes(ByteBuffer(string: FormURLEncoding.encode(fields)))
        let (status, body) = try await send(request, what: "token")
        guard status == 200, case .object(let answer)? = try? JSONValue.parse(body) else {
            throw .refused("the token endpoint answered HTTP \(status)")
        }
        return OAuthProviderTokens(
            accessToken: answer["access_token"]?.stringValue,
            idToken: answer["id_token"]?.stringValue
        )
    }

    /// Facebook's web flow: the person from the Graph API's `/me`, proved by `appsecret_proof`.
    /// Facebook says nothing of whether the email was verified: it is taken as unverified, as
    /// for its ID tokens (docs/identity.md).
    func facebookUser(accessToken: String, graph: URL) async throws(OAuthProviderFailure) -> ProviderIdentity {
        guard case .fixed(let secret) = configuration.secret else { throw .refused("Facebook needs a client secret") }
        let proof = Hex.lowercase(HMACSHA256.authenticationCode(for: Array(accessToken.utf8), key: Array(secret.utf8)))
        let query = FormURLEncoding.encode([
            ("fields", "id,name,email"), ("access_token", accessToken), ("appsecret_proof", proof),
        ])
        let (status, body) = try await send(
            HTTPClientRequest(url: graph.absoluteString + "/me?" + query),
            what: "graph"
        )
        guard status == 200, case .object(let me)? = try? JSONValue.parse(body),
            let id = me["id"]?.stringValue, !id.isEmpty, id.utf8.count <= 255
        else { throw .refused("the Graph API answered HTTP \(status) without an id") }
        let name = me["name"]?.stringValue.flatMap { ContactRules.isValidDisplayName($0) ? $0 : nil }
        return ProviderIdentity(
            provider: .facebook,
            subject: id,
            email: me["email"]?.stringValue.flatMap { EmailAddress($0)?.normalized },
            emailVerified: false,
            name: name,
            pictureURL: nil
        )
    }

    /// Google and Facebook: the configured secret. Apple: an ES256 JWT signed now with the
    /// team's key, valid 5 minutes (Apple allows up to 6 months; a short one leaks less).
    func clientSecret() throws(OAuthProviderFailure) -> String {
        switch configuration.secret {
        case .fixed(let secret):
            return secret
        case .apple(let teamID, let keyID, let privateKey):
            struct Claims: Encodable {
                var aud = "https://appleid.apple.com"
                var exp: Int
                var iat: Int
                var iss: String
                var sub: String
            }
            let now = Int(clock.now().timeIntervalSince1970)
            do {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
                let claims = try encoder.encode(
                    Claims(exp: now + 300, iat: now, iss: teamID, sub: configuration.clientID)
                )
                return try JWS.signES256(payload: Array(claims), key: privateKey, kid: keyID)
            } catch {
                throw .refused("cannot sign Apple's client secret: \(error)")
            }
        }
    }

    private func send(_ request: HTTPClientRequest, what: String) async throws(OAuthProviderFailure) -> (Int, [UInt8]) {
        do {
            return try await ProviderCallSpan.run(
                provider: configuration.provider.rawValue,
                method: request.method.rawValue,
                host: URL(string: request.url)?.host
            ) {
                let response = try await http.execute(request, timeout: .init(timeout))
                let body = try await response.body.collect(upTo: 1 << 20)
                let status = Int(response.status.code)
                return ((status, Array(body.readableBytesView)), status)
            }
        } catch {
            throw .unavailable("\(what): \(error)")
        }
    }
}
