import AuthConfiguration
import AuthCrypto
import AuthText

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A provider whose ID tokens identity accepts.
public enum IdentityProvider: String, Sendable, CaseIterable, Hashable {
    case apple, google, facebook

    /// The `AUTH_OIDC_<PROVIDER>_` prefix of its settings.
    var variablePrefix: String { "AUTH_OIDC_\(rawValue.uppercased())_" }

    /// The `amr`/audit method of a sign-in with it.
    public var method: String { "oidc_\(rawValue)" }

    /// The provider's real issuer values.
    public var defaultIssuers: [String] {
        switch self {
        case .apple: ["https://appleid.apple.com"]
        // Google's ID tokens carry either form.
        case .google: ["https://accounts.google.com", "accounts.google.com"]
        case .facebook: ["https://www.facebook.com"]
        }
    }

    /// The provider's real JWKS address.
    public var defaultJWKSURL: String {
        switch self {
        case .apple: "https://appleid.apple.com/auth/keys"
        case .google: "https://www.googleapis.com/oauth2/v3/certs"
        case .facebook: "https://limited.facebook.com/.well-known/oauth/openid/jwks/"
        }
    }

    /// Whether sign-in with this provider requires a nonce.
    public var requiresNonce: Bool { self != .facebook }
}

/// One enabled provider: the audiences (client ids) its tokens must name, the issuers they may
/// carry and where its public keys are.
public struct OIDCProviderConfiguration: Sendable, Hashable {
    public var provider: IdentityProvider
    public var clientIDs: [String]
    public var issuers: [String]
    public var jwksURL: URL

    public init(provider: IdentityProvider, clientIDs: [String], issuers: [String]? = nil, jwksURL: URL? = nil) {
        self.provider = provider
        self.clientIDs = clientIDs
        self.issuers = issuers ?? provider.defaultIssuers
        self.jwksURL = jwksURL ?? URL(string: provider.defaultJWKSURL)!
    }

    /// HTTPS, or plain HTTP to a loopback address (tests, local development).
    static func isAcceptableProviderURL(_ url: URL) -> Bool {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased(), !host.isEmpty else {
            return false
        }
        if scheme == "https" { return true }
        guard scheme == "http" else { return false }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? host.dropFirst().dropLast() : Substring(host)
        return bare == "localhost" || bare == "::1"
            || bare.hasPrefix("127.")
                && bare.split(separator: ".").count == 4 && bare.split(separator: ".").allSatisfy { UInt8($0) != nil }
    }
}

/// Which password rule applies to new passwords (``PasswordPolicy``).
public enum PasswordPolicyMode: String, Sendable, CaseIterable {
    /// The customer's rule (seed 002 §2.3): at least 8 characters with an upper-case letter, a
    /// lower-case letter and a digit; not a common password.
    case composition
    /// NIST SP 800-63B-4 §3.1.1.2 for a password that is the only factor: at least 15
    /// characters, not a common password, no composition rule. The production default.
    case nist

    /// The fewest characters a new password may have.
    public var minimumLength: Int {
        switch self {
        case .composition: 8
        case .nist: 15
        }
    }
}

/// Everything the identity service needs besides its database. docs/identity.md lists the
/// environment variables.
public struct IdentityServiceConfiguration: Sendable {
    /// The schema holding the service's tables (`identity`; tests use their own).
    public var schema: String = "identity"
    /// The rule new passwords must meet.
    public var passwordPolicyMode: PasswordPolicyMode = .composition
    /// scrypt parameters of new hashes: OWASP's (N = 2^17, r = 8, p = 1; 128 MiB, about 0.4 s).
    public var scryptParameters: ScryptPasswordHasher.Parameters = .init(logN: 17, r: 8, p: 1)
    /// How many hashes run at once (each holds 128·r·N bytes). Default: the processor count.
    public var hashConcurrency: Int = max(1, ProcessInfo.processInfo.activeProcessorCount)
    /// Failed password attempts (sign-ins, ChangePassword's old password) for one email within
    /// ``signInFailureWindow`` before `too_many_attempts`. Default 10.
    public var maxSignInFailures: Int = 10
    /// Default 15 minutes.
    public var signInFailureWindow: Duration = .seconds(15 * 60)
    /// Failed password attempts for one email since its last success, with no window, after
    /// which its password answers `factor_locked` until a password reset or an operator's
    /// unlock (NIST SP 800-63B's consecutive-failure limit). Default 100.
    public var maxConsecutiveFailures: Int = 100
    /// Answers that tell whether an account exists (ContactExists and SignUp with
    /// `account_check`) per client IP (an IPv6 /64) per hour, over every replica. 30.
    public var accountChecksPerHour: Int = 30
    /// Clock difference tolerated on ID tokens' `exp` and `iat`. 60 s.
    public var idTokenClockSkew: Duration = .seconds(60)
    /// A JWKS is refetched at most this often for an unknown `kid`. 1 minute.
    public var jwksRefetchInterval: Duration = .seconds(60)
    /// A fetched JWKS is used this long before it is fetched again. 1 hour.
    public var jwksCacheLifetime: Duration = .seconds(3_600)
    /// The enabled providers.
    public var providers: [IdentityProvider: OIDCProviderConfiguration] = [:]
    /// Browser sign-in: the providers whose redirect flow is configured.
    public var oauth = OAuthConfiguration()

    /// A configuration with the defaults documented on each property and no provider enabled.
    public init() {}

    /// Reads the configuration from `AUTH_IDENTITY_*` and `AUTH_OIDC_*` environment variables.
    ///
    /// - Throws: ``ConfigurationError`` naming the variable.
    public init(environment variables: [String: String]) throws {
        self.init()
        let reader = EnvironmentReader(variables: variables)
        func list(_ name: String) throws -> [String]? {
            guard let text = reader.string(name) else { return nil }
            let items = text.split(separator: ",").map { $0.trimmingWhitespace() }
            guard !items.isEmpty,
                items.allSatisfy({ item in
                    !item.isEmpty && item.utf8.count <= 256
                        && item.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7F }
                })
            else {
                throw ConfigurationError(
                    variable: name,
                    problem: "must be a comma-separated list of 1-256 printable ASCII characters without spaces each"
                )
            }
            return items
        }

        // Issue 19, item 9: production follows SP 800-63B-4 unless told otherwise.
        if try reader.environment() == .production { passwordPolicyMode = .nist }
        if let mode = reader.string("AUTH_IDENTITY_PASSWORD_POLICY") {
            guard let parsed = PasswordPolicyMode(rawValue: mode) else {
                throw ConfigurationError(
                    variable: "AUTH_IDENTITY_PASSWORD_POLICY",
                    problem: "must be composition or nist"
                )
            }
            passwordPolicyMode = parsed
        }
        let parameters = ScryptPasswordHasher.Parameters(
            logN: try reader.integer("AUTH_IDENTITY_SCRYPT_LOG_N", default: scryptParameters.logN, in: 10...20),
            r: try reader.integer("AUTH_IDENTITY_SCRYPT_R", default: scryptParameters.r, in: 1...32),
            p: try reader.integer("AUTH_IDENTITY_SCRYPT_P", default: scryptParameters.p, in: 1...16)
        )
        do {
            try ScryptPasswordHasher.Limits.default.check(parameters)
        } catch {
            throw ConfigurationError(
                variable: "AUTH_IDENTITY_SCRYPT_LOG_N",
                problem:
                    "with AUTH_IDENTITY_SCRYPT_R and _P needs at most 256 MiB (128 * r * 2^log_n) and 1 GiB times p"
            )
        }
        scryptParameters = parameters
        hashConcurrency = try reader.integer("AUTH_IDENTITY_HASH_CONCURRENCY", default: hashConcurrency, in: 1...256)
        maxSignInFailures = try reader.integer(
            "AUTH_IDENTITY_SIGNIN_MAX_FAILURES",
            default: maxSignInFailures,
            in: 1...1000
        )
        signInFailureWindow = .seconds(
            try reader.integer(
                "AUTH_IDENTITY_SIGNIN_WINDOW_SECONDS",
                default: 900,
                in: 60...86_400,
                unit: " of seconds"
            )
        )
        maxConsecutiveFailures = try reader.integer(
            "AUTH_IDENTITY_MAX_CONSECUTIVE_FAILURES",
            default: maxConsecutiveFailures,
            in: 1...100_000
        )
        accountChecksPerHour = try reader.integer(
            "AUTH_IDENTITY_ACCOUNT_CHECKS_PER_HOUR",
            default: accountChecksPerHour,
            in: 1...1_000_000_000
        )

        var overrides: [IdentityProvider: OAuthConfiguration.Overrides] = [:]
        for provider in IdentityProvider.allCases {
            let prefix = provider.variablePrefix
            let issuers = try list(prefix + "ISSUER")
            var jwksURL: URL?
            if let text = reader.string(prefix + "JWKS_URL") {
                guard let url = URL(string: text), OIDCProviderConfiguration.isAcceptableProviderURL(url) else {
                    throw ConfigurationError(
                        variable: prefix + "JWKS_URL",
                        problem: "must be an https:// URL (http:// only to a loopback address)"
                    )
                }
                jwksURL = url
            }
            overrides[provider] = .init(issuers: issuers, jwksURL: jwksURL)
            let redirectFlow = reader.string("AUTH_OAUTH_\(provider.rawValue.uppercased())_CLIENT_ID") != nil
            guard let clientIDs = try list(prefix + "CLIENT_IDS") else {
                for suffix in ["ISSUER", "JWKS_URL"] where reader.string(prefix + suffix) != nil && !redirectFlow {
                    throw ConfigurationError(
                        variable: prefix + suffix,
                        problem:
                            "is set but neither \(prefix)CLIENT_IDS nor AUTH_OAUTH_\(provider.rawValue.uppercased())_CLIENT_ID is; set one to enable \(provider.rawValue) or unset this"
                    )
                }
                continue
            }
            providers[provider] = OIDCProviderConfiguration(
                provider: provider,
                clientIDs: clientIDs,
                issuers: issuers,
                jwksURL: jwksURL
            )
        }
        oauth = try OAuthConfiguration(reader: reader, overrides: overrides)
        // The redirect flow's client id is an audience of the provider's ID tokens too, when
        // ID-token sign-in is enabled for it (issue 21); it does not enable it.
        for (provider, client) in oauth.clients where providers[provider]?.clientIDs.contains(client.clientID) == false
        {
            providers[provider]?.clientIDs.append(client.clientID)
        }
    }
}
