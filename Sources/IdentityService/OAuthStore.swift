import AuthCrypto
import AuthPostgres

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A browser sign-in waiting for the provider's callback (`oauth_flows`).
struct OAuthFlow: Sendable, Equatable {
    var provider: IdentityProvider
    var redirectTo: String
    var appState: String
    var codeChallenge: String
    var nonce: String
    var providerCodeVerifier: String
    var linkUserID: UUID?
}

/// What the app's one-time code stands for (`oauth_codes`).
struct OAuthGrant: Sendable, Equatable {
    var userID: UUID
    /// nil: an emailed link that was followed (IssueSignInCode; stored as `email_link`).
    var provider: IdentityProvider?
    var codeChallenge: String
    var created: Bool
}

/// The browser sign-in's two single-use tables. Secrets are stored as SHA-256 only; each is
/// deleted by its first use, and expired rows are deleted by every insert.
struct OAuthStore: Sendable {
    let pool: PostgresPool
    let schema: PostgresSchema

    init(pool: PostgresPool, schema: String) {
        self.pool = pool
        self.schema = PostgresSchema(schema)
    }

    func begin(_ flow: OAuthFlow, state: String, expiresAt: Date, now: Date) async throws {
        try await pool.query(
            """
            WITH expired AS (
                DELETE FROM \(schema).oauth_flows WHERE expires_at < \(now)
            )
            INSERT INTO \(schema).oauth_flows
                (state_hash, provider, redirect_to, app_state, code_challenge, nonce, provider_code_verifier,
                 link_user_id, expires_at)
            VALUES (\(SHA256.hash(state)), \(flow.provider.rawValue)::text, \(flow.redirectTo)::text,
                \(flow.appState)::text, \(flow.codeChallenge)::text, \(flow.nonce)::text,
                \(flow.providerCodeVerifier)::text, \(flow.linkUserID)::uuid, \(expiresAt))
            """
        )
    }

    /// The flow of `state`, deleted: nil when unknown, used or expired.
    func finish(state: String, now: Date) async throws -> OAuthFlow? {
        let rows = try await pool.query(
            """
            DELETE FROM \(schema).oauth_flows WHERE state_hash = \(SHA256.hash(state))
            RETURNING provider, redirect_to, app_state, code_challenge, nonce, provider_code_verifier,
                link_user_id, expires_at
            """
        )
        guard let row = rows.first, try row[7].date > now,
            let provider = IdentityProvider(rawValue: try row[0].string)
        else { return nil }
        return OAuthFlow(
            provider: provider,
            redirectTo: try row[1].string,
            appState: try row[2].string,
            codeChallenge: try row[3].string,
            nonce: try row[4].string,
            providerCodeVerifier: try row[5].string,
            linkUserID: try row[6].decode(UUID?.self)
        )
    }

    func grant(_ grant: OAuthGrant, code: String, expiresAt: Date, now: Date) async throws {
        try await pool.query(
            """
            WITH expired AS (
                DELETE FROM \(schema).oauth_codes WHERE expires_at < \(now)
            )
            INSERT INTO \(schema).oauth_codes (code_hash, user_id, provider, code_challenge, created, expires_at)
            VALUES (\(SHA256.hash(code)), \(grant.userID), \(grant.provider?.rawValue ?? "email_link")::text,
                \(grant.codeChallenge)::text, \(grant.created), \(expiresAt))
            """
        )
    }

    /// The grant of `code`, deleted: nil when unknown, used or expired.
    func redeem(code: String, now: Date) async throws -> OAuthGrant? {
        let rows = try await pool.query(
            """
            DELETE FROM \(schema).oauth_codes WHERE code_hash = \(SHA256.hash(code))
            RETURNING user_id, provider, code_challenge, created, expires_at
            """
        )
        guard let row = rows.first, try row[4].date > now else { return nil }
        let provider = try row[1].string
        guard provider == "email_link" || IdentityProvider(rawValue: provider) != nil else { return nil }
        return OAuthGrant(
            userID: try row[0].uuid,
            provider: IdentityProvider(rawValue: provider),
            codeChallenge: try row[2].string,
            created: try row[3].bool
        )
    }
}
