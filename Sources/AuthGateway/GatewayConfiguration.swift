import AuthConfiguration
import AuthText

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The gateway's own settings, beside the ones every process reads (``ProcessConfiguration``).
/// docs/gateway.md#configuration lists the variables.
public struct GatewayConfiguration: Sendable {
    /// Requests per client IP per minute to each unauthenticated `/v1` and `/api` route
    /// (`AUTH_GATEWAY_RATE_LIMIT_PER_MINUTE`, default 60): a flood guard of this replica (each
    /// replica counts its own). The security budgets are counted in PostgreSQL by the service
    /// that decides (the account checks by identity, `AUTH_IDENTITY_ACCOUNT_CHECKS_PER_HOUR`).
    public var requestsPerMinutePerRoute: Int = 60
    /// Peers whose `X-Forwarded-For` is believed (`AUTH_GATEWAY_TRUSTED_PROXIES`, default none).
    public var trustedProxies: [IPAddressRange] = []
    /// How long each call to a service may take before the request answers 503
    /// (`AUTH_GATEWAY_RPC_TIMEOUT_MS`, default 5000).
    public var rpcTimeout: Duration = .seconds(5)
    /// `Cache-Control: max-age` of `/.well-known/jwks.json`, and how long the gateway itself uses
    /// a fetched JWK Set before fetching it again (`AUTH_GATEWAY_JWKS_MAX_AGE_SECONDS`, default 300).
    public var jwksMaxAge: Duration = .seconds(300)
    /// The shortest time between two fetches of the JWK Set caused by tokens with an unknown
    /// `kid` (10 s), so forged `kid`s cannot make the gateway hammer session.
    public var jwksRefetchInterval: Duration = .seconds(10)
    /// `iss` and `aud` access tokens must have: session's `AUTH_SESSION_ISSUER` and
    /// `AUTH_SESSION_AUDIENCE` (defaults `auth.session`, `auth.api`).
    public var tokenIssuer: String = "auth.session"
    public var tokenAudience: String = "auth.api"
    /// The most rate-limit buckets kept in memory (per limit); beyond it the idle ones are dropped.
    public var maxTrackedClients: Int = 100_000
    /// From a connection's accept to its first request's complete headers, and from a later
    /// request's first byte to its complete headers (`AUTH_GATEWAY_HEADER_TIMEOUT_SECONDS`, 10).
    public var headerTimeout: Duration = .seconds(10)
    /// The longest silence of a keep-alive connection between requests, and between the bytes
    /// of a body (`AUTH_GATEWAY_IDLE_TIMEOUT_SECONDS`, 60).
    public var idleTimeout: Duration = .seconds(60)
    /// Open HTTP connections at most; past it a new one is closed at once
    /// (`AUTH_GATEWAY_MAX_CONNECTIONS`, 10,000).
    public var maxConnections: Int = 10_000
    /// The admin port: `GET /metrics` (`AUTH_GATEWAY_ADMIN_PORT`, 9100; 0: any free port,
    /// logged at start), bound to `AUTH_BIND_HOST` like the API.
    public var adminPort: Int = 9100
    /// `DELETE /v1/me` needs a session signed in at most this long ago
    /// (`AUTH_GATEWAY_REAUTH_SECONDS`, 300); otherwise 401 `reauthentication_required`.
    public var reauthenticationWindow: Duration = .seconds(300)
    /// One `info` line per request (`AUTH_GATEWAY_ACCESS_LOG`, default true).
    public var accessLog = true
    /// The gateway's public base URL as clients and providers reach it (`AUTH_PUBLIC_URL`, e.g.
    /// `https://auth.example.com`, no trailing slash): what Twilio signs its status callbacks
    /// against. Unset: `POST /v1/hooks/twilio/status` refuses every callback (403).
    public var publicURL: String?
    /// The anon keys the Supabase door accepts in `apikey` (`AUTH_SUPABASE_ANON_KEYS`,
    /// comma-separated opaque strings or Supabase-style JWTs); empty: any.
    public var supabaseAnonKeys: Set<String> = []
    /// `AUTH_OAUTH_REDIRECT_URLS` (identity reads it too): where a followed sign-up
    /// confirmation link may send the browser back (docs/supabase.md).
    public var redirectAllowList = RedirectAllowList()

    public init() {}

    /// Reads the variables from `environment`; a malformed value names its variable.
    public init(environment variables: [String: String] = ProcessInfo.processInfo.environment) throws {
        let reader = EnvironmentReader(variables: variables)
        self.requestsPerMinutePerRoute = try reader.integer(
            "AUTH_GATEWAY_RATE_LIMIT_PER_MINUTE",
            default: 60,
            in: 1...1_000_000_000
        )
        if reader.string("AUTH_GATEWAY_ACCOUNT_CHECKS_PER_HOUR") != nil {
            // Counted per replica it gave N replicas N budgets; identity counts it now.
            throw ConfigurationError(
                variable: "AUTH_GATEWAY_ACCOUNT_CHECKS_PER_HOUR",
                problem:
                    "is no longer read: the account-check budget is counted by identity for every replica; set AUTH_IDENTITY_ACCOUNT_CHECKS_PER_HOUR on identity instead"
            )
        }
        self.rpcTimeout = .milliseconds(
            try reader.integer("AUTH_GATEWAY_RPC_TIMEOUT_MS", default: 5000, in: 10...120_000, unit: " of milliseconds")
        )
        self.jwksMaxAge = .seconds(
            try reader.integer("AUTH_GATEWAY_JWKS_MAX_AGE_SECONDS", default: 300, in: 1...86_400, unit: " of seconds")
        )
        self.headerTimeout = .seconds(
            try reader.integer("AUTH_GATEWAY_HEADER_TIMEOUT_SECONDS", default: 10, in: 1...3_600, unit: " of seconds")
        )
        self.idleTimeout = .seconds(
            try reader.integer("AUTH_GATEWAY_IDLE_TIMEOUT_SECONDS", default: 60, in: 1...86_400, unit: " of seconds")
        )
        self.maxConnections = try reader.integer("AUTH_GATEWAY_MAX_CONNECTIONS", default: 10_000, in: 1...1_000_000)
        self.adminPort = try reader.integer(
            "AUTH_GATEWAY_ADMIN_PORT",
            default: 9100,
            in: 0...65_535,
            note: " (0: any free port, logged at start)"
        )
        self.reauthenticationWindow = .seconds(
            try reader.integer("AUTH_GATEWAY_REAUTH_SECONDS", default: 300, in: 1...86_400, unit: " of seconds")
        )
        self.publicURL = try reader.publicURL()
        self.redirectAllowList = try RedirectAllowList(reader: reader)
        self.supabaseAnonKeys = try reader.value(
            "AUTH_SUPABASE_ANON_KEYS",
            default: [],
            expected: "a comma-separated list of keys of 1-4096 printable ASCII characters without spaces"
        ) { text in
            let keys = text.split(separator: ",").map { String($0.trimmingWhitespace()) }
            guard
                keys.allSatisfy({ key in
                    (1...4096).contains(key.utf8.count) && key.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
                })
            else { return nil }
            return Set(keys)
        }
        self.accessLog = try reader.value("AUTH_GATEWAY_ACCESS_LOG", default: true, expected: "`true` or `false`") {
            ["true": true, "false": false][$0]
        }
        self.trustedProxies = try reader.value(
            "AUTH_GATEWAY_TRUSTED_PROXIES",
            default: [],
            expected: "a comma-separated list of IP addresses or CIDR ranges, e.g. 10.0.0.0/8,fd00::/8"
        ) { text in
            var ranges: [IPAddressRange] = []
            for item in text.split(separator: ",") {
                guard let range = IPAddressRange(item.trimmingWhitespace()) else { return nil }
                ranges.append(range)
            }
            return ranges
        }
        let printable = "1-256 printable ASCII characters without spaces"
        func token(_ name: String, _ fallback: String) throws -> String {
            try reader.value(name, default: fallback, expected: printable) { value in
                value.utf8.count <= 256 && value.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F } ? value : nil
            }
        }
        self.tokenIssuer = try token("AUTH_SESSION_ISSUER", "auth.session")
        self.tokenAudience = try token("AUTH_SESSION_AUDIENCE", "auth.api")
    }
}
