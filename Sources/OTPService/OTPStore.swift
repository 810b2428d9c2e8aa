import AuthCrypto
import AuthPostgres
import AuthText

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A verification row as Check and Resend read it (locked with `FOR UPDATE`).
struct VerificationRow: Sendable {
    var id: UUID
    var destination: Destination
    var purpose: Purpose
    var locale: String
    var codeMAC: [UInt8]
    var createdAt: Date
    var expiresAt: Date
    var lastSentAt: Date
    var resends: Int
    var status: String
    var testDestination: Bool
    /// Started as a decoy: counted like any other, never sent.
    var decoy: Bool
    /// What the caller bound it to (StartRequest.subject), "" when nothing.
    var subject: String
    /// StartRequest.link_base, "" when its messages carry no link.
    var linkBase: String = ""
}

/// A message claimed by a dispatcher worker.
struct ClaimedMessage: Sendable {
    var id: UUID
    var verificationID: UUID
    var channel: Channel
    var destination: String
    var callingCode: String
    var code: String
    var purpose: String
    var locale: String
    var createdAt: Date
    var providerIndex: Int
    var attempts: Int
    /// The base of the message's link (``LinkToken``), "" for none.
    var linkBase: String = ""
}

/// A verification as GetDeliveryStatus shows it.
struct VerificationStatus: Sendable {
    var destination: String
    /// A test destination's: no message is ever written.
    var test: Bool
    /// A decoy's (never sent, docs/otp.md#decoys).
    var decoy: Bool
    /// `pending`, `verified` or `failed`.
    var status: String
    var createdAt: Date
    var lastSentAt: Date
    var expiresAt: Date
    var resends: Int
    /// The destination's resends within the resend window, and the one whose leaving the
    /// window frees a resend when the budget is spent (the `maxResends`-th most recent).
    var recentResends: Int
    var limitingResend: Date?
    /// Its latest message (nil for a test destination or a decoy).
    var record: DeliveryRecord?
}

/// The latest message of a verification, for GetDeliveryStatus.
struct DeliveryRecord: Sendable {
    var state: String
    var provider: String
    var attempts: Int
    var updatedAt: Date
    var lastError: String
    var messages: Int
}

/// The otp-dispatch service's SQL. Every statement names its tables with the configured schema.
/// The limits run inside transactions that take transaction-scoped advisory locks on what they
/// count (a destination, a client IP), so concurrent calls on different replicas are
/// serialized where they must be and nowhere else.
struct OTPStore: Sendable {
    let pool: PostgresPool
    let schema: String
    let t: Tables
    /// The channel the outbox announces new messages on (one per schema).
    let notifyChannel: String

    /// The service's tables, each named with the schema.
    struct Tables: Sendable {
        let verifications: PostgresStatement
        let limitEvents: PostgresStatement
        let locks: PostgresStatement
        let messages: PostgresStatement
        let pumpingCounts: PostgresStatement
        let consecutiveFailures: PostgresStatement
    }

    init(pool: PostgresPool, schema: String) {
        self.pool = pool
        self.schema = schema
        let q = PostgresSchema(schema)
        self.t = Tables(
            verifications: "\(q).verifications",
            limitEvents: "\(q).limit_events",
            locks: "\(q).destination_locks",
            messages: "\(q).messages",
            pumpingCounts: "\(q).pumping_counts",
            consecutiveFailures: "\(q).consecutive_failures"
        )
        // Channel names must be identifiers: the schema's letters, digits and underscores.
        let safe = String(
            schema.unicodeScalars.filter {
                $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_")
            }.map(Character.init)
        )
        self.notifyChannel = String("otp_outbox_\(safe)".prefix(63))
    }

    // MARK: Locks and limit events (inside a transaction)

    /// Serializes the transactions that count or change what belongs to `key` (released at
    /// commit or rollback). The lock travels with the transaction's next statement, in its
    /// round trip, which still takes its snapshot after the lock is held.
    func lock(_ connection: PostgresConnection, _ key: String) throws {
        try connection.executeWithNext("SELECT pg_advisory_xact_lock(hashtextextended(\(lockName(key)), 0))")
    }

    /// The times of `kind` events for `key` after `since`, oldest first.
    func events(_ connection: PostgresConnection, _ kind: String, _ key: String, since: Date) throws -> [Date] {
        let rows = try connection.execute(
            """
            SELECT occurred_at FROM \(t.limitEvents) WHERE kind = \(kind) AND key = \(key) AND occurred_at > \(since)
            ORDER BY occurred_at
            """
        )
        return try rows.map { try $0[0].date }
    }

    func record(_ connection: PostgresConnection, _ kind: String, _ key: String, at: Date) throws {
        try connection.execute(
            "INSERT INTO \(t.limitEvents) (kind, key, occurred_at) VALUES (\(kind), \(key), \(at))"
        )
    }

    /// A destination's locks at a moment.
    struct DestinationLocks: Sendable {
        /// Until when the destination is locked by its window's wrong codes, if it is.
        var lockedUntil: Date?
        /// Wrong codes since its last right one (the consecutive-failure limit's count).
        var consecutiveFailures: Int
    }

    /// `destination`'s locks at `now`, in one statement.
    func locks(_ connection: PostgresConnection, destination: String, now: Date) throws -> DestinationLocks {
        let rows = try connection.execute(
            """
            SELECT (SELECT locked_until FROM \(t.locks) WHERE destination = \(destination) AND locked_until > \(now)),
                coalesce((SELECT failures FROM \(t.consecutiveFailures) WHERE destination = \(destination)), 0)
            """
        )
        return DestinationLocks(lockedUntil: try rows[0][0].decode(Date?.self), consecutiveFailures: try rows[0][1].int)
    }

    /// One more wrong code since the destination's last right one.
    func countConsecutiveFailure(_ connection: PostgresConnection, destination: String, at now: Date) throws {
        try connection.execute(
            """
            INSERT INTO \(t.consecutiveFailures) AS c (destination, failures, last_failed_at)
            VALUES (\(destination), 1, \(now))
            ON CONFLICT (destination) DO UPDATE SET failures = c.failures + 1, last_failed_at = EXCLUDED.last_failed_at
            """
        )
    }

    /// An account's deletion: deletes what is kept under its contact (verifications and, by
    /// cascade, their messages; limit events; lock; consecutive count). Returns the verifications
    /// deleted.
    func forget(destination: String) async throws -> Int {
        let rows = try await pool.query(
            """
            WITH events AS (
                    DELETE FROM \(t.limitEvents)
                    WHERE kind IN ('start_destination', 'resend', 'wrong_code') AND key = \(destination)
                ),
                locked AS (DELETE FROM \(t.locks) WHERE destination = \(destination)),
                consecutive AS (DELETE FROM \(t.consecutiveFailures) WHERE destination = \(destination))
            DELETE FROM \(t.verifications) WHERE destination = \(destination)
            """
        )
        return rows.affectedRows ?? 0
    }

    /// `authctl otp unlock`: forgets the destination's wrong codes, its lock and its consecutive
    /// count; whether the consecutive-failure limit (`maxConsecutive`) had locked it.
    func unlock(destination: String, maxConsecutive: Int) async throws -> Bool {
        try await pool.transaction { connection in
            let rows = try connection.execute(
                "SELECT failures FROM \(t.consecutiveFailures) WHERE destination = \(destination) FOR UPDATE"
            )
            let wasLocked = try rows.first.map { try $0[0].int >= maxConsecutive } ?? false
            try connection.execute(
                """
                WITH consecutive AS (DELETE FROM \(t.consecutiveFailures) WHERE destination = \(destination)),
                    wrong AS (DELETE FROM \(t.limitEvents) WHERE kind = 'wrong_code' AND key = \(destination))
                DELETE FROM \(t.locks) WHERE destination = \(destination)
                """
            )
            return wasLocked
        }
    }

    func lockDestination(_ connection: PostgresConnection, destination: String, until: Date) throws {
        try connection.execute(
            """
            INSERT INTO \(t.locks) AS l (destination, locked_until) VALUES (\(destination), \(until))
            ON CONFLICT (destination) DO UPDATE SET locked_until = GREATEST(l.locked_until, EXCLUDED.locked_until)
            """
        )
    }

    /// The pumping guard's counts are kept per minute: the minute `date` falls in.
    static func minute(of date: Date) -> Date {
        Date(timeIntervalSince1970: (date.timeIntervalSince1970 / 60).rounded(.down) * 60)
    }

    /// SQL that adds one to `column` (`started` or `verified`) of the pumping guard's count for
    /// a calling code's minute (the one `startedAt` falls in), in one of 4 shards (so concurrent
    /// codes to one country rarely wait for the same row), when `condition` holds: a statement,
    /// or a CTE of one.
    func pumpingCountIncrement(
        _ column: PumpingColumn,
        callingCode: String,
        startedAt: Date,
        when condition: Bool
    ) -> PostgresStatement {
        let counts: PostgresStatement = column == .started ? "1, 0" : "0, 1"
        return """
            INSERT INTO \(t.pumpingCounts) AS p (calling_code, minute, shard, started, verified)
            SELECT \(callingCode)::text, \(Self.minute(of: startedAt)), \(Self.pumpingShard()), \(counts)
            WHERE \(condition)
            ON CONFLICT (calling_code, minute, shard) DO UPDATE SET \(identifier: column.rawValue) = p.\(identifier: column.rawValue) + 1
            """
    }

    enum PumpingColumn: String {
        /// A code started, counted in its minute.
        case started
        /// A right code, counted in the minute its verification started.
        case verified
    }

    static func pumpingShard() -> Int64 { Int64.random(in: 0...3) }

    // MARK: Start (three statements: locks, every limit's figures, every write; two round trips)

    /// Takes the transaction-scoped advisory locks of `keys`, in that order, in one statement
    /// that travels with the next one (``lock(_:_:)``).
    func lock(_ connection: PostgresConnection, keys: [String]) throws {
        precondition(!keys.isEmpty && keys.count <= 2)
        if keys.count == 1 {
            try self.lock(connection, keys[0])
        } else {
            try connection.executeWithNext(
                """
                SELECT pg_advisory_xact_lock(hashtextextended(\(lockName(keys[0])), 0)),
                    pg_advisory_xact_lock(hashtextextended(\(lockName(keys[1])), 0))
                """
            )
        }
    }

    /// The name hashed into the advisory lock of `key` (one set of locks per schema).
    private func lockName(_ key: String) -> String { "auth.otp.\(schema).\(key)" }

    /// What a Start's limits look at, read in one statement under the destination's (and the
    /// client IP's) lock.
    struct StartFigures: Sendable {
        /// Wrong codes for the destination within the attempt window.
        var wrongCodes: Int
        /// The destination's locks now.
        var locks: DestinationLocks
        /// When the per-destination limit is reached: the start that has to leave the hour
        /// for one more to be allowed (the `limit`-th most recent); nil below the limit.
        var destinationLimitStart: Date?
        /// The same for the client IP.
        var ipLimitStart: Date?
        /// The pumping guard's figures for the calling code (zero for an email).
        var pumping: (started: Int, verified: Int, oldestMinute: Date?)
    }

    func startFigures(
        _ connection: PostgresConnection,
        destination: Destination,
        clientIPKey: String,
        now: Date,
        attemptsSince: Date,
        hourAgo: Date,
        destinationLimit: Int,
        ipLimit: Int
    ) throws -> StartFigures {
        let rows = try connection.execute(
            """
            SELECT
                (SELECT count(*) FROM \(t.limitEvents)
                    WHERE kind = 'wrong_code' AND key = \(destination.normalized) AND occurred_at > \(attemptsSince)),
                (SELECT locked_until FROM \(t.locks) WHERE destination = \(destination.normalized) AND locked_until > \(now)),
                coalesce((SELECT failures FROM \(t.consecutiveFailures) WHERE destination = \(destination.normalized)), 0),
                (SELECT occurred_at FROM \(t.limitEvents)
                    WHERE kind = 'start_destination' AND key = \(destination.normalized) AND occurred_at > \(hourAgo)
                    ORDER BY occurred_at DESC OFFSET \(max(0, destinationLimit - 1)) LIMIT 1),
                (SELECT occurred_at FROM \(t.limitEvents)
                    WHERE kind = 'start_ip' AND key = \(clientIPKey) AND occurred_at > \(hourAgo)
                    ORDER BY occurred_at DESC OFFSET \(max(0, ipLimit - 1)) LIMIT 1),
                p.started, p.verified, p.oldest
            FROM (
                SELECT coalesce(sum(started), 0), coalesce(sum(verified), 0), min(minute) FILTER (WHERE started > 0)
                FROM \(t.pumpingCounts)
                WHERE calling_code = \(destination.channel == .sms ? destination.callingCode : "")
                    AND minute >= \(Self.minute(of: hourAgo))
            ) p (started, verified, oldest)
            """
        )
        let row = rows[0]
        return StartFigures(
            wrongCodes: try row[0].int,
            locks: DestinationLocks(lockedUntil: try row[1].decode(Date?.self), consecutiveFailures: try row[2].int),
            destinationLimitStart: try row[3].decode(Date?.self),
            ipLimitStart: clientIPKey.isEmpty ? nil : try row[4].decode(Date?.self),
            pumping: (try row[5].int, try row[6].int, try row[7].decode(Date?.self))
        )
    }

    /// Everything a Start writes, in one statement: the verification, its limit events (the
    /// destination's, and the client IP's when there is one), the outbox message, the pumping
    /// guard's count (SMS), and the outbox's `NOTIFY` (delivered at commit) unless the message
    /// is written already claimed for this process's dispatcher (`claim`, ``OutboxHandoff``).
    /// The transaction's last statement: it carries the `COMMIT` (one round trip).
    func writeStartAndCommit(
        _ connection: PostgresConnection,
        id: UUID,
        messageID: UUID,
        destination: Destination,
        purpose: Purpose,
        locale: String,
        clientIP: String,
        clientIPKey: String,
        codeMAC: [UInt8],
        code: String,
        now: Date,
        expiresAt: Date,
        claim: OutboxHandoff.Reservation?,
        decoy: Bool = false,
        subject: String = "",
        linkBase: String = ""
    ) throws {
        // Two texts, each prepared once: claimed (`sending`, leased, counted as one attempt) and
        // announced (`queued`, NOTIFY).
        let claimColumns: PostgresStatement =
            claim == nil ? "" : ", state, claimed_until, claimed_by, attempts, total_attempts"
        let claimValues: PostgresStatement = claim.map { ", 'sending', \($0.leaseUntil), \($0.worker), 1, 1" } ?? ""
        let announce: PostgresStatement = claim == nil ? "SELECT pg_notify(\(notifyChannel), '')" : "SELECT 1"
        let pumping = pumpingCountIncrement(
            .started,
            callingCode: destination.callingCode,
            startedAt: now,
            when: destination.channel == .sms && !decoy
        )
        try connection.executeAndCommit(
            """
            WITH verification AS (
                INSERT INTO \(t.verifications) (id, channel, destination, calling_code, purpose, locale, client_ip, code_mac,
                    created_at, expires_at, last_sent_at, decoy, subject, link_base)
                VALUES (\(id), \(destination.channel.rawValue), \(destination.normalized), \(destination.callingCode),
                    \(purpose.rawValue), \(locale), \(clientIP), \(codeMAC), \(now), \(expiresAt), \(now), \(decoy), \(subject),
                    \(linkBase))
                RETURNING id
            ), events AS (
                INSERT INTO \(t.limitEvents) (kind, key, occurred_at)
                SELECT e.kind, e.key, \(now)
                FROM (VALUES ('start_destination', \(destination.normalized)), ('start_ip', \(clientIPKey))) e (kind, key)
                WHERE e.key <> ''
            ), message AS (
                INSERT INTO \(t.messages) (id, verification_id, channel, destination, calling_code, code, purpose, locale,
                    created_at, next_attempt_at, updated_at, link_base\(claimColumns))
                SELECT \(messageID), verification.id, \(destination.channel.rawValue), \(destination.normalized),
                    \(destination.callingCode), \(code), \(purpose.rawValue), \(locale), \(now), \(now), \(now),
                    \(linkBase)\(claimValues)
                FROM verification
                WHERE NOT \(decoy)
            ), pumping AS (
                \(pumping)
            )
            \(announce)
            """
        )
    }

    /// A notice (SendNotice): a verification of the notice's `purpose` that is never pending,
    /// with a random MAC no code matches, and its message (no code) in the outbox, announced
    /// with a NOTIFY. With `unlessWrittenSince`, nothing is written when a notice of that purpose
    /// went to the destination after it (the check and the write under the destination's lock).
    func writeNotice(
        id: UUID,
        messageID: UUID,
        purpose: Purpose,
        unlessWrittenSince since: Date?,
        destination: Destination,
        locale: String,
        clientIP: String,
        now: Date,
        expiresAt: Date
    ) async throws {
        let statement: PostgresStatement = """
            WITH verification AS (
                INSERT INTO \(t.verifications) (id, channel, destination, calling_code, purpose, locale, client_ip, code_mac,
                    created_at, expires_at, last_sent_at, status, verified_at)
                SELECT \(id), \(destination.channel.rawValue), \(destination.normalized), \(destination.callingCode),
                    \(purpose.rawValue), \(locale), \(clientIP), \(SecureRandom.bytes(count: 32)), \(now), \(expiresAt), \(now),
                    'verified', \(now)
                WHERE NOT EXISTS (
                    SELECT 1 FROM \(t.verifications) WHERE destination = \(destination.normalized)
                        AND purpose = \(purpose.rawValue) AND created_at > \(since)
                )
                RETURNING id
            ), message AS (
                INSERT INTO \(t.messages) (id, verification_id, channel, destination, calling_code, code, purpose, locale,
                    created_at, next_attempt_at, updated_at)
                SELECT \(messageID), verification.id, \(destination.channel.rawValue), \(destination.normalized),
                    \(destination.callingCode), '', \(purpose.rawValue), \(locale), \(now), \(now), \(now)
                FROM verification
            )
            SELECT pg_notify(\(notifyChannel), '') FROM verification
            """
        guard since != nil else {
            try await pool.query(statement)
            return
        }
        try await pool.transaction { connection in
            try lock(connection, "notice:\(destination.normalized)")
            try connection.execute(statement)
        }
    }

    // MARK: Verifications

    func insertVerification(
        _ connection: PostgresConnection,
        id: UUID,
        destination: Destination,
        purpose: Purpose,
        locale: String,
        clientIP: String,
        codeMAC: [UInt8],
        now: Date,
        expiresAt: Date,
        test: Bool,
        subject: String = ""
    ) throws {
        try connection.execute(
            """
            INSERT INTO \(t.verifications) (id, channel, destination, calling_code, purpose, locale, client_ip, code_mac,
                created_at, expires_at, last_sent_at, test_destination, subject)
            VALUES (\(id), \(destination.channel.rawValue), \(destination.normalized), \(destination.callingCode),
                \(purpose.rawValue), \(locale), \(clientIP), \(codeMAC), \(now), \(expiresAt), \(now), \(test), \(subject))
            """
        )
    }

    func lockVerification(_ connection: PostgresConnection, id: UUID) throws -> VerificationRow? {
        try verificationRow(connection.execute("\(Self.verificationColumns(t)) WHERE id = \(id) FOR UPDATE"))
    }

    /// The newest pending verification of `destination` among `purposes`, locked (Check by
    /// destination: the Supabase door verifies by contact and code).
    func lockNewestPendingVerification(
        _ connection: PostgresConnection,
        destination: Destination,
        purposes: Set<Purpose>
    ) throws -> VerificationRow? {
        let purposeNames = purposes.map(\.rawValue).sorted().joined(separator: ",")
        return try verificationRow(
            connection.execute(
                """
                \(Self.verificationColumns(t))
                WHERE destination = \(destination.normalized) AND status = 'pending'
                    AND purpose = ANY(string_to_array(\(purposeNames)::text, ','))
                ORDER BY created_at DESC LIMIT 1 FOR UPDATE
                """
            )
        )
    }

    private static func verificationColumns(_ t: Tables) -> PostgresStatement {
        """
        SELECT id, channel, destination, purpose, locale, code_mac, created_at, expires_at, last_sent_at, resends,
            status, test_destination, decoy, subject, link_base
        FROM \(t.verifications)
        """
    }

    private func verificationRow(_ rows: PostgresRows) throws -> VerificationRow? {
        guard let row = rows.first else { return nil }
        let destination = Destination(stored: try row[2].string)
        guard let purpose = Purpose(rawValue: try row[3].string) else {
            throw PostgresError(code: .decodingFailed, message: "a stored verification has an unreadable purpose")
        }
        return VerificationRow(
            id: try row[0].uuid,
            destination: destination,
            purpose: purpose,
            locale: try row[4].string,
            codeMAC: try row[5].bytes,
            createdAt: try row[6].date,
            expiresAt: try row[7].date,
            lastSentAt: try row[8].date,
            resends: try row[9].int,
            status: try row[10].string,
            testDestination: try row[11].bool,
            decoy: try row[12].bool,
            subject: try row[13].string,
            linkBase: try row[14].string
        )
    }

    func replaceCode(_ connection: PostgresConnection, id: UUID, codeMAC: [UInt8], now: Date, expiresAt: Date) throws {
        try connection.execute(
            """
            UPDATE \(t.verifications)
            SET code_mac = \(codeMAC), expires_at = \(expiresAt), last_sent_at = \(now), resends = resends + 1
            WHERE id = \(id)
            """
        )
    }

    /// A right code: the verification is verified and, for a code that counts for the pumping
    /// guard (an SMS to a destination not on the test list), its start minute's count of
    /// verified codes goes up, in one statement: the transaction's last, which carries the
    /// `COMMIT` (one round trip).
    func markVerifiedAndCommit(
        _ connection: PostgresConnection,
        id: UUID,
        destination: String,
        now: Date,
        pumpingCallingCode: String?,
        startedAt: Date
    ) throws {
        try connection.executeAndCommit(
            """
            WITH verified AS (
                UPDATE \(t.verifications) SET status = 'verified', verified_at = \(now) WHERE id = \(id)
            ), consecutive AS (
                DELETE FROM \(t.consecutiveFailures) WHERE destination = \(destination)
            )
            \(pumpingCountIncrement(.verified, callingCode: pumpingCallingCode ?? "", startedAt: startedAt, when: pumpingCallingCode != nil))
            """
        )
    }

    func markFailed(_ connection: PostgresConnection, id: UUID) throws {
        try connection.execute("UPDATE \(t.verifications) SET status = 'failed' WHERE id = \(id)")
    }

    // MARK: Outbox

    /// Writes a message to the outbox and announces it (the notification is delivered when the
    /// transaction commits, together with the row).
    func enqueue(
        _ connection: PostgresConnection,
        verificationID: UUID,
        destination: Destination,
        code: String,
        purpose: Purpose,
        locale: String,
        linkBase: String,
        now: Date
    ) throws {
        try connection.execute(
            """
            INSERT INTO \(t.messages) (id, verification_id, channel, destination, calling_code, code, purpose, locale,
                created_at, next_attempt_at, updated_at, link_base)
            VALUES (\(CodeMAC.newID()), \(verificationID), \(destination.channel.rawValue), \(destination.normalized),
                \(destination.callingCode), \(code), \(purpose.rawValue), \(locale), \(now), \(now), \(now), \(linkBase))
            """
        )
        try connection.execute("SELECT pg_notify(\(notifyChannel), '')")
    }

    /// A resend makes the verification's unsent messages pointless (their code no longer
    /// works): they are marked superseded and their codes wiped. One being sent right now is
    /// left alone.
    func supersede(_ connection: PostgresConnection, verificationID: UUID, now: Date) throws {
        try connection.execute(
            """
            UPDATE \(t.messages) SET state = 'superseded', code = NULL, updated_at = \(now)
            WHERE verification_id = \(verificationID) AND state = 'queued'
            """
        )
    }

    /// The outbox's backlog: messages not yet handed to a provider (queued, including those
    /// waiting for a retry, or being sent), counted up to `countLimit`, and the age of the
    /// oldest of them (zero when there is none).
    func outboxBacklog(now: Date, countLimit: Int) async throws -> (pending: Int, oldestAge: Double) {
        let rows = try await pool.query(
            """
            SELECT (SELECT count(*) FROM (
                        SELECT 1 FROM \(t.messages) WHERE state IN ('queued', 'sending') LIMIT \(countLimit)
                    ) pending),
                   (SELECT min(created_at) FROM \(t.messages) WHERE state IN ('queued', 'sending'))
            """
        )
        guard let row = rows.first else { return (0, 0) }
        let oldest = try row[1].decode(Date?.self)
        return (try row[0].int, oldest.map { max(0, now.timeIntervalSince($0)) } ?? 0)
    }

    /// Claims up to `limit` messages whose claim expired (the worker died or hung), oldest claim
    /// first, then, up to `limit` in all, messages that are due (queued and past
    /// `next_attempt_at`), oldest first, skipping rows other workers hold.
    ///
    /// Each kind is read in the order of its own partial index, so a claim reads about `limit`
    /// rows whatever the backlog. One condition over both kinds (`… OR …`) could use neither
    /// index's order: PostgreSQL read and sorted every due row at each claim, which made
    /// draining a backlog quadratic in its size (docs/benchmarks.md, "Where issue 24 ended").
    func claim(now: Date, leaseUntil: Date, worker: String, limit: Int) async throws -> [ClaimedMessage] {
        let rows = try await pool.query(
            """
            WITH expired AS (
                SELECT id FROM \(t.messages)
                WHERE state = 'sending' AND claimed_until <= \(now)
                ORDER BY claimed_until
                LIMIT \(limit)
                FOR UPDATE SKIP LOCKED
            ), due AS (
                SELECT id FROM \(t.messages)
                WHERE state = 'queued' AND next_attempt_at <= \(now)
                ORDER BY next_attempt_at
                LIMIT \(limit) - (SELECT count(*) FROM expired)
                FOR UPDATE SKIP LOCKED
            )
            UPDATE \(t.messages) m SET state = 'sending', claimed_until = \(leaseUntil), claimed_by = \(worker),
                attempts = m.attempts + 1, total_attempts = m.total_attempts + 1, updated_at = \(now)
            WHERE m.id = ANY (ARRAY(SELECT id FROM expired UNION ALL SELECT id FROM due))
            RETURNING m.id, m.verification_id, m.channel, m.destination, m.calling_code, m.code, m.purpose, m.locale,
                m.created_at, m.provider_index, m.attempts, m.link_base
            """
        )
        return try rows.map { row in
            ClaimedMessage(
                id: try row[0].uuid,
                verificationID: try row[1].uuid,
                channel: Channel(rawValue: try row[2].string) ?? .sms,
                destination: try row[3].string,
                callingCode: try row[4].string,
                code: try row[5].decode(String?.self) ?? "",
                purpose: try row[6].string,
                locale: try row[7].string,
                createdAt: try row[8].date,
                providerIndex: try row[9].int,
                attempts: try row[10].int,
                linkBase: try row[11].string
            )
        }
    }

    /// A message a provider accepted, with the provider's own id of it.
    struct SentMessage: Sendable {
        var id: UUID
        var provider: String
        var providerMessageID: String?

        /// The messages as the JSON array `markSent` hands PostgreSQL's `jsonb_to_recordset`:
        /// `[{"id":…,"provider":…,"provider_message_id":…},…]`, the last member `null` when the
        /// provider gave no id (written by hand: `JSONEncoder` was on every delivery).
        static func jsonRows(_ sent: [SentMessage]) -> String {
            var json = "["
            for message in sent {
                if json.utf8.count > 1 { json += "," }
                json += #"{"id":""# + message.id.uuidString + #"","provider":"#
                JSONText.appendString(message.provider, to: &json)
                json += #","provider_message_id":"#
                if let providerMessageID = message.providerMessageID {
                    JSONText.appendString(providerMessageID, to: &json)
                } else {
                    json += "null"
                }
                json += "}"
            }
            return json + "]"
        }
    }

    /// Providers accepted these messages: sent, codes wiped, in one statement (a claimed batch).
    ///
    /// One message (a sign-in's, handed over in process) is found by its key alone, a statement
    /// PostgreSQL plans once per connection. A batch's ids are also given as a list the planner
    /// reads as a constant array, so that it finds the rows by primary key: joined only with the
    /// JSON rows (which it guesses at 100), it scanned the whole table whenever it believed the
    /// table small (its statistics lag behind a table that grows), a cost that grew with every
    /// message sent (issue 24). Reading that list takes a plan per call (150 µs of PostgreSQL's
    /// time per call in the sign-in benchmark), which the one-message statement does not.
    func markSent(_ sent: [SentMessage], now: Date) async throws {
        guard !sent.isEmpty else { return }
        if sent.count == 1, let message = sent.first {
            try await pool.query(
                """
                UPDATE \(t.messages) SET state = 'sent', code = NULL, provider = \(message.provider),
                    provider_message_id = \(message.providerMessageID), sent_at = \(now), updated_at = \(now),
                    claimed_until = NULL, claimed_by = NULL
                WHERE id = \(message.id) AND state IN ('queued', 'sending')
                """
            )
            return
        }
        let rows = SentMessage.jsonRows(sent)
        let ids = sent.map(\.id.uuidString).joined(separator: ",")
        try await pool.query(
            """
            UPDATE \(t.messages) m SET state = 'sent', code = NULL, provider = r.provider,
                provider_message_id = r.provider_message_id, sent_at = \(now), updated_at = \(now),
                claimed_until = NULL, claimed_by = NULL
            FROM jsonb_to_recordset(\(rows)::jsonb) AS r (id uuid, provider text, provider_message_id text)
            WHERE m.id = ANY (string_to_array(\(ids), ',')::uuid[]) AND m.id = r.id
                AND m.state IN ('queued', 'sending')
            """
        )
    }

    /// Try again at `at`, with the provider at `providerIndex` (a failover resets the attempts).
    func markRetry(
        id: UUID,
        worker: String,
        at: Date,
        providerIndex: Int,
        resetAttempts: Bool,
        provider: String,
        error: String,
        now: Date
    ) async throws {
        try await pool.query(
            """
            UPDATE \(t.messages) SET state = 'queued', next_attempt_at = \(at), provider_index = \(Int32(providerIndex)),
                attempts = CASE WHEN \(resetAttempts) THEN 0 ELSE attempts END, provider = \(provider),
                last_error = \(error), updated_at = \(now), claimed_until = NULL, claimed_by = NULL
            WHERE id = \(id) AND state = 'sending' AND claimed_by = \(worker)
            """
        )
    }

    /// Dead letter: every provider failed past its budget. The code is wiped.
    func markDead(id: UUID, provider: String, error: String, now: Date) async throws {
        try await pool.query(
            """
            UPDATE \(t.messages) SET state = 'failed', code = NULL, provider = \(provider), last_error = \(error),
                updated_at = \(now), claimed_until = NULL, claimed_by = NULL
            WHERE id = \(id) AND state IN ('queued', 'sending')
            """
        )
    }

    /// A provider's delivery report; returns whether the message was found.
    func reportDelivery(providerMessageID: String, delivered: Bool, error: String, now: Date) async throws -> Bool {
        let rows = try await pool.query(
            """
            UPDATE \(t.messages) SET state = \(delivered ? "delivered" : "failed"),
                last_error = CASE WHEN \(delivered) THEN last_error ELSE \(error) END, updated_at = \(now), code = NULL
            WHERE provider_message_id = \(providerMessageID) AND state IN ('sent', 'delivered', 'failed')
            """
        )
        return (rows.affectedRows ?? 0) > 0
    }

    /// The verification, its latest message and how many it has, and its destination's
    /// resends since `resendWindowStart`; nil if the verification is unknown.
    func deliveryStatus(
        verificationID: UUID,
        resendWindowStart: Date,
        maxResends: Int
    ) async throws -> VerificationStatus? {
        let rows = try await pool.query(
            """
            SELECT v.destination, v.test_destination, v.decoy, v.status, v.created_at, v.last_sent_at, v.expires_at,
                v.resends,
                (SELECT count(*) FROM \(t.limitEvents) e
                    WHERE e.kind = 'resend' AND e.key = v.destination AND e.occurred_at > \(resendWindowStart)),
                (SELECT e.occurred_at FROM \(t.limitEvents) e
                    WHERE e.kind = 'resend' AND e.key = v.destination AND e.occurred_at > \(resendWindowStart)
                    ORDER BY e.occurred_at DESC OFFSET \(max(0, maxResends - 1)) LIMIT 1),
                m.state, m.provider, m.total_attempts, m.updated_at, m.last_error,
                (SELECT count(*) FROM \(t.messages) c WHERE c.verification_id = v.id)
            FROM \(t.verifications) v
            LEFT JOIN LATERAL (
                SELECT * FROM \(t.messages) x WHERE x.verification_id = v.id AND x.state <> 'superseded'
                ORDER BY x.created_at DESC LIMIT 1
            ) m ON true
            WHERE v.id = \(verificationID)
            """
        )
        guard let row = rows.first else { return nil }
        var record: DeliveryRecord?
        if let state = try row[10].decode(String?.self) {
            record = DeliveryRecord(
                state: state,
                provider: try row[11].string,
                attempts: try row[12].int,
                updatedAt: try row[13].date,
                lastError: try row[14].string,
                messages: try row[15].int
            )
        }
        return VerificationStatus(
            destination: try row[0].string,
            test: try row[1].bool,
            decoy: try row[2].bool,
            status: try row[3].string,
            createdAt: try row[4].date,
            lastSentAt: try row[5].date,
            expiresAt: try row[6].date,
            resends: try row[7].int,
            recentResends: try row[8].int,
            limitingResend: maxResends == 0 ? nil : try row[9].decode(Date?.self),
            record: record
        )
    }

    // MARK: Purge

    /// Deletes verifications that expired before `cutoff` (with their messages, unless one is
    /// still waiting to be sent) and limit events older than `eventCutoff`; returns how many
    /// verifications and events.
    func purge(before cutoff: Date, eventsBefore eventCutoff: Date, batch: Int) async throws -> (Int, Int) {
        let verifications = try await pool.query(
            """
            DELETE FROM \(t.verifications) WHERE id IN (
                SELECT v.id FROM \(t.verifications) v
                WHERE v.expires_at < \(cutoff)
                  AND NOT EXISTS (SELECT 1 FROM \(t.messages) m WHERE m.verification_id = v.id AND m.state IN ('queued', 'sending'))
                LIMIT \(batch))
            """
        )
        let events = try await pool.query(
            """
            DELETE FROM \(t.limitEvents)
            WHERE ctid IN (SELECT ctid FROM \(t.limitEvents) WHERE occurred_at < \(eventCutoff) LIMIT \(batch))
            """
        )
        try await pool.query("DELETE FROM \(t.locks) WHERE locked_until < \(eventCutoff)")
        try await pool.query("DELETE FROM \(t.pumpingCounts) WHERE minute < \(Self.minute(of: eventCutoff))")
        return (verifications.affectedRows ?? 0, events.affectedRows ?? 0)
    }
}
