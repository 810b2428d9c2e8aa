import AuthConcurrency
import AuthConfiguration
import AuthCrypto
import AuthPostgres
import AuthTime
import Logging
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One signing key as the database holds it, with its private key unwrapped.
struct SigningKey: Sendable {
    let kid: String
    let privateKey: ES256PrivateKey
    var publicKey: ES256PublicKey { privateKey.publicKey }
    /// Published (in the JWKS) from here.
    let createdAt: Date
    /// Signs from here.
    let signsFrom: Date
    /// A newer key signs from here.
    let signsUntil: Date?
    /// Out of the JWKS from here: every token it signed has expired.
    let retireAfter: Date?

    func isPublished(at now: Date) -> Bool {
        createdAt <= now && (retireAfter.map { now < $0 } ?? true)
    }
}

/// The signing keys read at one moment. Which key signs and which keys verify is a function
/// of these rows and the time, so replicas that read the same rows agree.
struct SigningKeySet: Sendable {
    /// Sorted by `signsFrom`.
    let keys: [SigningKey]
    /// When they were read (by the service's clock).
    let fetchedAt: Date

    /// The key that signs at `now`: the published key that started signing last.
    func signingKey(at now: Date) -> SigningKey? {
        keys.last { $0.signsFrom <= now && $0.isPublished(at: now) }
    }

    /// The public key for `kid`, if it is published at `now`.
    func verificationKey(kid: String, at now: Date) -> ES256PublicKey? {
        keys.first { $0.kid == kid && $0.isPublished(at: now) }?.publicKey
    }

    /// The JWK Set of the keys published at `now`, newest first.
    func jwks(at now: Date) -> JWKSet {
        JWKSet(keys: keys.reversed().filter { $0.isPublished(at: now) }.map { $0.publicKey.jwk(kid: $0.kid) })
    }
}

/// What a rewrap did.
struct SigningKeyRewrap: Sendable {
    /// Keys that were wrapped under the previous master key and now are under the current one.
    var rewrapped: [String]
    /// Keys that already were under the current master key.
    var alreadyCurrent: [String]
}

/// What a rotation did.
struct SigningKeyRotation: Sendable {
    var newKeyID: String
    var signsFrom: Date
    var retiringKeyIDs: [String]
}

/// The access-token signing keys: created at first start, rotated on request, read from the
/// database and cached for ``SessionServiceConfiguration/signingKeyCacheLifetime`` so every
/// replica signs with the key the database says.
///
/// Private keys are stored wrapped: AES-256-GCM under the master key's wrapping key, with
/// `"auth.session.v1 signing-key" ‖ 0 ‖ kid` as additional data, so a wrapped key cannot be
/// moved to another kid.
final class SigningKeyStore: Sendable {
    private let pool: PostgresPool
    private let schema: PostgresSchema
    private let wrapKey: [UInt8]
    /// The previous master key's wrapping key, while a master-key rotation is under way.
    private let previousWrapKey: [UInt8]?
    private let configuration: SessionServiceConfiguration
    private let clock: any WallClock
    private let logger: Logger
    private let state = Mutex(CacheState())
    /// One read of the keys at a time; ``invalidate()`` lets the next caller start a new one.
    private let loads = SingleFlight<SigningKeySet>()

    private struct CacheState {
        var snapshot: SigningKeySet?
        /// Unwrapped keys by kid: unwrapping is done once per key and process.
        var unwrapped: [String: ES256PrivateKey] = [:]
        /// Bumped by invalidate(), so a load started before it does not overwrite a newer one.
        var epoch = 0
    }

    init(pool: PostgresPool, configuration: SessionServiceConfiguration, clock: any WallClock, logger: Logger) {
        self.pool = pool
        self.schema = PostgresSchema(configuration.schema)
        self.wrapKey = configuration.masterKey.signingKeyWrapKey
        self.previousWrapKey = configuration.previousMasterKey?.signingKeyWrapKey
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
    }

    private var table: PostgresStatement { "\(schema).signing_keys" }

    /// Takes the transaction-scoped advisory lock that serializes key creation and rotation
    /// across replicas.
    private func lockKeys(_ connection: PostgresConnection) throws {
        try connection.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(\("auth.session.signing_keys." + schema.name), 0))"
        )
    }

    // MARK: Start-up

    /// Creates the first signing key when the database has none that is open-ended, then
    /// reads the keys (which fails when the master key cannot unwrap them).
    ///
    /// Replicas starting together are serialized by an advisory lock, and a unique index
    /// allows only one key without `signs_until`, so only one first key is ever created.
    func bootstrap() async throws {
        let now = clock.microsecondNow()
        let table = self.table
        let created: String? = try await pool.transaction { connection in
            try self.lockKeys(connection)
            let open = try connection.execute("SELECT kid FROM \(table) WHERE signs_until IS NULL")
            guard open.isEmpty else { return nil }
            let key = try self.newKeyRow(now: now, signsFrom: now)
            try self.insert(key, connection: connection)
            return key.kid
        }
        if let created {
            logger.notice("Created the first access-token signing key", metadata: ["session.kid": "\(created)"])
        }
        do {
            _ = try await load()
        } catch let error as CryptoError where error.code == .authenticationFailure {
            throw ConfigurationError(
                variable: "AUTH_MASTER_KEY",
                problem: previousWrapKey == nil
                    ? "does not open the signing keys stored in the database: it differs from the key they were "
                        + "wrapped with (while rotating the master key, set AUTH_MASTER_KEY_PREVIOUS to the old key "
                        + "until `authctl keys rewrap` has run; docs/session.md)"
                    : "neither it nor AUTH_MASTER_KEY_PREVIOUS opens the signing keys stored in the database"
            )
        }
    }

    // MARK: Reading

    /// The current keys, from the cache while it is fresh. When reading fails and an older
    /// snapshot exists, that one is used (and the read is tried again on the next call).
    func current() async throws -> SigningKeySet {
        let now = clock.microsecondNow()
        let lifetime = configuration.signingKeyCacheLifetime.timeInterval
        if let fresh = snapshot(fetchedWithin: lifetime, of: now) { return fresh }
        let (stale, epoch) = state.withLock { ($0.snapshot, $0.epoch) }
        do {
            // Checked again under the lock that starts reads (see `SingleFlight`).
            return try await loads.run(reusing: { snapshot(fetchedWithin: lifetime, of: now) }) {
                try await self.load(epoch: epoch)
            }
        } catch {
            guard let stale else { throw error }
            logger.warning(
                "Could not re-read the signing keys; using the ones read before",
                metadata: ["error": "\(error)"]
            )
            return stale
        }
    }

    private func snapshot(fetchedWithin lifetime: TimeInterval, of now: Date) -> SigningKeySet? {
        state.withLock { state in
            guard let snapshot = state.snapshot, abs(now.timeIntervalSince(snapshot.fetchedAt)) < lifetime else {
                return nil
            }
            return snapshot
        }
    }

    /// Forgets the cached keys (after a rotation by this replica).
    func invalidate() {
        state.withLock {
            $0.snapshot = nil
            $0.epoch += 1
        }
        loads.forget()
    }

    private func load(epoch: Int? = nil) async throws -> SigningKeySet {
        let set = try await read()
        state.withLock { state in
            if epoch == nil || epoch == state.epoch { state.snapshot = set }
        }
        return set
    }

    private func read() async throws -> SigningKeySet {
        let now = clock.microsecondNow()
        let rows = try await pool.query(
            """
            SELECT kid, private_key_sealed, created_at, signs_from, signs_until, retire_after
            FROM \(table) WHERE retire_after IS NULL OR retire_after > \(now) ORDER BY signs_from, created_at, kid
            """
        )
        var keys: [SigningKey] = []
        for row in rows {
            let kid = try row[0].string
            let known = state.withLock { $0.unwrapped[kid] }
            let privateKey: ES256PrivateKey
            if let known {
                privateKey = known
            } else {
                privateKey = try unwrap(try row[1].bytes, kid: kid)
                state.withLock { $0.unwrapped[kid] = privateKey }
            }
            keys.append(
                SigningKey(
                    kid: kid,
                    privateKey: privateKey,
                    createdAt: try row[2].date,
                    signsFrom: try row[3].date,
                    signsUntil: try row[4].decode(Date?.self),
                    retireAfter: try row[5].decode(Date?.self)
                )
            )
        }
        return SigningKeySet(keys: keys, fetchedAt: now)
    }

    // MARK: Rotation

    /// Adds a key that is published now and signs after the publish delay; the key that was
    /// open-ended gets `signs_until` = the new key's start and `retire_after` = that plus the
    /// access-token lifetime and the clock-skew tolerance. Keys already retired are deleted.
    /// Records a `signing_key_rotated` security event in the same transaction.
    func rotate(caller: String) async throws -> SigningKeyRotation {
        let now = clock.microsecondNow()
        let table = self.table
        let schema = self.schema
        let delay = configuration.signingKeyPublishDelay.timeInterval
        let tail = configuration.accessTokenLifetime.timeInterval + configuration.clockSkewTolerance.timeInterval
        let rotation = try await pool.transaction { connection -> SigningKeyRotation in
            try self.lockKeys(connection)
            // Strictly after every existing key's start, even if the publish delay was lowered
            // since a pending key was added: "the key with the latest signs_from signs" must
            // pick one key on every replica.
            let latest = try connection.execute("SELECT max(signs_from) FROM \(table)")
            let latestStart = try latest.first.flatMap { try $0[0].decode(Date?.self) }
            let signsFrom = max(now.addingTimeInterval(delay), latestStart.map { $0.addingTimeInterval(1) } ?? now)
            let retiring = try connection.execute(
                """
                UPDATE \(table) SET signs_until = \(signsFrom), retire_after = \(signsFrom.addingTimeInterval(tail))
                WHERE signs_until IS NULL RETURNING kid
                """
            ).map { try $0[0].string }
            try connection.execute("DELETE FROM \(table) WHERE retire_after <= \(now)")
            let key = try self.newKeyRow(now: now, signsFrom: signsFrom)
            try self.insert(key, connection: connection)
            try SecurityEvent(
                kind: .signingKeyRotated,
                occurredAt: now,
                details: [
                    "caller": .string(caller), "new_kid": .string(key.kid),
                    "signs_from": .string(signsFrom.ISO8601Format()), "retiring_kids": .strings(retiring),
                ]
            ).insert(schema: schema, connection: connection)
            return SigningKeyRotation(newKeyID: key.kid, signsFrom: signsFrom, retiringKeyIDs: retiring)
        }
        invalidate()
        logger.notice(
            "Rotated the access-token signing key",
            metadata: [
                "session.kid": "\(rotation.newKeyID)", "session.signs_from": "\(rotation.signsFrom)",
                "session.retiring_kids": "\(rotation.retiringKeyIDs.joined(separator: ","))",
            ]
        )
        return rotation
    }

    // MARK: Master-key rotation

    /// Wraps every stored key under the current master key: keys that only the previous master
    /// key opens are re-wrapped, in one transaction under the key lock, so a rotation cannot
    /// interleave. Fails (changing nothing) when a key opens with neither master key.
    /// Records a `signing_keys_rewrapped` security event in the same transaction.
    func rewrap(caller: String) async throws -> SigningKeyRewrap {
        let now = clock.microsecondNow()
        let table = self.table
        let schema = self.schema
        return try await pool.transaction { connection -> SigningKeyRewrap in
            try self.lockKeys(connection)
            let rows = try connection.execute("SELECT kid, private_key_sealed FROM \(table) ORDER BY kid FOR UPDATE")
            var result = SigningKeyRewrap(rewrapped: [], alreadyCurrent: [])
            for row in rows {
                let kid = try row[0].string
                let sealed = try row[1].bytes
                let aad = Self.additionalData(kid: kid)
                if (try? AESGCM.open(sealed, key: self.wrapKey, aad: aad)) != nil {
                    result.alreadyCurrent.append(kid)
                    continue
                }
                guard let previousWrapKey = self.previousWrapKey,
                    let raw = try? AESGCM.open(sealed, key: previousWrapKey, aad: aad)
                else {
                    throw SessionError(
                        .internal,
                        "Signing key \(kid) opens with neither AUTH_MASTER_KEY nor AUTH_MASTER_KEY_PREVIOUS."
                    )
                }
                let rewrapped = try AESGCM.seal(raw, key: self.wrapKey, aad: aad)
                try connection.execute("UPDATE \(table) SET private_key_sealed = \(rewrapped) WHERE kid = \(kid)")
                result.rewrapped.append(kid)
            }
            try SecurityEvent(
                kind: .signingKeysRewrapped,
                occurredAt: now,
                details: [
                    "caller": .string(caller), "rewrapped_kids": .strings(result.rewrapped),
                    "already_current_kids": .strings(result.alreadyCurrent),
                ]
            ).insert(schema: schema, connection: connection)
            return result
        }
    }

    // MARK: Rows

    private struct KeyRow: Sendable {
        var kid: String
        var sealed: [UInt8]
        var publicJWK: String
        var createdAt: Date
        var signsFrom: Date
    }

    private func newKeyRow(now: Date, signsFrom: Date) throws -> KeyRow {
        let key = try ES256PrivateKey()
        let kid = Base64URL.encode(SecureRandom.bytes(count: 12))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let jwk = String(decoding: try encoder.encode(key.publicKey.jwk(kid: kid)), as: UTF8.self)
        return KeyRow(kid: kid, sealed: try wrap(key, kid: kid), publicJWK: jwk, createdAt: now, signsFrom: signsFrom)
    }

    private func insert(_ key: KeyRow, connection: PostgresConnection) throws {
        try connection.execute(
            """
            INSERT INTO \(table) (kid, algorithm, private_key_sealed, public_jwk, created_at, signs_from)
            VALUES (\(key.kid), 'ES256', \(key.sealed), \(key.publicJWK), \(key.createdAt), \(key.signsFrom))
            """
        )
    }

    private func wrap(_ key: ES256PrivateKey, kid: String) throws(CryptoError) -> [UInt8] {
        try AESGCM.seal(try key.rawRepresentation, key: wrapKey, aad: Self.additionalData(kid: kid))
    }

    /// Opens a stored key with the current master key, else (during a master-key rotation) the
    /// previous one.
    private func unwrap(_ sealed: [UInt8], kid: String) throws(CryptoError) -> ES256PrivateKey {
        let aad = Self.additionalData(kid: kid)
        let raw: [UInt8]
        do {
            raw = try AESGCM.open(sealed, key: wrapKey, aad: aad)
        } catch  where error.code == .authenticationFailure && previousWrapKey != nil {
            raw = try AESGCM.open(sealed, key: previousWrapKey!, aad: aad)
        }
        return try ES256PrivateKey(rawRepresentation: raw)
    }

    private static func additionalData(kid: String) -> [UInt8] {
        Array("auth.session.v1 signing-key".utf8) + [0] + Array(kid.utf8)
    }
}
