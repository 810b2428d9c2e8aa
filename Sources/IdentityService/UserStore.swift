import AuthAPI
import AuthCrypto
import AuthPostgres
import AuthProtobuf
import AuthText
import AuthTime

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A user row (live accounts only are ever returned).
struct UserRecord: Sendable, Equatable {
    var id: UUID
    var phone: String?
    var email: String?
    var phoneVerified: Bool
    var emailVerified: Bool
    var displayName: String
    var photoURL: String
    var onboardingCompleted: Bool
    var createdAt: Date
    var updatedAt: Date
    var passwordHash: String?
    var providers: [String]

    var proto: Auth_Identity_V1_User {
        Auth_Identity_V1_User(
            id: id.uuidString.lowercased(),
            phone: phone ?? "",
            email: email ?? "",
            phoneVerified: phoneVerified,
            emailVerified: emailVerified,
            displayName: displayName,
            photoURL: photoURL,
            onboardingCompleted: onboardingCompleted,
            createdAt: createdAt.unixSeconds,
            updatedAt: updatedAt.unixSeconds,
            hasPassword: passwordHash != nil,
            providers: providers
        )
    }
}

/// Who did what, for the audit trail. Holds no password, code or token.
struct AuditEntry: Sendable {
    struct Kind: RawRepresentable, Hashable, Sendable {
        let rawValue: String
        static let signUp = Kind(rawValue: "sign_up")
        static let signIn = Kind(rawValue: "sign_in")
        static let signInFailed = Kind(rawValue: "sign_in_failed")
        static let contactVerified = Kind(rawValue: "contact_verified")
        static let providerLinked = Kind(rawValue: "provider_linked")
        static let providerUnlinked = Kind(rawValue: "provider_unlinked")
        static let profileUpdated = Kind(rawValue: "profile_updated")
        static let passwordChanged = Kind(rawValue: "password_changed")
        static let passwordChangeFailed = Kind(rawValue: "password_change_failed")
        static let passwordReset = Kind(rawValue: "password_reset")
        static let passwordRehashed = Kind(rawValue: "password_rehashed")
        /// A code proved a contact that was unverified on an account holding a password: the
        /// password (set by whoever signed up, before anyone proved the contact) was cleared.
        static let passwordCleared = Kind(rawValue: "password_cleared")
        /// A proved phone or email was set on the account (`method` `phone` or `email`).
        static let contactChanged = Kind(rawValue: "contact_changed")
        /// Another account proved the phone or email this account held unverified: it was
        /// taken off this account.
        static let contactReleased = Kind(rawValue: "contact_released")
        static let accountDeleted = Kind(rawValue: "account_deleted")
    }

    var kind: Kind
    var userID: UUID?
    var method: String
    var occurredAt: Date
    var clientIP: String
    var requestID: String
    var caller: String
}

/// The changes UpdateProfile makes (nil: unchanged).
struct ProfileChanges: Sendable {
    var displayName: String?
    var photoURL: String?
    var onboardingCompleted: Bool?
}

/// What a provider sign-in found or made.
struct ProviderSignInResult: Sendable {
    var user: UserRecord
    var created: Bool
    var linked: Bool
}

/// Verified facts from an ID token, for find-or-create.
struct ProviderIdentity: Sendable {
    var provider: IdentityProvider
    var subject: String
    var email: String?
    var emailVerified: Bool
    var name: String?
    var pictureURL: String?
}

/// A provider identity linked to an account.
struct LinkedIdentity: Sendable, Equatable {
    var provider: String
    var subject: String
    var email: String?
    var createdAt: Date
}

/// The identity service's SQL. Every statement names its tables with the configured schema.
struct UserStore: Sendable {
    let pool: PostgresPool
    let schema: PostgresSchema

    init(pool: PostgresPool, schema: String) {
        self.pool = pool
        self.schema = PostgresSchema(schema)
    }

    /// The columns ``record(_:)`` reads, of a user row `u`.
    private var userColumns: PostgresStatement {
        """
        u.id, u.phone, u.email, u.phone_verified, u.email_verified, u.display_name, u.photo_url,
            u.onboarding_completed, u.created_at, u.updated_at, u.password_hash,
            COALESCE((SELECT string_agg(p.provider, ',' ORDER BY p.provider)
                FROM \(schema).provider_identities p WHERE p.user_id = u.id), '') AS providers
        """
    }

    private var selectUser: PostgresStatement { "SELECT \(userColumns) FROM \(schema).users u" }

    /// A user row of ``userColumns``.
    static func record(_ row: PostgresRow) throws -> UserRecord {
        let text = try row[11].string
        return try record(row, providers: text.isEmpty ? [] : text.split(separator: ",").map(String.init))
    }

    /// A user row whose first 11 columns are ``userColumns``' and whose providers were read
    /// otherwise (``userWithProviderIdentities(id:)``: from its joined rows).
    static func record(_ row: PostgresRow, providers: [String]) throws -> UserRecord {
        UserRecord(
            id: try row[0].uuid,
            phone: try row[1].decode(String?.self),
            email: try row[2].decode(String?.self),
            phoneVerified: try row[3].bool,
            emailVerified: try row[4].bool,
            displayName: try row[5].string,
            photoURL: try row[6].string,
            onboardingCompleted: try row[7].bool,
            createdAt: try row[8].date,
            updatedAt: try row[9].date,
            passwordHash: try row[10].decode(String?.self),
            providers: providers
        )
    }

    // MARK: Lookups

    func user(id: UUID) async throws -> UserRecord? {
        try await pool.query("\(selectUser) WHERE u.id = \(id) AND u.deleted_at IS NULL").first.map(Self.record)
    }

    func user(phone: String) async throws -> UserRecord? {
        try await pool.query("\(selectUser) WHERE u.phone = \(phone)::text AND u.deleted_at IS NULL").first
            .map(Self.record)
    }

    func user(email: String) async throws -> UserRecord? {
        try await pool.query("\(selectUser) WHERE u.email = \(email)::text AND u.deleted_at IS NULL").first
            .map(Self.record)
    }

    /// A live user and its linked provider identities (provider, then linking time), in one
    /// statement: one row per identity (one with the identity's columns null for none).
    func userWithProviderIdentities(id: UUID) async throws -> (UserRecord, [LinkedIdentity])? {
        let rows = try await pool.query(
            """
            SELECT u.id, u.phone, u.email, u.phone_verified, u.email_verified, u.display_name, u.photo_url,
                u.onboarding_completed, u.created_at, u.updated_at, u.password_hash,
                p.provider, p.subject, p.email, p.created_at
            FROM \(schema).users u LEFT JOIN \(schema).provider_identities p ON p.user_id = u.id
            WHERE u.id = \(id) AND u.deleted_at IS NULL
            ORDER BY p.provider, p.created_at
            """
        )
        guard let first = rows.first else { return nil }
        var linked: [LinkedIdentity] = []
        for row in rows {
            guard let provider = try row[11].decode(String?.self) else { continue }
            linked.append(
                LinkedIdentity(
                    provider: provider,
                    subject: try row[12].string,
                    email: try row[13].decode(String?.self),
                    createdAt: try row[14].date
                )
            )
        }
        return (try Self.record(first, providers: linked.map(\.provider)), linked)
    }

    /// The live user that has the phone or email.
    func user(contact: Contact) async throws -> UserRecord? {
        switch contact {
        case .phone(let phone): try await user(phone: phone)
        case .email(let email): try await user(email: email)
        }
    }

    /// ALREADY_EXISTS for a sign-up whose phone or email an account has.
    static func taken(_ contact: Contact) -> IdentityError {
        switch contact {
        case .email: IdentityError(.emailTaken, IdentityError.emailTakenMessage)
        case .phone: IdentityError(.contactTaken, "This phone number is already registered. Try logging in instead.")
        }
    }

    private func user(id: UUID, on connection: PostgresConnection) throws -> UserRecord? {
        try connection.execute("\(selectUser) WHERE u.id = \(id) AND u.deleted_at IS NULL").first.map(Self.record)
    }

    // MARK: Audit

    /// The audit table with the columns every audit row is written with.
    private var auditTable: PostgresStatement {
        "\(schema).audit_events (user_id, kind, method, occurred_at, client_ip, request_id, caller)"
    }

    func insertAudit(_ entry: AuditEntry, on connection: PostgresConnection) throws {
        try connection.execute(
            """
            INSERT INTO \(auditTable)
            VALUES (\(entry.userID), \(entry.kind.rawValue)::text, \(entry.method)::text, \(entry.occurredAt),
                \(entry.clientIP)::text, \(entry.requestID)::text, \(entry.caller)::text)
            """
        )
    }

    func insertAudit(_ entry: AuditEntry) async throws {
        try await pool.withConnection { try self.insertAudit(entry, on: $0) }
    }

    func auditEvents(userID: UUID, limit: Int) async throws -> [Auth_Identity_V1_AuditEvent] {
        let rows = try await pool.query(
            """
            SELECT kind, method, occurred_at, client_ip, request_id, caller FROM \(schema).audit_events
            WHERE user_id = \(userID) ORDER BY occurred_at DESC, id DESC LIMIT \(limit)
            """
        )
        return try rows.map { row in
            Auth_Identity_V1_AuditEvent(
                kind: try row[0].string,
                userID: userID.uuidString.lowercased(),
                method: try row[1].string,
                occurredAtUS: try row[2].microsecondsSinceEpoch,
                clientIP: try row[3].string,
                requestID: try row[4].string,
                caller: try row[5].string
            )
        }
    }

    // MARK: One-time-code contacts

    /// What ``findOrCreate(contact:newID:signupVerification:audit:)`` found or made.
    struct ContactSignIn: Sendable {
        var user: UserRecord
        var created: Bool
        /// The proof cleared a password set before the contact was proved (pre-hijacking).
        var passwordCleared: Bool
    }

    /// Finds the account with `contact` and marks the contact verified, or creates one.
    ///
    /// A contact that was unverified on an account holding a password was claimed by whoever
    /// signed up, not proved: unless the proof is the sign-up's own verification
    /// (`signupVerification`), the person proving it now is its owner, and the password set
    /// before goes (account pre-hijacking, docs/security.md). The caller revokes the account's
    /// sessions when `passwordCleared`.
    func findOrCreate(
        contact: Contact,
        newID: UUID,
        signupVerification: Bool,
        audit: AuditEntry
    ) async throws
        -> ContactSignIn
    {
        let (column, verified, value): (String, String, String) =
            switch contact {
            case .phone(let phone): ("phone", "phone_verified", phone)
            case .email(let email): ("email", "email_verified", email)
            }
        // One statement, so no transaction: the upsert, its audit row (sign_up when it created
        // the account), and the account as written (a statement's reads do not see its own
        // writes, so the row comes from RETURNING). It leaves alone an account whose password a
        // proof would clear (the conflict's WHERE): that rare case takes the transaction below.
        let rows = try await pool.query(
            """
            WITH u AS (
                INSERT INTO \(schema).users AS u (id, \(identifier: column), \(identifier: verified), created_at, updated_at)
                VALUES (\(newID), \(value)::text, true, \(audit.occurredAt), \(audit.occurredAt))
                ON CONFLICT (\(identifier: column)) WHERE \(identifier: column) IS NOT NULL DO UPDATE
                    SET \(identifier: verified) = true,
                        updated_at = CASE WHEN u.\(identifier: verified) THEN u.updated_at ELSE EXCLUDED.updated_at END
                    WHERE u.\(identifier: verified) OR u.password_hash IS NULL OR \(signupVerification)
                RETURNING u.*, (xmax = 0) AS created
            ), audit AS (
                INSERT INTO \(auditTable)
                SELECT u.id, CASE WHEN u.created THEN \(AuditEntry.Kind.signUp.rawValue)::text
                    ELSE \(audit.kind.rawValue)::text END,
                    \(audit.method)::text, \(audit.occurredAt), \(audit.clientIP)::text, \(audit.requestID)::text,
                    \(audit.caller)::text
                FROM u
            )
            SELECT \(userColumns), u.created FROM u WHERE u.deleted_at IS NULL
            """
        )
        if let row = rows.first {
            return ContactSignIn(user: try Self.record(row), created: try row[12].bool, passwordCleared: false)
        }
        return try await self.proveClaimedContact(column: column, verified: verified, value: value, audit: audit)
    }

    /// The contact is unverified on an account holding a password: marks it verified, clears
    /// the password, and audits both, under the row's lock (a concurrent proof or sign-up waits).
    private func proveClaimedContact(
        column: String,
        verified: String,
        value: String,
        audit: AuditEntry
    ) async throws
        -> ContactSignIn
    {
        try await pool.transaction { connection in
            guard
                let row = try connection.execute(
                    """
                    SELECT id, \(identifier: verified), password_hash IS NOT NULL FROM \(schema).users
                    WHERE \(identifier: column) = \(value)::text AND deleted_at IS NULL FOR UPDATE
                    """
                ).first
            else {
                // Deletion clears the contact, so only a deletion between the two statements
                // gets here.
                throw IdentityError(.unavailable, "The account changed while signing in; try again.")
            }
            let id = try row[0].uuid
            let cleared = try !row[1].bool && row[2].bool
            try connection.execute(
                """
                UPDATE \(schema).users SET \(identifier: verified) = true,
                    password_hash = CASE WHEN \(cleared) THEN NULL ELSE password_hash END, updated_at = \(audit.occurredAt)
                WHERE id = \(id)
                """
            )
            var entry = audit
            entry.userID = id
            if cleared {
                var clearedEntry = entry
                clearedEntry.kind = .passwordCleared
                try self.insertAudit(clearedEntry, on: connection)
            }
            try self.insertAudit(entry, on: connection)
            guard let user = try self.user(id: id, on: connection) else {
                throw IdentityError(.internal, "The user just written is missing.")
            }
            return ContactSignIn(user: user, created: false, passwordCleared: cleared)
        }
    }

    /// What ``changeContact(userID:to:audit:)`` did.
    enum ContactChange: Sendable {
        case changed(UserRecord, previous: String?, previousVerified: Bool)
        /// Another account has proved it.
        case taken
        case noUser
    }

    /// Sets a proved phone or email on `userID`, verified (audit `contact_changed`). Another
    /// account holding it unverified loses it (audit `contact_released` there); one holding it
    /// verified keeps it: `taken`. Both rows are locked, the holder's first.
    func changeContact(userID: UUID, to contact: Contact, audit: AuditEntry) async throws -> ContactChange {
        let (column, verified, value): (String, String, String) =
            switch contact {
            case .phone(let phone): ("phone", "phone_verified", phone)
            case .email(let email): ("email", "email_verified", email)
            }
        return try await pool.transaction { connection in
            if let holder = try connection.execute(
                """
                SELECT id, \(identifier: verified) FROM \(schema).users
                WHERE \(identifier: column) = \(value)::text AND deleted_at IS NULL FOR UPDATE
                """
            ).first, try holder[0].uuid != userID {
                if try holder[1].bool { return .taken }
                let holderID = try holder[0].uuid
                try connection.execute(
                    """
                    UPDATE \(schema).users SET \(identifier: column) = NULL, \(identifier: verified) = false,
                        updated_at = \(audit.occurredAt)
                    WHERE id = \(holderID)
                    """
                )
                var released = audit
                released.kind = .contactReleased
                released.userID = holderID
                try self.insertAudit(released, on: connection)
            }
            guard
                let current = try connection.execute(
                    """
                    SELECT \(identifier: column), \(identifier: verified) FROM \(schema).users
                    WHERE id = \(userID) AND deleted_at IS NULL FOR UPDATE
                    """
                ).first
            else { return .noUser }
            let previous = try current[0].decode(String?.self)
            let previousVerified = try current[1].bool
            try connection.execute(
                """
                UPDATE \(schema).users SET \(identifier: column) = \(value)::text, \(identifier: verified) = true,
                    updated_at = \(audit.occurredAt)
                WHERE id = \(userID)
                """
            )
            var entry = audit
            entry.userID = userID
            try self.insertAudit(entry, on: connection)
            guard let user = try self.user(id: userID, on: connection) else {
                throw IdentityError(.internal, "The user just written is missing.")
            }
            return .changed(user, previous: previous == value ? nil : previous, previousVerified: previousVerified)
        }
    }

    // MARK: Passwords

    /// Creates a password account. Throws `email_taken` when the email belongs to an account.
    func signUp(
        id: UUID,
        contact: Contact,
        displayName: String,
        passwordHash: String,
        audit: AuditEntry
    ) async throws
        -> UserRecord
    {
        let email: String? = if case .email(let value) = contact { value } else { nil }
        let phone: String? = if case .phone(let value) = contact { value } else { nil }
        do {
            return try await pool.transaction { connection in
                try connection.execute(
                    """
                    INSERT INTO \(schema).users (id, email, phone, display_name, password_hash, created_at, updated_at)
                    VALUES (\(id), \(email)::text, \(phone)::text, \(displayName)::text, \(passwordHash)::text,
                        \(audit.occurredAt), \(audit.occurredAt))
                    """
                )
                var entry = audit
                entry.userID = id
                try self.insertAudit(entry, on: connection)
                guard let user = try self.user(id: id, on: connection) else {
                    throw IdentityError(.internal, "The user just written is missing.")
                }
                return user
            }
        } catch let error as PostgresError where error.code == .uniqueViolation {
            throw Self.taken(contact)
        }
    }

    /// The advisory-lock class of account checks (``spendAccountCheck(ipHash:at:windowStart:limit:)``).
    private static let accountCheckLockClass: Int32 = 0x1D_0002

    /// One account check of the address whose rate-limit key hashes to `ipHash`: under a lock
    /// per address, nil after recording it when fewer than `limit` lie after `windowStart`;
    /// else the oldest of the `limit` most recent (a check frees up when it leaves the window).
    /// Each call also deletes up to 32 checks of any address older than the window.
    func spendAccountCheck(ipHash: [UInt8], at now: Date, windowStart: Date, limit: Int) async throws -> Date? {
        try await pool.transaction { connection in
            // The lock in a statement of its own: the count's snapshot must be taken after it, so
            // that it sees the checks of whoever held the lock before. It travels with the count,
            // in one round trip.
            try connection.executeWithNext(
                """
                SELECT pg_advisory_xact_lock(\(Self.accountCheckLockClass)::int4, hashtext(encode(\(ipHash)::bytea, 'hex')))
                """
            )
            let rows = try connection.execute(
                """
                SELECT checked_at FROM \(schema).account_checks
                WHERE ip_hash = \(ipHash) AND checked_at > \(windowStart)
                ORDER BY checked_at DESC OFFSET \(max(0, limit - 1)) LIMIT 1
                """
            )
            if let oldest = try rows.first?[0].decode(Date?.self) { return oldest }
            try connection.execute(
                """
                WITH expired AS (
                    DELETE FROM \(schema).account_checks WHERE ctid IN (
                        SELECT ctid FROM \(schema).account_checks WHERE checked_at <= \(windowStart)
                        LIMIT 32 FOR UPDATE SKIP LOCKED)
                )
                INSERT INTO \(schema).account_checks (ip_hash, checked_at) VALUES (\(ipHash), \(now))
                """
            )
            return nil
        }
    }

    /// The advisory-lock class of password attempts (`pg_advisory_xact_lock(class, key)`); the
    /// key is a hash of the email's hash, so two emails rarely share a lock (and then only wait
    /// for each other's few-millisecond reservation).
    private static let passwordAttemptLockClass: Int32 = 0x1D_0001

    /// Reserves one password attempt for `emailHash` before the password is hashed, so that
    /// concurrent guesses cannot all pass a check made before any of them is recorded: under a
    /// lock per email, counts the failures since `windowStart` and, below `limit`, records this
    /// attempt as one (a success clears them all: ``recordSignIn``, ``changePassword``).
    /// Returns nil when reserved, or the oldest of the `limit` failures that lock the email out.
    /// Forgets this email's failures older than the window.
    /// What ``reservePasswordAttempt(emailHash:at:windowStart:limit:maxConsecutive:)`` decided.
    enum PasswordAttemptReservation: Equatable {
        /// The attempt is counted (as a failure until a success clears it): hash away.
        case reserved
        /// `limit` failures lie in the window; the oldest of them.
        case windowFull(oldestCounted: Date)
        /// `maxConsecutive` failures since the last success: locked until a reset or an unlock.
        case factorLocked
    }

    func reservePasswordAttempt(
        emailHash: [UInt8],
        at now: Date,
        windowStart: Date,
        limit: Int,
        maxConsecutive: Int
    ) async throws -> PasswordAttemptReservation {
        try await pool.transaction { connection in
            // As in spendAccountCheck: the lock in a statement of its own, sent with the count.
            try connection.executeWithNext(
                """
                SELECT pg_advisory_xact_lock(\(Self.passwordAttemptLockClass)::int4,
                    hashtext(encode(\(emailHash)::bytea, 'hex')))
                """
            )
            let rows = try connection.execute(
                """
                SELECT (SELECT failures FROM \(schema).password_consecutive_failures WHERE email_hash = \(emailHash)),
                    (SELECT failed_at FROM \(schema).password_failures
                        WHERE email_hash = \(emailHash) AND failed_at > \(windowStart)
                        ORDER BY failed_at DESC OFFSET \(max(0, limit - 1)) LIMIT 1)
                """
            )
            if let consecutive = try rows[0][0].decode(Int?.self), consecutive >= maxConsecutive {
                return .factorLocked
            }
            // The limit-th most recent failure in the window, when there are that many.
            if let oldest = try rows[0][1].decode(Date?.self) { return .windowFull(oldestCounted: oldest) }
            try connection.execute(
                """
                WITH old AS (
                    DELETE FROM \(schema).password_failures WHERE email_hash = \(emailHash) AND failed_at <= \(windowStart)
                ), consecutive AS (
                    INSERT INTO \(schema).password_consecutive_failures AS c (email_hash, failures, last_failed_at)
                    VALUES (\(emailHash), 1, \(now))
                    ON CONFLICT (email_hash) DO UPDATE SET failures = c.failures + 1, last_failed_at = EXCLUDED.last_failed_at
                )
                INSERT INTO \(schema).password_failures (email_hash, failed_at) VALUES (\(emailHash), \(now))
                """
            )
            return .reserved
        }
    }

    /// Forgets every counted failure of `emailHash`, windowed and consecutive: a success, a
    /// completed reset or change, an operator's unlock, a deletion.
    func clearPasswordFailures(emailHash: [UInt8], on connection: PostgresConnection) throws {
        try connection.execute(
            """
            WITH windowed AS (DELETE FROM \(schema).password_failures WHERE email_hash = \(emailHash))
            DELETE FROM \(schema).password_consecutive_failures WHERE email_hash = \(emailHash)
            """
        )
    }

    /// `authctl users unlock`: clears the failures of `emailHash`; whether a consecutive-failure
    /// lock (at `maxConsecutive`) was lifted.
    func unlockPassword(emailHash: [UInt8], maxConsecutive: Int) async throws -> Bool {
        try await pool.transaction { connection in
            let rows = try connection.execute(
                "SELECT failures FROM \(schema).password_consecutive_failures WHERE email_hash = \(emailHash)"
            )
            let wasLocked = try rows.first.map { try $0[0].int >= maxConsecutive } ?? false
            try self.clearPasswordFailures(emailHash: emailHash, on: connection)
            return wasLocked
        }
    }

    /// A successful sign-in: clears the failures, stores an upgraded hash if given, audits.
    func recordSignIn(
        emailHash: [UInt8],
        userID: UUID,
        rehashed: String?,
        oldHash: String,
        audit: AuditEntry
    )
        async throws
    {
        try await pool.transaction { connection in
            try self.clearPasswordFailures(emailHash: emailHash, on: connection)
            if let rehashed {
                // Only if the hash is still the one verified (a concurrent change wins).
                let updated = try connection.execute(
                    """
                    UPDATE \(schema).users SET password_hash = \(rehashed)::text
                    WHERE id = \(userID) AND password_hash = \(oldHash)::text AND deleted_at IS NULL
                    """
                )
                if updated.affectedRows == 1 {
                    var entry = audit
                    entry.kind = .passwordRehashed
                    try self.insertAudit(entry, on: connection)
                }
            }
            try self.insertAudit(audit, on: connection)
        }
    }

    /// Sets the password of the live account with `email` (reset after a proved email code):
    /// the email counts as verified, the failures are cleared.
    func resetPassword(
        email: String,
        emailHash: [UInt8],
        passwordHash: String,
        audit: AuditEntry
    ) async throws
        -> UserRecord?
    {
        try await pool.transaction { connection in
            let rows = try connection.execute(
                """
                UPDATE \(schema).users SET password_hash = \(passwordHash)::text, email_verified = true,
                    updated_at = \(audit.occurredAt)
                WHERE email = \(email)::text AND deleted_at IS NULL RETURNING id
                """
            )
            guard let row = rows.first else { return nil }
            let id = try row[0].uuid
            try self.clearPasswordFailures(emailHash: emailHash, on: connection)
            var entry = audit
            entry.userID = id
            try self.insertAudit(entry, on: connection)
            return try self.user(id: id, on: connection)
        }
    }

    /// Replaces the hash of `userID` if it is still `oldHash` (nil: the account had none) and, as
    /// a successful sign-in does, clears the failures of `emailHash` (the account's email, if any).
    func changePassword(
        userID: UUID,
        emailHash: [UInt8]?,
        oldHash: String?,
        newHash: String,
        audit: AuditEntry
    )
        async throws -> Bool
    {
        try await pool.transaction { connection in
            let rows = try connection.execute(
                """
                UPDATE \(schema).users SET password_hash = \(newHash)::text, updated_at = \(audit.occurredAt)
                WHERE id = \(userID) AND deleted_at IS NULL AND password_hash IS NOT DISTINCT FROM \(oldHash)::text
                """
            )
            guard rows.affectedRows == 1 else { return false }
            if let emailHash {
                try self.clearPasswordFailures(emailHash: emailHash, on: connection)
            }
            try self.insertAudit(audit, on: connection)
            return true
        }
    }

    // MARK: Profile

    func updateProfile(userID: UUID, changes: ProfileChanges, audit: AuditEntry) async throws -> UserRecord? {
        try await pool.transaction { connection in
            let rows = try connection.execute(
                """
                UPDATE \(schema).users SET
                    display_name = COALESCE(\(changes.displayName)::text, display_name),
                    photo_url = COALESCE(\(changes.photoURL)::text, photo_url),
                    onboarding_completed = COALESCE(\(changes.onboardingCompleted)::boolean, onboarding_completed),
                    updated_at = \(audit.occurredAt)
                WHERE id = \(userID) AND deleted_at IS NULL RETURNING id
                """
            )
            guard !rows.isEmpty else { return nil }
            try self.insertAudit(audit, on: connection)
            return try self.user(id: userID, on: connection)
        }
    }

    // MARK: Deletion

    /// Deletes the account: its personal fields are cleared (the row stays as a tombstone),
    /// its provider identities and sign-in failures are deleted, and its audit rows lose their
    /// client IP. Returns false when it was already deleted; nil when there is no such user.
    func delete(userID: UUID, audit: AuditEntry) async throws -> Bool? {
        try await pool.transaction { connection in
            let rows = try connection.execute(
                "SELECT email, deleted_at IS NOT NULL FROM \(schema).users WHERE id = \(userID) FOR UPDATE"
            )
            guard let row = rows.first else { return nil }
            if try row[1].bool { return false }
            if let email = try row[0].decode(String?.self) {
                try self.clearPasswordFailures(emailHash: SHA256.hash(email), on: connection)
            }
            try connection.execute("DELETE FROM \(schema).provider_identities WHERE user_id = \(userID)")
            try connection.execute(
                """
                UPDATE \(schema).users SET phone = NULL, email = NULL, phone_verified = false, email_verified = false,
                    display_name = '', photo_url = '', onboarding_completed = false, password_hash = NULL,
                    updated_at = \(audit.occurredAt), deleted_at = \(audit.occurredAt)
                WHERE id = \(userID)
                """
            )
            try connection.execute(
                "UPDATE \(schema).audit_events SET client_ip = '' WHERE user_id = \(userID) AND client_ip <> ''"
            )
            var entry = audit
            entry.clientIP = ""
            try self.insertAudit(entry, on: connection)
            return true
        }
    }

    // MARK: Provider identities

    /// What ``link(_:to:audit:)`` found.
    enum LinkOutcome: Equatable {
        case linked
        /// This account had it already.
        case alreadyThis
        /// Another account has it.
        case otherAccount
        /// No live account `userID`.
        case noUser
    }

    /// Links `identity` to the live account `userID`, audited as `provider_linked`.
    func link(_ identity: ProviderIdentity, to userID: UUID, audit: AuditEntry) async throws -> LinkOutcome {
        try await pool.transaction { connection in
            guard
                try connection.execute(
                    "SELECT 1 FROM \(schema).users WHERE id = \(userID) AND deleted_at IS NULL FOR UPDATE"
                ).first != nil
            else { return .noUser }
            let inserted = try connection.execute(
                """
                INSERT INTO \(schema).provider_identities (provider, subject, user_id, email, created_at)
                VALUES (\(identity.provider.rawValue)::text, \(identity.subject)::text, \(userID), \(identity.email)::text,
                    \(audit.occurredAt))
                ON CONFLICT DO NOTHING RETURNING 1
                """
            )
            if inserted.isEmpty {
                let owner = try connection.execute(
                    """
                    SELECT user_id FROM \(schema).provider_identities
                    WHERE provider = \(identity.provider.rawValue)::text AND subject = \(identity.subject)::text
                    """
                ).first.map { try $0[0].uuid }
                return owner == userID ? .alreadyThis : .otherAccount
            }
            var entry = audit
            entry.userID = userID
            entry.kind = .providerLinked
            try self.insertAudit(entry, on: connection)
            return .linked
        }
    }

    /// What ``unlink(provider:from:audit:)`` found.
    enum UnlinkOutcome: Equatable {
        case unlinked
        case notLinked
        /// It is the account's only way to sign in.
        case lastIdentity
    }

    /// Unlinks the account's identities of `provider`, unless no way to sign in would remain (a
    /// verified phone or email, a password, another provider), audited as `provider_unlinked`.
    func unlink(provider: IdentityProvider, from userID: UUID, audit: AuditEntry) async throws -> UnlinkOutcome {
        try await pool.transaction { connection in
            guard
                let row = try connection.execute(
                    """
                    SELECT (u.phone IS NOT NULL AND u.phone_verified) OR (u.email IS NOT NULL AND u.email_verified)
                            OR u.password_hash IS NOT NULL,
                        (SELECT count(*) FROM \(schema).provider_identities p
                            WHERE p.user_id = u.id AND p.provider = \(provider.rawValue)::text),
                        (SELECT count(*) FROM \(schema).provider_identities p
                            WHERE p.user_id = u.id AND p.provider <> \(provider.rawValue)::text)
                    FROM \(schema).users u WHERE u.id = \(userID) AND u.deleted_at IS NULL FOR UPDATE
                    """
                ).first
            else { return .notLinked }
            guard try row[1].int > 0 else { return .notLinked }
            guard try row[0].bool || row[2].int > 0 else { return .lastIdentity }
            try connection.execute(
                """
                DELETE FROM \(schema).provider_identities
                WHERE user_id = \(userID) AND provider = \(provider.rawValue)::text
                """
            )
            var entry = audit
            entry.userID = userID
            entry.kind = .providerUnlinked
            try self.insertAudit(entry, on: connection)
            return .unlinked
        }
    }

    /// The provider identities linked to `userID`, by provider name then link time.
    func providerIdentities(userID: UUID) async throws -> [LinkedIdentity] {
        try await pool.query(
            """
            SELECT provider, subject, email, created_at FROM \(schema).provider_identities
            WHERE user_id = \(userID) ORDER BY provider, created_at
            """
        ).map { row in
            LinkedIdentity(
                provider: try row[0].string,
                subject: try row[1].string,
                email: try row[2].decode(String?.self),
                createdAt: try row[3].date
            )
        }
    }

    /// Remembers a used ID token until it expires; false when it was already used.
    func rememberToken(provider: IdentityProvider, key: String, expiresAt: Date, now: Date) async throws -> Bool {
        let rows = try await pool.query(
            """
            WITH expired AS (
                DELETE FROM \(schema).used_id_tokens WHERE expires_at < \(now)
            )
            INSERT INTO \(schema).used_id_tokens (provider, token_key, expires_at)
            VALUES (\(provider.rawValue)::text, \(key)::text, \(expiresAt))
            ON CONFLICT DO NOTHING RETURNING 1
            """
        )
        return rows.count == 1
    }

    /// Finds the user of a provider identity, links it to the account with the same verified
    /// email when both sides verified that email, or creates a user. Concurrent first sign-ins
    /// with one identity make one user: the loser's insert of the identity finds the winner's.
    func signIn(with identity: ProviderIdentity, newID: UUID, audit: AuditEntry) async throws -> ProviderSignInResult {
        for _ in 0..<5 {
            do {
                return try await signInOnce(with: identity, newID: newID, audit: audit)
            } catch is RetrySignIn {
                continue
            } catch let error as PostgresError where error.code == .uniqueViolation {
                // A sign-up took the email between our read and our insert: decide again.
                continue
            }
        }
        throw IdentityError(.unavailable, "The sign-in did not settle; try again.")
    }

    private func signInOnce(
        with identity: ProviderIdentity,
        newID: UUID,
        audit: AuditEntry
    ) async throws
        -> ProviderSignInResult
    {
        try await pool.transaction { connection in
            if let existing = try connection.execute(
                """
                SELECT user_id FROM \(schema).provider_identities
                WHERE provider = \(identity.provider.rawValue)::text AND subject = \(identity.subject)::text
                """
            ).first {
                let id = try existing[0].uuid
                var entry = audit
                entry.userID = id
                try self.insertAudit(entry, on: connection)
                guard let user = try self.user(id: id, on: connection) else {
                    throw IdentityError(.internal, "A provider identity points to a missing user.")
                }
                return ProviderSignInResult(user: user, created: false, linked: false)
            }

            var owner: (id: UUID, emailVerified: Bool)?
            if let email = identity.email {
                owner = try connection.execute(
                    "SELECT id, email_verified FROM \(schema).users WHERE email = \(email)::text AND deleted_at IS NULL"
                ).first.map { (try $0[0].uuid, try $0[1].bool) }
            }
            let linkTo = (owner?.emailVerified == true && identity.emailVerified) ? owner?.id : nil
            let userID = linkTo ?? newID
            if linkTo == nil {
                // A separate user holds no email while another account has it.
                let email = owner == nil ? identity.email : nil
                try connection.execute(
                    """
                    INSERT INTO \(schema).users (id, email, email_verified, display_name, photo_url, created_at, updated_at)
                    VALUES (\(newID), \(email)::text, \(email != nil && identity.emailVerified),
                        \(identity.name ?? "")::text, \(identity.pictureURL ?? "")::text, \(audit.occurredAt),
                        \(audit.occurredAt))
                    """
                )
            }
            let inserted = try connection.execute(
                """
                INSERT INTO \(schema).provider_identities (provider, subject, user_id, email, created_at)
                VALUES (\(identity.provider.rawValue)::text, \(identity.subject)::text, \(userID),
                    \(identity.email)::text, \(audit.occurredAt))
                ON CONFLICT DO NOTHING RETURNING 1
                """
            )
            // Another sign-in with this identity committed first: undo ours, read theirs.
            guard inserted.count == 1 else { throw RetrySignIn() }
            var entry = audit
            entry.userID = userID
            if linkTo == nil {
                entry.kind = .signUp
            } else {
                var link = audit
                link.userID = userID
                link.kind = .providerLinked
                try self.insertAudit(link, on: connection)
            }
            try self.insertAudit(entry, on: connection)
            guard let user = try self.user(id: userID, on: connection) else {
                throw IdentityError(.internal, "The user just written is missing.")
            }
            return ProviderSignInResult(user: user, created: linkTo == nil, linked: linkTo != nil)
        }
    }
}

/// Rolls a provider sign-in's transaction back so that it runs again.
private struct RetrySignIn: Error {}
