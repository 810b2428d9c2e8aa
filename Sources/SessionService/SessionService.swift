import AuthAPI
import AuthAccessToken
import AuthConfiguration
import AuthCrypto
import AuthPostgres
import AuthProtobuf
import AuthRPC
import AuthServiceCore
import AuthText
import AuthTime
import Logging

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `auth.session.v1.Session`: turns a proven identity into a session with a short-lived access
/// token (JWT, ES256, `typ: at+jwt`) and a rotating refresh token; validates access tokens,
/// revokes and lists sessions, publishes the JWKS and rotates the signing key.
/// docs/session.md describes the rules, the schema and the error reasons.
///
/// Create it with ``start(database:configuration:clock:logger:)``, which applies the schema's
/// migrations and creates the first signing key when there is none, then register it with an
/// `RPCRouter`.
public final class SessionService: Auth_Session_V1_Session.ServiceProtocol {
    public let configuration: SessionServiceConfiguration
    let store: SessionStore
    let keys: SigningKeyStore
    let vault: SuccessorVault
    let verifier: AccessTokenVerifier
    let clock: any WallClock
    let logger: Logger

    /// The schema's migrations, embedded in the executable from `Migrations/` (a test checks that
    /// this list names every file there).
    public static func migrations() throws -> [PostgresMigration] {
        try PostgresMigration.load(files: [
            "0001_create_session_schema.sql": PackageResources._001_create_session_schema_sql,
            "0002_refresh_hot_path.sql": PackageResources._002_refresh_hot_path_sql,
            "0003_security_events_without_user.sql": PackageResources._003_security_events_without_user_sql,
            "0004_supabase_token_format.sql": PackageResources._004_supabase_token_format_sql,
            "0005_column_checks_in_domains.sql": PackageResources._005_column_checks_in_domains_sql,
        ])
    }

    /// Applies the migrations to ``SessionServiceConfiguration/schema``, creates the first
    /// signing key if the database has none, reads the keys and returns the service.
    ///
    /// - Throws: ``ConfigurationError`` when `AUTH_MASTER_KEY` cannot unwrap the stored
    ///   keys; database errors as they come.
    public static func start(
        database: PostgresPool,
        configuration: SessionServiceConfiguration,
        clock: any WallClock = SystemWallClock(),
        logger: Logger
    ) async throws -> SessionService {
        try await PostgresMigrator(pool: database, logger: logger)
            .migrate(schema: configuration.schema, migrations: migrations())
        let service = SessionService(database: database, configuration: configuration, clock: clock, logger: logger)
        try await service.keys.bootstrap()
        return service
    }

    init(database: PostgresPool, configuration: SessionServiceConfiguration, clock: any WallClock, logger: Logger) {
        self.configuration = configuration
        self.store = SessionStore(pool: database, schema: configuration.schema)
        self.keys = SigningKeyStore(pool: database, configuration: configuration, clock: clock, logger: logger)
        self.vault = SuccessorVault(
            masterKey: configuration.masterKey,
            previousMasterKey: configuration.previousMasterKey
        )
        self.verifier = AccessTokenVerifier(
            issuer: configuration.issuer,
            audience: configuration.audience,
            clockSkewTolerance: configuration.clockSkewTolerance
        )
        self.clock = clock
        self.logger = logger
    }

    /// Who may call each method (checked by the RPC router before a handler runs; a refused
    /// caller gets PERMISSION_DENIED `caller_not_allowed`). Writes come from the gateway, and
    /// from identity where an account change ends sessions; key rotation only from operators.
    public var allowedCallers: Auth_Session_V1_Session.AllowedCallersByMethod {
        .init(
            // Trimmed to the callers of today (issue 19): identity and otp-dispatch call no
            // session method.
            issue: .only([CallerName.gateway]),
            refresh: .only([CallerName.gateway]),
            validate: .only([CallerName.gateway]),
            revoke: .only([CallerName.gateway]),
            revokeAll: .only([CallerName.gateway]),
            listSessions: .only([CallerName.gateway]),
            getJWKS: .only([CallerName.gateway]),
            // Operator methods: only configuration.keyRotationCaller (authctl). The handler
            // checks it (`requireOperator`) rather than the router, so that every refused caller
            // is also recorded as a security event, which the router cannot write.
            rotateSigningKey: .anyAuthenticated,
            rewrapSigningKeys: .anyAuthenticated,
            checkSession: .only([CallerName.gateway])
        )
    }

    // MARK: Issue

    public func issue(
        request: Auth_Session_V1_IssueRequest,
        context: ServerContext
    ) async throws -> Auth_Session_V1_IssueResponse {
        let input = try IssueInput(validating: request, context: context)
        let now = clock.microsecondNow()
        let key = try await signingKey(at: now)
        let sessionID = SecureRandom.uuid()
        let expiresAt = now.addingTimeInterval(configuration.sessionLifetime.timeInterval)
        let refresh = RefreshToken.generate()
        let refreshExpiresAt = min(
            now.addingTimeInterval(configuration.refreshTokenLifetime.timeInterval),
            expiresAt
        )
        let tokens = try issueTokens(
            userID: input.userID,
            amr: input.amr,
            supabase: input.supabase.map {
                SupabaseClaims(email: $0.email, phone: $0.phone, authenticatedAt: now.unixSeconds)
            },
            sessionID: sessionID,
            refresh: refresh,
            refreshExpiresAt: refreshExpiresAt,
            now: now,
            key: key
        )
        try await store.insert(
            NewSession(
                id: sessionID,
                userID: input.userID,
                amr: input.amr,
                device: input.device,
                clientIP: input.clientIP,
                createdAt: now,
                expiresAt: expiresAt,
                refreshTokenHash: refresh.hash,
                refreshTokenExpiresAt: refreshExpiresAt,
                supabase: input.supabase
            )
        )
        return Auth_Session_V1_IssueResponse(tokens: tokenPair(tokens, sessionID: sessionID, now: now))
    }

    // MARK: Refresh

    /// Rotation: one read of the token and its session, then one compare-and-set statement
    /// that advances the session's generation and stores the successor with the pair sealed
    /// for the presented token (the successor's row is what marks the token used). Both run
    /// on one pooled connection, with the signing in between, so a refresh costs one lease.
    /// A lost compare-and-set (a concurrent refresh or revoke won) reads again and decides
    /// again, which then finds the winner's successor (grace window) or the revocation. See
    /// ``RefreshDecision``.
    public func refresh(
        request: Auth_Session_V1_RefreshRequest,
        context: ServerContext
    ) async throws -> Auth_Session_V1_RefreshResponse {
        var validator = FieldValidator()
        if request.refreshToken.isEmpty {
            validator.fail("refresh_token", "required", "A refresh token is required.")
        }
        let ip = validator.clientIP(request.clientIP, context: context)
        let device = request.device ?? Auth_Session_V1_Device()
        validator.text(device.platform, field: "device.platform", maxBytes: SessionLimits.maxDevicePlatformBytes)
        validator.text(device.name, field: "device.name", maxBytes: SessionLimits.maxDeviceNameBytes)
        try validator.check()
        guard let presented = RefreshToken(string: request.refreshToken) else {
            throw SessionError(.invalidRefreshToken, "The refresh token is not valid.")
        }
        let now = clock.microsecondNow()
        let key = try await signingKey(at: now)
        let caller = context.authenticatedCaller
        let (tokens, sessionID, userID) = try await store.withConnection { queries in
            try self.refresh(
                presented,
                clientIP: ip,
                device: device,
                now: now,
                key: key,
                queries: queries,
                caller: caller
            )
        }
        return Auth_Session_V1_RefreshResponse(
            tokens: tokenPair(tokens, sessionID: sessionID, now: now),
            userID: userID
        )
    }

    /// The refresh itself, on one connection (see ``refresh(request:context:)``).
    private func refresh(
        _ presented: RefreshToken,
        clientIP ip: String,
        device: Auth_Session_V1_Device,
        now: Date,
        key: SigningKey,
        queries: SessionStore.Queries,
        caller: String
    ) throws -> (IssuedTokens, sessionID: UUID, userID: String) {
        let presentedHash = presented.hash
        // Each lost compare-and-set means the session moved on; the next decision is then a
        // grace-window answer, a reuse or a rejection, so two rounds settle it.
        for _ in 0..<3 {
            guard let state = try queries.refreshState(tokenHash: presentedHash) else {
                throw SessionError(.invalidRefreshToken, "The refresh token is not valid.")
            }
            switch RefreshDecision.decide(state, now: now, graceWindow: configuration.refreshGraceWindow) {
            case .reject(let code):
                if let kind = Self.eventKind(forRejection: code) {
                    // Best effort: the caller gets the refusal's own reason either way.
                    recordBestEffort(queries: queries) {
                        SecurityEvent(
                            kind: kind,
                            sessionID: state.sessionID,
                            userID: state.userID,
                            occurredAt: now,
                            clientIP: ip,
                            details: [
                                "token_generation": .int(state.tokenGeneration),
                                "session_generation": .int(state.sessionGeneration),
                                "caller": .string(caller),
                            ]
                        )
                    }
                }
                throw SessionError(code, Self.message(for: code))

            case .rotate:
                let successor = RefreshToken.generate()
                let successorExpiresAt = min(
                    now.addingTimeInterval(configuration.refreshTokenLifetime.timeInterval),
                    state.sessionExpiresAt
                )
                let tokens = try issueTokens(
                    userID: state.userID,
                    amr: state.amr,
                    supabase: state.supabase,
                    sessionID: state.sessionID,
                    refresh: successor,
                    refreshExpiresAt: successorExpiresAt,
                    now: now,
                    key: key
                )
                let sealed = try vault.seal(
                    tokens,
                    presented: presented,
                    sessionID: state.sessionID,
                    generation: state.tokenGeneration + 1
                )
                let advanced = try queries.rotate(
                    RotationWrite(
                        sessionID: state.sessionID,
                        fromGeneration: state.tokenGeneration,
                        successorHash: successor.hash,
                        successorSealed: sealed,
                        successorExpiresAt: successorExpiresAt,
                        now: now,
                        clientIP: ip,
                        devicePlatform: device.platform,
                        deviceName: device.name
                    )
                )
                if advanced { return (tokens, state.sessionID, state.userID) }

            case .returnSuccessor:
                let tokens = try vault.open(
                    state.successorSealed ?? [],
                    presented: presented,
                    sessionID: state.sessionID,
                    generation: state.tokenGeneration + 1
                )
                return (tokens, state.sessionID, state.userID)

            case .reuseDetected:
                let sinceUse =
                    state.usedAt.map { FixedPoint.format(now.timeIntervalSince($0), fractionDigits: 3) } ?? "null"
                let details =
                    #"{"token_generation":\#(state.tokenGeneration),"#
                    + #""session_generation":\#(state.sessionGeneration),"seconds_since_used":\#(sinceUse)}"#
                try queries.revokeForReuse(sessionID: state.sessionID, now: now, clientIP: ip, details: details)
                logger.warning(
                    "A used refresh token was presented again after the grace window; the session is revoked",
                    metadata: [
                        "session.id": "\(state.sessionID)", "session.token_generation": "\(state.tokenGeneration)",
                        "session.generation": "\(state.sessionGeneration)",
                        "rpc.caller": "\(PeerText.loggable(caller))",
                    ]
                )
                throw SessionError(.refreshTokenReused, Self.message(for: .refreshTokenReused))
            }
        }
        throw SessionError(.internal, "The refresh did not settle after repeated conflicts.")
    }

    // MARK: Validate

    public func validate(
        request: Auth_Session_V1_ValidateRequest,
        context: ServerContext
    ) async throws -> Auth_Session_V1_ValidateResponse {
        var validator = FieldValidator()
        if request.accessToken.isEmpty {
            validator.fail("access_token", "required", "An access token is required.")
        }
        try validator.check()
        let now = clock.microsecondNow()
        let keySet = try await keys.current()
        let claims: AccessTokenClaims
        do throws(AccessTokenError) {
            claims = try verifier.verify(request.accessToken, now: now) { keySet.verificationKey(kid: $0, at: now) }
        } catch {
            throw SessionError(error)
        }
        var live: (createdAt: Date, expiresAt: Date)?
        if request.checkSession, let sessionID = UUID(uuidString: claims.sessionID) {
            live = try await store.liveSession(sessionID: sessionID, userID: claims.subject, now: now)
        }
        return Auth_Session_V1_ValidateResponse(
            claims: Auth_Session_V1_AccessTokenClaims(
                issuer: claims.issuer,
                audience: claims.audience,
                subject: claims.subject,
                sessionID: claims.sessionID,
                issuedAt: claims.issuedAt,
                expiresAt: claims.expiresAt,
                tokenID: claims.tokenID,
                amr: claims.amr
            ),
            sessionLive: live != nil,
            sessionCreatedAt: live?.createdAt.unixSeconds ?? 0,
            sessionExpiresAt: live?.expiresAt.unixSeconds ?? 0
        )
    }

    /// The revocation check of a caller that verified the access token itself: one lookup of
    /// the session, no signature check (Validate with `check_session` does both).
    public func checkSession(
        request: Auth_Session_V1_CheckSessionRequest,
        context: ServerContext
    ) async throws -> Auth_Session_V1_CheckSessionResponse {
        var validator = FieldValidator()
        let sessionID = validator.sessionID(request.sessionID)
        validator.userID(request.userID)
        try validator.check()
        guard let sessionID else { return Auth_Session_V1_CheckSessionResponse() }
        let now = clock.microsecondNow()
        guard let live = try await store.liveSession(sessionID: sessionID, userID: request.userID, now: now) else {
            return Auth_Session_V1_CheckSessionResponse()
        }
        return Auth_Session_V1_CheckSessionResponse(
            live: true,
            createdAt: live.createdAt.unixSeconds,
            expiresAt: live.expiresAt.unixSeconds
        )
    }

    // MARK: Revocation and listing

    public func revoke(
        request: Auth_Session_V1_RevokeRequest,
        context: ServerContext
    ) async throws -> Auth_Session_V1_RevokeResponse {
        var validator = FieldValidator()
        let byToken = !request.refreshToken.isEmpty
        if byToken {
            if !request.sessionID.isEmpty {
                validator.fail("session_id", "invalid_value", "Give a session id or a refresh token, not both.")
            }
        }
        let sessionID = byToken ? nil : validator.sessionID(request.sessionID)
        if !request.userID.isEmpty { validator.userID(request.userID) }
        let reason = validator.reason(request.reason)
        try validator.check()
        let now = clock.microsecondNow()
        let userID = request.userID.isEmpty ? nil : request.userID
        let outcome: SessionStore.Revocation?
        if byToken {
            guard let presented = RefreshToken(string: request.refreshToken) else {
                throw SessionError(.invalidRefreshToken, "The refresh token is not valid.")
            }
            outcome = try await store.revoke(tokenHash: presented.hash, userID: userID, reason: reason, now: now)
            guard outcome != nil else { throw SessionError(.invalidRefreshToken, "The refresh token is not valid.") }
        } else {
            guard let sessionID else { throw SessionError(.internal, "validated session id missing") }
            outcome = try await store.revoke(sessionID: sessionID, userID: userID, reason: reason, now: now)
        }
        guard let outcome else { throw SessionError(.sessionNotFound, "No such session.") }
        if outcome.revoked {
            logger.info(
                "Session revoked",
                metadata: ["session.id": "\(outcome.sessionID)", "session.reason": "\(reason)"]
            )
        }
        return Auth_Session_V1_RevokeResponse(
            revoked: outcome.revoked,
            sessionID: outcome.sessionID.uuidString.lowercased(),
            userID: outcome.userID
        )
    }

    public func revokeAll(
        request: Auth_Session_V1_RevokeAllRequest,
        context: ServerContext
    ) async throws -> Auth_Session_V1_RevokeAllResponse {
        var validator = FieldValidator()
        validator.userID(request.userID)
        let except = validator.sessionID(request.exceptSessionID, field: "except_session_id", required: false)
        let reason = validator.reason(request.reason)
        try validator.check()
        let count = try await store.revokeAll(
            userID: request.userID,
            except: except,
            reason: reason,
            now: clock.microsecondNow()
        )
        if request.forgetPersonalData { try await store.forgetPersonalData(userID: request.userID) }
        logger.info(
            "Sessions of a user revoked",
            metadata: ["session.count": "\(count)", "session.reason": "\(reason)"]
        )
        return Auth_Session_V1_RevokeAllResponse(revokedCount: UInt32(clamping: count))
    }

    public func listSessions(
        request: Auth_Session_V1_ListSessionsRequest,
        context: ServerContext
    ) async throws -> Auth_Session_V1_ListSessionsResponse {
        var validator = FieldValidator()
        validator.userID(request.userID)
        try validator.check()
        let sessions = try await store.liveSessions(
            userID: request.userID,
            now: clock.microsecondNow(),
            limit: configuration.maxListedSessions
        )
        return Auth_Session_V1_ListSessionsResponse(
            sessions: sessions.map { session in
                Auth_Session_V1_SessionInfo(
                    sessionID: session.id.uuidString.lowercased(),
                    amr: session.amr,
                    device: session.device,
                    clientIP: session.clientIP,
                    createdAt: session.createdAt.unixSeconds,
                    lastRefreshedAt: session.lastRefreshedAt?.unixSeconds ?? 0,
                    expiresAt: session.expiresAt.unixSeconds
                )
            }
        )
    }

    // MARK: Keys

    public func getJWKS(
        request: Auth_Session_V1_GetJWKSRequest,
        context: ServerContext
    ) async throws -> Auth_Session_V1_GetJWKSResponse {
        Auth_Session_V1_GetJWKSResponse(jwksJson: try await jwksJSON())
    }

    public func rotateSigningKey(
        request: Auth_Session_V1_RotateSigningKeyRequest,
        context: ServerContext
    ) async throws -> Auth_Session_V1_RotateSigningKeyResponse {
        try await requireOperator(context, method: "RotateSigningKey")
        let rotation = try await keys.rotate(caller: context.authenticatedCaller)
        return Auth_Session_V1_RotateSigningKeyResponse(
            newKeyID: rotation.newKeyID,
            signsFrom: rotation.signsFrom.unixSeconds,
            retiringKeyIds: rotation.retiringKeyIDs
        )
    }

    /// Moves every stored signing key to the current master key (see
    /// ``SigningKeyStore/rewrap(caller:)``); the step between the two rolling restarts of a
    /// master-key rotation (docs/session.md).
    public func rewrapSigningKeys(
        request: Auth_Session_V1_RewrapSigningKeysRequest,
        context: ServerContext
    ) async throws -> Auth_Session_V1_RewrapSigningKeysResponse {
        try await requireOperator(context, method: "RewrapSigningKeys")
        let result = try await keys.rewrap(caller: context.authenticatedCaller)
        logger.notice(
            "Re-wrapped the stored signing keys under the current master key",
            metadata: [
                "session.rewrapped_kids": "\(result.rewrapped.joined(separator: ","))",
                "session.already_current_kids": "\(result.alreadyCurrent.joined(separator: ","))",
            ]
        )
        return Auth_Session_V1_RewrapSigningKeysResponse(
            rewrapped: UInt32(clamping: result.rewrapped.count),
            alreadyCurrent: UInt32(clamping: result.alreadyCurrent.count)
        )
    }

    /// Refuses a caller other than ``SessionServiceConfiguration/keyRotationCaller`` with
    /// PERMISSION_DENIED, after logging it and recording a `caller_not_allowed` security event
    /// (best effort: a database outage does not change the answer).
    private func requireOperator(_ context: ServerContext, method: String) async throws {
        let caller = context.authenticatedCaller
        guard caller != configuration.keyRotationCaller else { return }
        logger.warning(
            "Refused a caller that may not call this method",
            metadata: ["rpc.caller": "\(Self.loggable(caller))", "rpc.method": "\(method)"]
        )
        do {
            try await store.record(
                SecurityEvent(
                    kind: .callerNotAllowed,
                    occurredAt: clock.microsecondNow(),
                    details: ["caller": .string(caller), "method": .string(method)]
                )
            )
        } catch {
            logger.warning("Could not record a security event", metadata: ["error": "\(error)"])
        }
        throw SessionError(.callerNotAllowed, "Only \(configuration.keyRotationCaller) may call \(method).")
    }

    /// The JWK Set of the keys published now (what GetJWKS returns).
    public func jwksJSON() async throws -> String {
        let now = clock.microsecondNow()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(try await keys.current().jwks(at: now)), as: UTF8.self)
    }

    // MARK: Maintenance

    /// Deletes sessions (with their refresh tokens) that were revoked, or reached their
    /// absolute expiry, more than `retention` ago; returns how many. Their security events stay.
    /// Run it now and then (e.g. daily); it works in batches of 1,000.
    ///
    /// Each batch is a transaction that first takes the clean-up's advisory lock
    /// (`pg_try_advisory_xact_lock`, per schema) without waiting: when another replica holds
    /// it, that replica is cleaning up and this call stops, returning what it deleted so far.
    /// ``SessionMaintenance`` runs it on a schedule.
    @discardableResult
    public func deleteDeadSessions(retention: Duration = .seconds(7 * 86_400)) async throws -> Int {
        try await sweepDeadSessions(retention: retention).deleted
    }

    /// What one clean-up did: how many sessions it deleted, and whether it stopped because
    /// another replica held the lock.
    struct DeadSessionSweep: Sendable, Equatable {
        var deleted: Int
        var lockedOut: Bool
    }

    func sweepDeadSessions(retention: Duration, batch: Int = 1_000) async throws -> DeadSessionSweep {
        let cutoff = clock.microsecondNow().addingTimeInterval(-retention.timeInterval)
        var total = 0
        while true {
            guard let deleted = try await store.deleteDeadSessions(before: cutoff, batch: batch) else {
                return DeadSessionSweep(deleted: total, lockedOut: true)
            }
            total += deleted
            if deleted < batch { return DeadSessionSweep(deleted: total, lockedOut: false) }
        }
    }

    // MARK: Helpers

    /// Every method's failures become statuses in one place, the same for the three services
    /// (AuthServiceCore's ``ServiceErrorInterceptor``), which also logs INTERNAL and UNAVAILABLE.
    public var interceptors: [any RPCServerInterceptor] {
        [ServiceErrorInterceptor(service: "session", logger: logger)]
    }

    private func signingKey(at now: Date) async throws -> SigningKey {
        guard let key = try await keys.current().signingKey(at: now) else {
            throw SessionError(.internal, "No signing key is active.")
        }
        return key
    }

    private func issueTokens(
        userID: String,
        amr: [String],
        supabase: SupabaseClaims?,
        sessionID: UUID,
        refresh: RefreshToken,
        refreshExpiresAt: Date,
        now: Date,
        key: SigningKey
    ) throws -> IssuedTokens {
        let issuedAt = now.unixSeconds
        let expiresAt = issuedAt + Int64(configuration.accessTokenLifetime.timeInterval)
        let claims = AccessTokenClaims(
            issuer: configuration.issuer,
            audience: configuration.audience,
            subject: userID,
            sessionID: sessionID.uuidString.lowercased(),
            issuedAt: issuedAt,
            expiresAt: expiresAt,
            tokenID: Base64URL.encode(SecureRandom.bytes(count: 16)),
            amr: amr,
            supabase: supabase
        )
        return IssuedTokens(
            refreshToken: refresh,
            accessToken: try AccessTokenCodec.sign(claims, key: key.privateKey, kid: key.kid),
            accessTokenExpiresAt: expiresAt,
            refreshTokenExpiresAt: refreshExpiresAt
        )
    }

    private func tokenPair(_ tokens: IssuedTokens, sessionID: UUID, now: Date) -> Auth_Session_V1_TokenPair {
        Auth_Session_V1_TokenPair(
            accessToken: tokens.accessToken,
            accessTokenExpiresIn: UInt32(clamping: max(0, tokens.accessTokenExpiresAt - now.unixSeconds)),
            refreshToken: tokens.refreshToken.string,
            refreshTokenExpiresIn: UInt32(
                clamping: max(0, Int64(tokens.refreshTokenExpiresAt.timeIntervalSince(now).rounded(.down)))
            ),
            sessionID: sessionID.uuidString.lowercased(),
            tokenType: "Bearer"
        )
    }

    private func recordBestEffort(queries: SessionStore.Queries, _ event: () -> SecurityEvent) {
        do {
            try queries.record(event())
        } catch {
            logger.warning("Could not record a security event", metadata: ["error": "\(error)"])
        }
    }

    /// A caller-supplied name for a log line: printable ASCII only (others become `?`), at
    /// most 64 characters.
    static func loggable(_ text: String) -> String {
        String(
            String.UnicodeScalarView(
                text.unicodeScalars.prefix(64).map { $0.value >= 0x20 && $0.value < 0x7F ? $0 : "?" }
            )
        )
    }

    /// The security event a refused refresh records, if any.
    static func eventKind(forRejection code: SessionError.Code) -> SecurityEvent.Kind? {
        switch code {
        case .sessionRevoked: .refreshOfRevokedSession
        case .sessionExpired: .refreshOfExpiredSession
        default: nil
        }
    }

    static func message(for code: SessionError.Code) -> String {
        switch code {
        case .sessionRevoked: "The session has been revoked."
        case .sessionExpired: "The session has expired; sign in again."
        case .invalidRefreshToken: "The refresh token is not valid."
        case .refreshTokenReused: "The refresh token was already used; the session has been revoked."
        default: "The request was refused."
        }
    }
}
