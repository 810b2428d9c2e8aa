import AuthConfiguration
import AuthCrypto
import AuthText

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How identity authenticates itself to a provider's token endpoint.
public enum OAuthClientSecret: Sendable {
    /// Google and Facebook: a fixed secret.
    case fixed(String)
    /// Apple: an ES256 JWT the service signs with the team's key (``AppleClientSecret``).
    case apple(teamID: String, keyID: String, privateKey: ES256PrivateKey)
}

/// Where a provider's redirect flow goes: OIDC discovery (Google, Apple) or explicit URLs
/// (Facebook, which has no discovery for its web flow).
public enum OAuthEndpoints: Sendable {
    case discovery(URL)
    case facebook(authorize: URL, token: URL, graph: URL)
}

/// One provider's redirect flow (`AUTH_OAUTH_<PROVIDER>_*`).
public struct OAuthClientConfiguration: Sendable {
    public var provider: IdentityProvider
    public var clientID: String
    public var secret: OAuthClientSecret
    public var endpoints: OAuthEndpoints
    /// `AUTH_OIDC_<PROVIDER>_ISSUER` / `_JWKS_URL` when set: they win over discovery's.
    public var issuers: [String]?
    public var jwksURL: URL?

    public init(
        provider: IdentityProvider,
        clientID: String,
        secret: OAuthClientSecret,
        endpoints: OAuthEndpoints,
        issuers: [String]? = nil,
        jwksURL: URL? = nil
    ) {
        self.provider = provider
        self.clientID = clientID
        self.secret = secret
        self.endpoints = endpoints
        self.issuers = issuers
        self.jwksURL = jwksURL
    }
}

/// Browser sign-in (docs/identity.md, "Browser sign-in").
public struct OAuthConfiguration: Sendable {
    /// `AUTH_PUBLIC_URL`: the callback sent to providers is this + `/v1/oauth/{provider}/callback`.
    public var publicURL: String?
    /// `AUTH_OAUTH_REDIRECT_URLS`: where apps may be sent back (exact, but for the query).
    public var redirectURLs: [String] = []
    /// `AUTH_OAUTH_PROVIDER_TIMEOUT_MS`: each call to a provider (discovery, token, Graph). 10 s.
    public var providerTimeout: Duration = .seconds(10)
    /// How long a started flow waits for its callback. 10 minutes.
    public var stateLifetime: Duration = .seconds(600)
    /// How long the app's one-time code lasts. 5 minutes.
    public var codeLifetime: Duration = .seconds(300)
    public var clients: [IdentityProvider: OAuthClientConfiguration] = [:]

    public init() {}

    /// The callback URL of `provider`, or nil without `AUTH_PUBLIC_URL`.
    func callbackURL(_ provider: IdentityProvider) -> String? {
        publicURL.map { "\($0)/v1/oauth/\(provider.rawValue)/callback" }
    }

    /// Whether `redirectTo` is on the allow-list (``RedirectAllowList/allows(_:)``).
    func allows(redirectTo: String) -> Bool {
        RedirectAllowList(urls: redirectURLs).allows(redirectTo)
    }

    static let facebookDefaults = (
        authorize: "https://www.facebook.com/v19.0/dialog/oauth",
        token: "https://graph.facebook.com/v19.0/oauth/access_token",
        graph: "https://graph.facebook.com/v19.0"
    )

    static func defaultDiscoveryURL(_ provider: IdentityProvider) -> String? {
        switch provider {
        case .google: "https://accounts.google.com/.well-known/openid-configuration"
        case .apple: "https://appleid.apple.com/.well-known/openid-configuration"
        case .facebook: nil
        }
    }

    /// `AUTH_OIDC_<PROVIDER>_ISSUER` and `_JWKS_URL` as set (nil: from discovery).
    struct Overrides: Sendable {
        var issuers: [String]?
        var jwksURL: URL?
    }

    /// Reads `AUTH_PUBLIC_URL`, `AUTH_OAUTH_*` and `AUTH_OIDC_<PROVIDER>_DISCOVERY_URL`.
    init(reader: EnvironmentReader, overrides: [IdentityProvider: Overrides]) throws {
        self.init()
        publicURL = try reader.publicURL()
        providerTimeout = try reader.milliseconds(
            "AUTH_OAUTH_PROVIDER_TIMEOUT_MS",
            default: providerTimeout,
            in: 100...60_000
        )
        redirectURLs = try RedirectAllowList(reader: reader).urls
        for provider in IdentityProvider.allCases {
            let prefix = "AUTH_OAUTH_\(provider.rawValue.uppercased())_"
            let set = reader.variables.keys.filter { $0.hasPrefix(prefix) && reader.string($0) != nil }
            guard let clientID = reader.string(prefix + "CLIENT_ID") else {
                if let other = set.sorted().first {
                    throw ConfigurationError(
                        variable: other,
                        problem:
                            "is set but \(prefix)CLIENT_ID is not; set it to enable \(provider.rawValue)'s redirect flow"
                    )
                }
                continue
            }
            guard publicURL != nil else {
                throw ConfigurationError(
                    variable: "AUTH_PUBLIC_URL",
                    problem: "is required with \(prefix)CLIENT_ID: the provider's callback is built from it"
                )
            }
            guard !redirectURLs.isEmpty else {
                throw ConfigurationError(
                    variable: "AUTH_OAUTH_REDIRECT_URLS",
                    problem: "is required with \(prefix)CLIENT_ID: apps can only be sent back to listed URLs"
                )
            }
            let secret: OAuthClientSecret
            if provider == .apple {
                func required(_ suffix: String) throws -> String {
                    guard let value = try reader.secret(prefix + suffix) else {
                        throw ConfigurationError(
                            variable: prefix + suffix,
                            problem: "is required with \(prefix)CLIENT_ID"
                        )
                    }
                    return value
                }
                let teamID = try required("TEAM_ID")
                let keyID = try required("KEY_ID")
                let pem = try required("PRIVATE_KEY")
                let key: ES256PrivateKey
                do {
                    key = try ES256PrivateKey(pemRepresentation: pem)
                } catch {
                    throw ConfigurationError(
                        variable: prefix + "PRIVATE_KEY",
                        problem: "must be the PEM text (or the path of the .p8 file) of a P-256 key: \(error)"
                    )
                }
                secret = .apple(teamID: teamID, keyID: keyID, privateKey: key)
            } else {
                guard let value = try reader.secret(prefix + "CLIENT_SECRET") else {
                    throw ConfigurationError(
                        variable: prefix + "CLIENT_SECRET",
                        problem: "is required with \(prefix)CLIENT_ID"
                    )
                }
                secret = .fixed(value)
            }
            func endpoint(_ name: String, default fallback: String) throws -> URL {
                let text = reader.string(name) ?? fallback
                guard let url = URL(string: text), OIDCProviderConfiguration.isAcceptableProviderURL(url),
                    url.query == nil
                else {
                    throw ConfigurationError(
                        variable: name,
                        problem: "must be an https:// URL without a query (http:// only to a loopback address)"
                    )
                }
                return url
            }
            let endpoints: OAuthEndpoints
            if let discovery = Self.defaultDiscoveryURL(provider) {
                endpoints = .discovery(
                    try endpoint("AUTH_OIDC_\(provider.rawValue.uppercased())_DISCOVERY_URL", default: discovery)
                )
            } else {
                endpoints = .facebook(
                    authorize: try endpoint(prefix + "AUTHORIZE_URL", default: Self.facebookDefaults.authorize),
                    token: try endpoint(prefix + "TOKEN_URL", default: Self.facebookDefaults.token),
                    graph: try endpoint(prefix + "GRAPH_URL", default: Self.facebookDefaults.graph)
                )
            }
            clients[provider] = OAuthClientConfiguration(
                provider: provider,
                clientID: clientID,
                secret: secret,
                endpoints: endpoints,
                issuers: overrides[provider]?.issuers,
                jwksURL: overrides[provider]?.jwksURL
            )
        }
    }
}
