import AuthAccessToken
import AuthPostgres
import AuthProtobuf

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A session as ListSessions shows it.
struct SessionRecord: Sendable, Equatable {
    var id: UUID
    var amr: [String]
    var device: Auth_Session_V1_Device
    /// Where the session was last used from (start or last refresh).
    var clientIP: String
    var createdAt: Date
    var lastRefreshedAt: Date?
    var expiresAt: Date
}

/// A session to create, with its first refresh token (generation 0).
struct NewSession: Sendable {
    var id: UUID
    var userID: String
    var amr: [String]
    var device: Auth_Session_V1_Device
    var clientIP: String
    var createdAt: Date
    var expiresAt: Date
    var refreshTokenHash: [UInt8]
    var refreshTokenExpiresAt: Date
    /// The Supabase format's email and phone (nil: our format).
    var supabase: (email: String, phone: String)?
}

/// The compare-and-set that moves a session from `fromGeneration` to the next.
struct RotationWrite: Sendable {
    var sessionID: UUID
    var fromGeneration: Int64
    var successorHash: [UInt8]
    var successorSealed: [UInt8]
    var successorExpiresAt: Date
    var now: Date
    var clientIP: String
    /// A non-empty platform or name replaces the session's; empty leaves it.
    var devicePlatform = ""
    var deviceName = ""
}

/// The session service's SQL. Every statement names its tables with the configured schema
/// (the pool's `search_path` does not matter) and is one round trip: writes that belong
/// together are one statement with data-modifying CTEs, which PostgreSQL runs atomically.
/// Statements are prepared once per connection by AuthPostgres.
struct SessionStore: Sendable {
    let pool: PostgresPool
    private let schema: PostgresSchema

    init(pool: PostgresPool, schema: String) {
        self.pool = pool
        self.schema = PostgresSchema(schema)
    }

    func insert(_ session: NewSession) async throws {
        try await pool.query(
            """
            WITH created AS (
                INSERT INTO \(schema).sessions (id, user_id, amr, device_platform, device_name, device_user_agent,
                    client_ip, last_client_ip, created_at, expires_at, refresh_expires_at, token_format, claims_email,
                    claims_phone)
                VALUES (\(session.id), \(session.userID), string_to_array(\(session.amr.joined(separator: " "))::text, ' '),
                    \(session.device.platform), \(session.device.name), \(session.device.userAgent), \(session.clientIP)::text,
                    \(session.clientIP)::text, \(session.createdAt), \(session.expiresAt), \(session.refreshTokenExpiresAt),
                    \(session.supabase == nil ? "standard" : "supabase"), \(session.supabase?.email ?? ""),
                    \(session.supabase?.phone ?? ""))
                RETURNING id
            )
            INSERT INTO \(schema).refresh_tokens (token_hash, session_id, generation, issued_at, expires_at)
            SELECT \(session.refreshTokenHash), id, 0, \(session.createdAt), \(session.refreshTokenExpiresAt) FROM created
            """
        )
    }

    /// Runs `body` with one pooled connection, on the pool's thread: the refresh hot path does
    /// its read, its decision, its signing and its write there, with one lease and one thread
    /// hop instead of one per statement.
    func withConnection<R: Sendable>(_ body: @Sendable (Queries) throws -> R) async throws -> R {
        let schema = self.schema
        return try await pool.withConnection { try body(Queries(connection: $0, schema: schema)) }
    }

    /// The statements of the refresh path on one connection (each its own implicit
    /// transaction: the compare-and-set needs no explicit one).
    struct Queries {
        let connection: PostgresConnection
        fileprivate let schema: PostgresSchema

        /// The presented token and its session, in one snapshot; nil for an unknown token.
        func refreshState(tokenHash: [UInt8]) throws -> RefreshTokenState? {
            // The successor's row (next generation) says whether and when the token was used,
            // and holds the pair sealed for it.
            let rows = try connection.execute(
                """
                SELECT t.session_id, t.generation, t.expires_at, n.issued_at, n.sealed_for_predecessor,
                    s.user_id, array_to_string(s.amr, ' '), s.generation, s.expires_at, s.revoked_at,
                    s.token_format, s.claims_email, s.claims_phone, s.created_at
                FROM \(schema).refresh_tokens t
                JOIN \(schema).sessions s ON s.id = t.session_id
                LEFT JOIN \(schema).refresh_tokens n ON n.session_id = t.session_id AND n.generation = t.generation + 1
                WHERE t.token_hash = \(tokenHash)
                """
            )
            guard let row = rows.first else { return nil }
            return RefreshTokenState(
                sessionID: try row[0].uuid,
                userID: try row[5].string,
                amr: try row[6].string.split(separator: " ").map(String.init),
                tokenGeneration: try row[1].int64,
                tokenExpiresAt: try row[2].date,
                usedAt: try row[3].decode(Date?.self),
                successorSealed: try row[4].decode([UInt8]?.self),
                sessionGeneration: try row[7].int64,
                sessionExpiresAt: try row[8].date,
                revokedAt: try row[9].decode(Date?.self),
                supabase: try row[10].string == "supabase"
                    ? SupabaseClaims(
                        email: try row[11].string,
                        phone: try row[12].string,
                        authenticatedAt: try row[13].date.unixSeconds
                    )
                    : nil
            )
        }

        /// Moves the session to the next generation and stores the successor (with the pair
        /// sealed for the presented token), in one statement, only if the session is still at
        /// `fromGeneration` and not revoked. Returns whether it did.
        func rotate(_ write: RotationWrite) throws -> Bool {
            // The UPDATE of the session is the compare-and-set: under READ COMMITTED a
            // concurrent rotation makes it re-check `generation = fromGeneration` on the new row
            // version, which fails, so no successor is inserted either. The successor's row is
            // what marks the presented token used.
            let rows = try connection.execute(
                """
                WITH advanced AS (
                    UPDATE \(schema).sessions
                    SET generation = generation + 1, last_refreshed_at = \(write.now),
                        refresh_expires_at = \(write.successorExpiresAt),
                        last_client_ip = CASE WHEN \(write.clientIP)::text = '' THEN last_client_ip
                            ELSE \(write.clientIP)::text END,
                        device_platform = CASE WHEN \(write.devicePlatform)::text = '' THEN device_platform
                            ELSE \(write.devicePlatform)::text END,
                        device_name = CASE WHEN \(write.deviceName)::text = '' THEN device_name
                            ELSE \(write.deviceName)::text END
                    WHERE id = \(write.sessionID) AND generation = \(write.fromGeneration) AND revoked_at IS NULL
                    RETURNING id, generation
                )
                INSERT INTO \(schema).refresh_tokens
                    (token_hash, session_id, generation, issued_at, expires_at, sealed_for_predecessor)
                SELECT \(write.successorHash), advanced.id, advanced.generation, \(write.now), \(write.successorExpiresAt),
                    \(write.successorSealed)
                FROM advanced
                """
            )
            return rows.affectedRows == 1
        }

        /// Inserts a security event.
        func record(_ event: SecurityEvent) throws {
            try event.insert(schema: schema, connection: connection)
        }

        /// Revokes a session whose used refresh token came back, and records a security event
        /// (once: only if this call revoked it).
        func revokeForReuse(sessionID: UUID, now: Date, clientIP: String, details: String) throws {
            try connection.execute(
                """
                WITH revoked AS (
                    UPDATE \(schema).sessions SET revoked_at = \(now), revoke_reason = 'refresh_token_reused'
                    WHERE id = \(sessionID) AND revoked_at IS NULL
                    RETURNING id, user_id
                )
                INSERT INTO \(schema).security_events (session_id, user_id, kind, occurred_at, client_ip, details)
                SELECT id, user_id, 'refresh_token_reused', \(now), \(clientIP)::text, \(details)::jsonb FROM revoked
                """
            )
        }
    }

    func refreshState(tokenHash: [UInt8]) async throws -> RefreshTokenState? {
        try await withConnection { try $0.refreshState(tokenHash: tokenHash) }
    }

    func rotate(_ write: RotationWrite) async throws -> Bool {
        try await withConnection { try $0.rotate(write) }
    }

    /// What ``revoke(sessionID:userID:reason:now:)`` found.
    struct Revocation: Sendable, Equatable {
        var sessionID: UUID
        var userID: String
        /// False when it was already revoked.
        var revoked: Bool
    }

    /// Revokes one session; nil when there is no such session (or it is not `userID`'s, when
    /// given).
    func revoke(sessionID: UUID, userID: String?, reason: String, now: Date) async throws -> Revocation? {
        try await revoke(
            target: "SELECT id, user_id FROM \(schema).sessions WHERE id = \(sessionID)",
            userID,
            reason,
            now
        )
    }

    /// Revokes the session `tokenHash`'s refresh token was issued in (whichever generation);
    /// nil when no session has that token (or it is not `userID`'s, when given).
    func revoke(tokenHash: [UInt8], userID: String?, reason: String, now: Date) async throws -> Revocation? {
        let target: PostgresStatement = """
            SELECT s.id, s.user_id FROM \(schema).refresh_tokens t JOIN \(schema).sessions s ON s.id = t.session_id
            WHERE t.token_hash = \(tokenHash)
            """
        return try await revoke(target: target, userID, reason, now)
    }

    /// One statement: the session `target` selects (`id, user_id`), revoked unless it was.
    private func revoke(
        target: PostgresStatement,
        _ userID: String?,
        _ reason: String,
        _ now: Date
    ) async throws -> Revocation? {
        let owner = userID ?? ""
        let rows = try await pool.query(
            """
            WITH target AS (
                SELECT found.id, found.user_id FROM (\(target)) found (id, user_id)
                WHERE \(owner)::text = '' OR found.user_id = \(owner)::text
            ), revoked AS (
                UPDATE \(schema).sessions s SET revoked_at = \(now), revoke_reason = \(reason)::text
                FROM target WHERE s.id = target.id AND s.revoked_at IS NULL
                RETURNING s.id
            )
            SELECT target.id, target.user_id, (SELECT count(*) FROM revoked) FROM target
            """
        )
        guard let row = rows.first else { return nil }
        return Revocation(sessionID: try row[0].uuid, userID: try row[1].string, revoked: try row[2].int > 0)
    }

    /// Revokes every live session of `userID` except `except`; returns how many.
    func revokeAll(userID: String, except: UUID?, reason: String, now: Date) async throws -> Int {
        let rows = try await pool.query(
            """
            UPDATE \(schema).sessions SET revoked_at = \(now), revoke_reason = \(reason)::text
            WHERE user_id = \(userID) AND revoked_at IS NULL AND refresh_expires_at > \(now)
                AND (\(except)::uuid IS NULL OR id <> \(except)::uuid)
            """
        )
        return rows.affectedRows ?? 0
    }

    /// An account's deletion: clears the IP addresses, device names and user agents of every
    /// session of `userID` (live or not) and the IP addresses of its security events. The rows
    /// stay (ids, times, reasons) until the dead-session clean-up deletes them.
    func forgetPersonalData(userID: String) async throws {
        try await pool.query(
            """
            WITH scrubbed AS (
                UPDATE \(schema).sessions SET client_ip = '', last_client_ip = '', device_name = '', device_user_agent = ''
                WHERE user_id = \(userID)
            )
            UPDATE \(schema).security_events SET client_ip = '', details = details - 'user_agent' - 'ip'
            WHERE user_id = \(userID)
            """
        )
    }

    /// The live sessions of `userID`, most recently used first.
    func liveSessions(userID: String, now: Date, limit: Int) async throws -> [SessionRecord] {
        let rows = try await pool.query(
            """
            SELECT id, array_to_string(amr, ' '), device_platform, device_name, device_user_agent,
                last_client_ip, created_at, last_refreshed_at, expires_at
            FROM \(schema).sessions
            WHERE user_id = \(userID) AND revoked_at IS NULL AND refresh_expires_at > \(now)
            ORDER BY coalesce(last_refreshed_at, created_at) DESC, id
            LIMIT \(limit)
            """
        )
        return try rows.map { row in
            SessionRecord(
                id: try row[0].uuid,
                amr: try row[1].string.split(separator: " ").map(String.init),
                device: Auth_Session_V1_Device(
                    platform: try row[2].string,
                    name: try row[3].string,
                    userAgent: try row[4].string
                ),
                clientIP: try row[5].string,
                createdAt: try row[6].date,
                lastRefreshedAt: try row[7].decode(Date?.self),
                expiresAt: try row[8].date
            )
        }
    }

    /// When `sessionID` is `userID`'s and live (not revoked, its refresh token not expired): its
    /// creation and absolute expiry; nil otherwise.
    func liveSession(sessionID: UUID, userID: String, now: Date) async throws -> (createdAt: Date, expiresAt: Date)? {
        let rows = try await pool.query(
            """
            SELECT created_at, expires_at FROM \(schema).sessions
            WHERE id = \(sessionID) AND user_id = \(userID) AND revoked_at IS NULL AND refresh_expires_at > \(now)
            """
        )
        guard let row = rows.first else { return nil }
        return (try row[0].date, try row[1].date)
    }

    static let cleanupLockPrefix = "auth.session.dead_sessions."

    /// The name hashed into the clean-up's advisory lock key for `schema`: one lock per schema.
    static func cleanupLockName(schema: String) -> String {
        cleanupLockPrefix + PostgresSchema(schema).quotedName
    }

    /// Inserts a security event.
    func record(_ event: SecurityEvent) async throws {
        try await pool.query(event.insertStatement(schema: schema))
    }

    /// Deletes (with their refresh tokens) up to `batch` sessions revoked, or past their
    /// absolute expiry, before `cutoff`, in a transaction that first takes the clean-up's
    /// transaction-scoped advisory lock without waiting. Returns nil, deleting nothing, when
    /// another replica holds it (its clean-up is running).
    func deleteDeadSessions(before cutoff: Date, batch: Int) async throws -> Int? {
        let schema = self.schema
        let lockName = Self.cleanupLockName(schema: schema.name)
        return try await pool.transaction { connection -> Int? in
            let locked = try connection.execute("SELECT pg_try_advisory_xact_lock(hashtextextended(\(lockName), 0))")
            guard try locked.first?[0].bool == true else { return nil }
            let deleted = try connection.execute(
                """
                DELETE FROM \(schema).sessions WHERE id IN (
                    SELECT id FROM \(schema).sessions
                    WHERE expires_at < \(cutoff) OR revoked_at < \(cutoff)
                    LIMIT \(batch)
                )
                """
            )
            return deleted.affectedRows ?? 0
        }
    }
}
