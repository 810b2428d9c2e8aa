import AuthAPI
import AuthConfiguration
import AuthText
import AuthTime

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Everything the session service needs besides its database: keys, token lifetimes and windows.
/// docs/session.md lists the environment variables.
public struct SessionServiceConfiguration: Sendable {
    /// Wraps the signing keys and derives the successor-vault keys.
    public var masterKey: MasterKey
    /// The master key being rotated away from (`AUTH_MASTER_KEY_PREVIOUS`): while it is set,
    /// signing keys and successor boxes that ``masterKey`` cannot open are opened with it, and
    /// RewrapSigningKeys moves the stored keys to ``masterKey``. Nothing is sealed with it.
    public var previousMasterKey: MasterKey?
    /// The schema holding the service's tables (`session`; tests use their own).
    public var schema: String = "session"
    /// The access tokens' `iss`.
    public var issuer: String = "auth.session"
    /// The access tokens' `aud`: the API that accepts them.
    public var audience: String = "auth.api"
    /// Lifetime of an access token (`exp - iat`). Default 15 minutes.
    public var accessTokenLifetime: Duration = .seconds(15 * 60)
    /// Lifetime of a refresh token from its issue, never past the session's expiry. Default 7 days.
    public var refreshTokenLifetime: Duration = .seconds(7 * 86_400)
    /// Absolute lifetime of a session from its start. Default 30 days.
    public var sessionLifetime: Duration = .seconds(30 * 86_400)
    /// How long after a refresh token was used presenting it again returns the same successor
    /// pair instead of counting as reuse. Default 10 s.
    public var refreshGraceWindow: Duration = .seconds(10)
    /// How long a new signing key is published in the JWKS before it signs. Default 10 minutes.
    public var signingKeyPublishDelay: Duration = .seconds(10 * 60)
    /// How long a replica keeps the signing keys read from the database before reading again.
    /// Default 5 s.
    public var signingKeyCacheLifetime: Duration = .seconds(5)
    /// Clock difference tolerated between replicas and their verifiers: allowed on `exp`/`iat`,
    /// and added to the time an old key stays published. Default 30 s.
    public var clockSkewTolerance: Duration = .seconds(30)
    /// The most sessions ListSessions returns (the most recently used first). Default 100.
    public var maxListedSessions: Int = 100
    /// The only caller (service credential name) allowed to call RotateSigningKey and
    /// RewrapSigningKeys.
    public var keyRotationCaller: String = CallerName.authctl
    /// How often each replica tries to delete dead sessions (one replica at a time; see
    /// ``SessionMaintenance``). Default 1 hour.
    public var deadSessionSweepInterval: Duration = .seconds(3_600)
    /// How long a revoked or expired session is kept before it is deleted. Default 7 days.
    public var deadSessionRetention: Duration = .seconds(7 * 86_400)

    /// A configuration with the defaults documented on each property.
    public init(masterKey: MasterKey) {
        self.masterKey = masterKey
    }

    /// Reads the configuration from `AUTH_*` environment variables (docs/session.md).
    ///
    /// `AUTH_MASTER_KEY` is required either way: without the same key every replica and every
    /// restart would lose its signing keys; in production (`AUTH_ENVIRONMENT`) the message says so.
    /// - Throws: ``ConfigurationError`` naming the variable.
    public init(environment variables: [String: String]) throws {
        let reader = EnvironmentReader(variables: variables)
        let production = try reader.environment() == .production

        guard let keyText = reader.string("AUTH_MASTER_KEY") else {
            let problem =
                production
                ? "is required in production: base64 of 32 random bytes (`openssl rand -base64 32`), the same for "
                    + "every replica, kept secret; refusing to start without it"
                : "is required: base64 of 32 random bytes (`openssl rand -base64 32`); "
                    + "scripts/run-local.sh keeps one in .data/master-key"
            throw ConfigurationError(variable: "AUTH_MASTER_KEY", problem: problem)
        }
        guard let masterKey = MasterKey(base64: keyText) else {
            throw ConfigurationError(variable: "AUTH_MASTER_KEY", problem: "must be base64 of exactly 32 bytes")
        }
        self.init(masterKey: masterKey)
        if let previousText = reader.string("AUTH_MASTER_KEY_PREVIOUS") {
            guard let previous = MasterKey(base64: previousText) else {
                throw ConfigurationError(
                    variable: "AUTH_MASTER_KEY_PREVIOUS",
                    problem: "must be base64 of exactly 32 bytes (the master key being replaced), or unset"
                )
            }
            self.previousMasterKey = previous
        }
        if let issuer = reader.string("AUTH_SESSION_ISSUER") {
            guard issuer.utf8.count <= 256, issuer.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F })
            else {
                throw ConfigurationError(
                    variable: "AUTH_SESSION_ISSUER",
                    problem: "must be 1-256 printable ASCII characters without spaces"
                )
            }
            self.issuer = issuer
        }
        if let audience = reader.string("AUTH_SESSION_AUDIENCE") {
            guard audience.utf8.count <= 256, audience.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F })
            else {
                throw ConfigurationError(
                    variable: "AUTH_SESSION_AUDIENCE",
                    problem: "must be 1-256 printable ASCII characters without spaces"
                )
            }
            self.audience = audience
        }
        self.accessTokenLifetime = try reader.seconds(
            "AUTH_SESSION_ACCESS_TOKEN_SECONDS",
            default: accessTokenLifetime,
            in: 60...86_400
        )
        self.refreshTokenLifetime = try reader.seconds(
            "AUTH_SESSION_REFRESH_TOKEN_SECONDS",
            default: refreshTokenLifetime,
            in: 300...(365 * 86_400)
        )
        self.sessionLifetime = try reader.seconds(
            "AUTH_SESSION_LIFETIME_SECONDS",
            default: sessionLifetime,
            in: 300...(365 * 86_400)
        )
        self.refreshGraceWindow = try reader.seconds(
            "AUTH_SESSION_REFRESH_GRACE_SECONDS",
            default: refreshGraceWindow,
            in: 0...300
        )
        self.signingKeyPublishDelay = try reader.seconds(
            "AUTH_SESSION_KEY_PUBLISH_DELAY_SECONDS",
            default: signingKeyPublishDelay,
            in: 0...(7 * 86_400)
        )
        self.deadSessionSweepInterval = try reader.seconds(
            "AUTH_SESSION_CLEANUP_INTERVAL_SECONDS",
            default: deadSessionSweepInterval,
            in: 60...(7 * 86_400)
        )
        self.deadSessionRetention = try reader.seconds(
            "AUTH_SESSION_CLEANUP_RETENTION_SECONDS",
            default: deadSessionRetention,
            in: 0...(365 * 86_400)
        )
        guard accessTokenLifetime < refreshTokenLifetime else {
            throw ConfigurationError(
                variable: "AUTH_SESSION_ACCESS_TOKEN_SECONDS",
                problem:
                    "must be shorter than the refresh-token lifetime (AUTH_SESSION_REFRESH_TOKEN_SECONDS, "
                    + "\(Int(refreshTokenLifetime.timeInterval)) s)"
            )
        }
    }
}
