import AsyncHTTPClient
import AuthAPI
import AuthCrypto
import AuthPostgres
import AuthProtobuf
import AuthRPC
import AuthServiceCore
import AuthText
import AuthTime
import CoreMetrics
import Logging
import ServiceLifecycle

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `auth.identity.v1.Identity`: owns the users. Lookups, find-or-create from a contact proved by
/// a one-time code, password sign-up and sign-in (with a lockout counted in PostgreSQL), sign-in
/// with Apple/Google/Facebook ID tokens, profile changes, password reset and change, account
/// deletion and the audit trail. docs/identity.md describes the rules and the error reasons.
///
/// Create it with ``start(database:configuration:clock:fetcher:logger:)``, register it with an
/// `RPCRouter`, and call ``shutdown()`` when done (it owns the hashing threads and an HTTP client).
public final class IdentityService: Auth_Identity_V1_Identity.ServiceProtocol {
    public let configuration: IdentityServiceConfiguration
    let store: UserStore
    /// The service's scrypt pool (public for the benchmark, which measures it bare).
    public let hashing: PasswordHashing
    let policy: PasswordPolicy
    let verifiers: [IdentityProvider: IDTokenVerifier]
    let httpFetcher: HTTPJWKSFetcher?
    let oauthStore: OAuthStore
    /// Browser sign-in: the providers whose redirect flow is configured.
    let oauthClients: [IdentityProvider: OAuthProviderClient]
    private let oauthHTTP: HTTPClient?
    let clock: any WallClock
    let logger: Logger

    /// The schema's migrations, embedded in the executable from `Migrations/` (a test checks that
    /// this list names every file there).
    public static func migrations() throws -> [PostgresMigration] {
        try PostgresMigration.load(files: [
            "0001_create_identity_schema.sql": PackageResources._001_create_identity_schema_sql,
            "0002_consecutive_password_failures.sql": PackageResources._002_consecutive_password_failures_sql,
            "0003_oauth_flows.sql": PackageResources._003_oauth_flows_sql,
            "0004_email_link_codes.sql": PackageResources._004_email_link_codes_sql,
            "0005_account_checks.sql": PackageResources._005_account_checks_sql,
            "0006_column_checks_in_domains.sql": PackageResources._006_column_checks_in_domains_sql,
        ])
    }

    /// Applies the migrations to ``IdentityServiceConfiguration/schema``, loads the password
    /// blocklist, starts the hashing threads and returns the service.
    ///
    /// - Parameter fetcher: how JWK Sets are fetched; nil: over HTTPS with async-http-client.
    public static func start(
        database: PostgresPool,
        configuration: IdentityServiceConfiguration,
        clock: any WallClock = SystemWallClock(),
        fetcher: (any JWKSFetching)? = nil,
        logger: Logger
    ) async throws -> IdentityService {
        try await PostgresMigrator(pool: database, logger: logger)
            .migrate(schema: configuration.schema, migrations: migrations())
        let blocklist = try PasswordBlocklist.bundled()
        let hashing = try PasswordHashing(
            parameters: configuration.scryptParameters,
            concurrency: configuration.hashConcurrency
        )
        return IdentityService(
            database: database,
            configuration: configuration,
            blocklist: blocklist,
            hashing: hashing,
            clock: clock,
            fetcher: fetcher,
            logger: logger
        )
    }

    init(
        database: PostgresPool,
        configuration: IdentityServiceConfiguration,
        blocklist: PasswordBlocklist,
        hashing: PasswordHashing,
        clock: any WallClock,
        fetcher: (any JWKSFetching)?,
        logger: Logger
    ) {
        self.configuration = configuration
        self.store = UserStore(pool: database, schema: configuration.schema)
        self.hashing = hashing
        self.policy = PasswordPolicy(mode: configuration.passwordPolicyMode, blocklist: blocklist)
        let needsKeys = !configuration.providers.isEmpty || !configuration.oauth.clients.isEmpty
        let http = fetcher == nil && needsKeys ? HTTPJWKSFetcher() : nil
        self.httpFetcher = http
        self.oauthStore = OAuthStore(pool: database, schema: configuration.schema)
        var oauthClients: [IdentityProvider: OAuthProviderClient] = [:]
        var oauthHTTP: HTTPClient?
        for (provider, client) in configuration.oauth.clients {
            guard let callback = configuration.oauth.callbackURL(provider) else { continue }
            let shared =
                oauthHTTP
                ?? {
                    var settings = HTTPClient.Configuration()
                    settings.redirectConfiguration = .disallow
                    // Traced by ProviderCallSpan, without the URL.
                    settings.tracing.tracer = nil
                    return HTTPClient(eventLoopGroupProvider: .singleton, configuration: settings)
                }()
            oauthHTTP = shared
            oauthClients[provider] = OAuthProviderClient(
                configuration: client,
                callbackURL: callback,
                http: shared,
                timeout: configuration.oauth.providerTimeout,
                clock: clock,
                jwksFetcher: fetcher ?? http!,
                jwksRefetchInterval: configuration.jwksRefetchInterval,
                jwksLifetime: configuration.jwksCacheLifetime,
                clockSkew: configuration.idTokenClockSkew.timeInterval
            )
        }
        self.oauthClients = oauthClients
        self.oauthHTTP = oauthHTTP
        var verifiers: [IdentityProvider: IDTokenVerifier] = [:]
        for (provider, settings) in configuration.providers {
            verifiers[provider] = IDTokenVerifier(
                configuration: settings,
                keys: JWKSCache(
                    url: settings.jwksURL,
                    fetcher: fetcher ?? http!,
                    clock: clock,
                    refetchInterval: configuration.jwksRefetchInterval,
                    lifetime: configuration.jwksCacheLifetime
                ),
                clockSkew: configuration.idTokenClockSkew.timeInterval
            )
        }
        self.verifiers = verifiers
        self.clock = clock
        self.logger = logger
    }

    /// Stops the hashing threads and the HTTP client.
    public func shutdown() async {
        await hashing.shutdown()
        await httpFetcher?.shutdown()
        try? await oauthHTTP?.shutdown()
    }

    /// A `Service` for the process's `ServiceGroup` that calls ``shutdown()`` at graceful
    /// shutdown (after the RPC server has drained, when listed before it).
    public var lifecycle: some Service { Lifecycle(service: self) }

    private struct Lifecycle: Service {
        let service: IdentityService

        func run() async throws {
            try? await gracefulShutdown()
            await service.shutdown()
        }
    }

    /// Who may call each method: the gateway for everything the apps do; operators (`authctl`)
    /// may read users and audit trails.
    public var allowedCallers: Auth_Identity_V1_Identity.AllowedCallersByMethod {
        .init(
            // Trimmed to the callers of today (issue 19): no gateway route looks a user up by
            // phone or reads an audit trail; the password reset looks its user up by email.
            getUser: .only([CallerName.gateway, CallerName.authctl]),
            getUserByPhone: .only([CallerName.authctl]),
            listIdentities: .only([CallerName.gateway]),
            linkProvider: .only([CallerName.gateway]),
            unlinkProvider: .only([CallerName.gateway]),
            getUserByEmail: .only([CallerName.gateway, CallerName.authctl]),
            contactExists: .only([CallerName.gateway]),
            findOrCreateByContact: .only([CallerName.gateway]),
            signUp: .only([CallerName.gateway]),
            signInWithPassword: .only([CallerName.gateway]),
            signInWithIDToken: .only([CallerName.gateway]),
            startOAuth: .only([CallerName.gateway]),
            finishOAuth: .only([CallerName.gateway]),
            exchangeOAuthCode: .only([CallerName.gateway]),
            changeContact: .only([CallerName.gateway]),
            updateProfile: .only([CallerName.gateway]),
            resetPassword: .only([CallerName.gateway]),
            changePassword: .only([CallerName.gateway]),
            validatePassword: .only([CallerName.gateway]),
            deleteUser: .only([CallerName.gateway, CallerName.authctl]),
            listAuditEvents: .only([CallerName.authctl]),
            unlockPassword: .only([CallerName.authctl]),
            getSignInMethods: .only([CallerName.gateway]),
            issueSignInCode: .only([CallerName.gateway])
        )
    }

    // MARK: Lookups

    public func getUser(
        request: Auth_Identity_V1_GetUserRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_GetUserResponse {
        var validator = FieldValidator()
        let id = validator.userID(request.userID)
        try validator.check()
        guard let id else { throw Self.notFound }
        guard request.withIdentities else {
            guard let user = try await store.user(id: id) else { throw Self.notFound }
            return Auth_Identity_V1_GetUserResponse(user: user.proto)
        }
        guard let (user, linked) = try await store.userWithProviderIdentities(id: id) else { throw Self.notFound }
        return Auth_Identity_V1_GetUserResponse(user: user.proto, identities: Self.identities(of: user, linked: linked))
    }

    /// The verified phone, the verified email, the password and the linked providers of a live
    /// account, in that order (providers by name).
    public func listIdentities(
        request: Auth_Identity_V1_ListIdentitiesRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_ListIdentitiesResponse {
        var validator = FieldValidator()
        let id = validator.userID(request.userID)
        try validator.check()
        guard let id, let user = try await store.user(id: id) else { throw Self.notFound }
        let identities = Self.identities(of: user, linked: try await store.providerIdentities(userID: id))
        return Auth_Identity_V1_ListIdentitiesResponse(identities: identities)
    }

    /// The verified phone, the verified email, the password and the linked providers, in that
    /// order: ListIdentities' answer and GetUser's with `with_identities`.
    static func identities(of user: UserRecord, linked: [LinkedIdentity]) -> [Auth_Identity_V1_SignInIdentity] {
        let created = user.createdAt.unixSeconds
        var identities: [Auth_Identity_V1_SignInIdentity] = []
        if let phone = user.phone, user.phoneVerified {
            identities.append(.init(provider: "phone", id: phone, createdAt: created))
        }
        if let email = user.email, user.emailVerified {
            identities.append(.init(provider: "email", id: email, email: email, createdAt: created))
        }
        if user.passwordHash != nil, let login = user.email ?? user.phone {
            identities.append(.init(provider: "password", id: login, email: user.email ?? "", createdAt: created))
        }
        for identity in linked {
            identities.append(
                .init(
                    provider: identity.provider,
                    id: identity.subject,
                    email: identity.email ?? "",
                    createdAt: identity.createdAt.unixSeconds
                )
            )
        }
        return identities
    }

    public func getUserByPhone(
        request: Auth_Identity_V1_GetUserByPhoneRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_GetUserResponse {
        var validator = FieldValidator()
        let phone = validator.phone(request.phone)
        try validator.check()
        return try await userResponse(phone.map(Contact.phone))
    }

    public func getUserByEmail(
        request: Auth_Identity_V1_GetUserByEmailRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_GetUserResponse {
        var validator = FieldValidator()
        let email = validator.email(request.email)
        try validator.check()
        return try await userResponse(email.map(Contact.email))
    }

    /// The live account that has `contact` (NOT_FOUND `user_not_found` otherwise).
    private func userResponse(_ contact: Contact?) async throws -> Auth_Identity_V1_GetUserResponse {
        guard let contact, let user = try await store.user(contact: contact) else { throw Self.notFound }
        return Auth_Identity_V1_GetUserResponse(user: user.proto)
    }

    public func contactExists(
        request: Auth_Identity_V1_ContactExistsRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_ContactExistsResponse {
        var validator = FieldValidator()
        let contact = validator.contact(phone: request.phone, email: request.email)
        let clientIP = validator.clientIP(request.clientIP, context: context)
        try validator.check()
        if request.accountCheck { try await spendAccountCheck(clientIP: clientIP) }
        guard let contact, let user = try await store.user(contact: contact) else {
            return Auth_Identity_V1_ContactExistsResponse(exists: false)
        }
        let verified =
            switch contact {
            case .phone: user.phoneVerified
            case .email: user.emailVerified
            }
        return Auth_Identity_V1_ContactExistsResponse(
            exists: true,
            verified: verified,
            userID: user.id.uuidString.lowercased()
        )
    }

    /// Sets a phone or email the user has just proved with a `change_contact` code.
    public func changeContact(
        request: Auth_Identity_V1_ChangeContactRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_ChangeContactResponse {
        var validator = FieldValidator()
        let userID = validator.userID(request.userID)
        let contact = validator.contact(phone: request.phone, email: request.email)
        let clientIP = validator.clientIP(request.clientIP, context: context)
        try validator.check()
        guard let userID, let contact else { throw IdentityError(.internal, "validated fields missing") }
        let method =
            switch contact {
            case .phone: "phone"
            case .email: "email"
            }
        switch try await store.changeContact(
            userID: userID,
            to: contact,
            audit: audit(.contactChanged, method: method, clientIP, context)
        ) {
        case .changed(let user, let previous, let previousVerified):
            logger.info("Contact changed", metadata: ["user.id": "\(userID)", "identity.method": "\(method)"])
            return Auth_Identity_V1_ChangeContactResponse(
                user: user.proto,
                previous: previous ?? "",
                previousVerified: previous != nil && previousVerified
            )
        case .taken:
            throw IdentityError(
                .contactTaken,
                "This \(method == "phone" ? "phone number" : "email") is already used by another account."
            )
        case .noUser:
            throw Self.notFound
        }
    }

    // MARK: One-time codes

    public func findOrCreateByContact(
        request: Auth_Identity_V1_FindOrCreateByContactRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_FindOrCreateByContactResponse {
        var validator = FieldValidator()
        let contact = validator.contact(phone: request.phone, email: request.email)
        let clientIP = validator.clientIP(request.clientIP, context: context)
        try validator.check()
        guard let contact else { throw IdentityError(.internal, "validated contact missing") }
        let found = try await store.findOrCreate(
            contact: contact,
            newID: SecureRandom.uuid(),
            signupVerification: request.signupVerification,
            audit: audit(.signIn, method: contact.method, clientIP, context)
        )
        if found.created {
            logger.info(
                "User created",
                metadata: ["user.id": "\(found.user.id)", "identity.method": "\(contact.method)"]
            )
        }
        if found.passwordCleared {
            logger.notice(
                "A code proved a contact that an account with a password had claimed: password cleared",
                metadata: ["user.id": "\(found.user.id)", "identity.method": "\(contact.method)"]
            )
        }
        return Auth_Identity_V1_FindOrCreateByContactResponse(
            user: found.user.proto,
            created: found.created,
            passwordCleared: found.passwordCleared
        )
    }

    // MARK: Passwords

    public func signUp(
        request: Auth_Identity_V1_SignUpRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_SignUpResponse {
        var validator = FieldValidator()
        if !(request.displayNameOptional && request.displayName.isEmpty) {
            validator.displayName(request.displayName)
        }
        let contact = validator.contact(phone: request.phone, email: request.email)
        let password = validator.newPassword(request.password, policy: policy)
        let clientIP = validator.clientIP(request.clientIP, context: context)
        try validator.check()
        guard let contact, let password else {
            throw IdentityError(.internal, "validated fields missing")
        }
        if request.accountCheck { try await spendAccountCheck(clientIP: clientIP) }
        // A cheap check first, so a taken contact costs no hash unless the caller must not let the
        // time tell; the unique index decides races.
        if try await store.user(contact: contact) != nil {
            if request.hashWhenTaken { _ = try await hashing.hash(password) }
            throw UserStore.taken(contact)
        }
        let hash = try await hashing.hash(password)
        let user = try await store.signUp(
            id: SecureRandom.uuid(),
            contact: contact,
            displayName: request.displayName,
            passwordHash: hash,
            audit: audit(.signUp, method: "password", clientIP, context)
        )
        logger.info("User created", metadata: ["user.id": "\(user.id)", "identity.method": "password"])
        return Auth_Identity_V1_SignUpResponse(user: user.proto)
    }

    public func signInWithPassword(
        request: Auth_Identity_V1_SignInWithPasswordRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_SignInWithPasswordResponse {
        var validator = FieldValidator()
        let contact: Contact?
        if request.phone.isEmpty {
            contact = validator.email(request.email).map(Contact.email)
        } else {
            contact = validator.contact(phone: request.phone, email: request.email)
        }
        if request.password.isEmpty { validator.fail("password", "required", "Password is required.") }
        let clientIP = validator.clientIP(request.clientIP, context: context)
        try validator.check()
        guard let contact else { throw IdentityError(.internal, "validated contact missing") }
        // Attempts are counted per email or phone (the hash of its normalized text: a phone's
        // leading `+` keeps it apart from every email).
        let emailHash = SHA256.hash(contact.text)
        let now = clock.microsecondNow()
        try await reservePasswordAttempt(emailHash: emailHash, now: now)
        let user = try await store.user(contact: contact)
        var matches = false
        if let password = PasswordPolicy.normalized(request.password) {
            // Absent user or no password: verify against the dummy hash all the same.
            matches = try await hashing.verify(password, against: user?.passwordHash)
        }
        guard matches, let user, let stored = user.passwordHash,
            let password = PasswordPolicy.normalized(request.password)
        else {
            // The reserved attempt stays as the failure.
            var entry = audit(.signInFailed, method: "password", clientIP, context, at: now)
            entry.userID = user?.id
            try await store.insertAudit(entry)
            throw IdentityError(.invalidCredentials, IdentityError.invalidCredentialsMessage)
        }
        var rehashed: String?
        if hashing.needsRehash(stored) {
            rehashed = try await hashing.hash(password)
        }
        var entry = audit(.signIn, method: "password", clientIP, context, at: now)
        entry.userID = user.id
        try await store.recordSignIn(
            emailHash: emailHash,
            userID: user.id,
            rehashed: rehashed,
            oldHash: stored,
            audit: entry
        )
        return Auth_Identity_V1_SignInWithPasswordResponse(user: user.proto)
    }

    public func resetPassword(
        request: Auth_Identity_V1_ResetPasswordRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_ResetPasswordResponse {
        var validator = FieldValidator()
        let email = validator.email(request.email)
        let password = validator.newPassword(request.newPassword, field: "new_password", policy: policy)
        let clientIP = validator.clientIP(request.clientIP, context: context)
        try validator.check()
        guard let email, let password else {
            throw IdentityError(.internal, "validated fields missing")
        }
        guard try await store.user(email: email) != nil else { throw Self.notFound }
        let hash = try await hashing.hash(password)
        guard
            let user = try await store.resetPassword(
                email: email,
                emailHash: SHA256.hash(email),
                passwordHash: hash,
                audit: audit(.passwordReset, method: "otp_email", clientIP, context)
            )
        else { throw Self.notFound }
        return Auth_Identity_V1_ResetPasswordResponse(user: user.proto)
    }

    public func changePassword(
        request: Auth_Identity_V1_ChangePasswordRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_ChangePasswordResponse {
        var validator = FieldValidator()
        let id = validator.userID(request.userID)
        if request.oldPassword.isEmpty {
            validator.fail("old_password", "required", "Your current password is required.")
        }
        let newPassword = validator.newPassword(request.newPassword, field: "new_password", policy: policy)
        let clientIP = validator.clientIP(request.clientIP, context: context)
        try validator.check()
        guard let id, let newPassword else {
            throw IdentityError(.internal, "validated fields missing")
        }
        guard let user = try await store.user(id: id) else { throw Self.notFound }
        let now = clock.microsecondNow()
        // Sign-in's lockout, keyed by the account's email: guesses at one password count
        // together whichever method makes them. An account without an email has no password
        // (one is only ever set with an email), so there is nothing to guess and nothing to key.
        let emailHash = user.email.map { SHA256.hash($0) }
        if let emailHash { try await reservePasswordAttempt(emailHash: emailHash, now: now) }
        let wrong = IdentityError(.wrongPassword, "Your current password is incorrect.")
        guard let oldPassword = PasswordPolicy.normalized(request.oldPassword),
            try await hashing.verify(oldPassword, against: user.passwordHash)
        else {
            if emailHash != nil {
                // The reserved attempt stays as the failure.
                var entry = audit(.passwordChangeFailed, method: "password", clientIP, context, at: now)
                entry.userID = id
                try await store.insertAudit(entry)
            }
            throw wrong
        }
        let hash = try await hashing.hash(newPassword)
        var entry = audit(.passwordChanged, method: "password", clientIP, context)
        entry.userID = id
        guard
            try await store.changePassword(
                userID: id,
                emailHash: emailHash,
                oldHash: user.passwordHash,
                newHash: hash,
                audit: entry
            )
        else { throw wrong }
        return Auth_Identity_V1_ChangePasswordResponse()
    }

    public func validatePassword(
        request: Auth_Identity_V1_ValidatePasswordRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_ValidatePasswordResponse {
        var validator = FieldValidator()
        validator.newPassword(request.password, policy: policy)
        try validator.check()
        return Auth_Identity_V1_ValidatePasswordResponse()
    }

    /// Takes one of the email's password attempts (SignInWithPassword, and ChangePassword's old
    /// password) before any hashing, or answers `too_many_attempts` once `maxSignInFailures`
    /// failures lie in the window (issue 19, item 5: a check read before hashing and a failure
    /// written after let 50 concurrent guesses all through), or `factor_locked` once
    /// `maxConsecutiveFailures` failed since the last success (item 6).
    func reservePasswordAttempt(emailHash: [UInt8], now: Date) async throws {
        let window = configuration.signInFailureWindow.timeInterval
        let windowStart = now.addingTimeInterval(-window)
        switch try await store.reservePasswordAttempt(
            emailHash: emailHash,
            at: now,
            windowStart: windowStart,
            limit: configuration.maxSignInFailures,
            maxConsecutive: configuration.maxConsecutiveFailures
        )
        {
        case .reserved:
            return
        case .factorLocked:
            Counter(label: "identity_password_lockouts_total", dimensions: [("reason", "factor_locked")]).increment()
            throw IdentityError(.factorLocked, Self.factorLockedMessage)
        case .windowFull(let oldestCounted):
            Counter(label: "identity_password_lockouts_total", dimensions: [("reason", "too_many_attempts")])
                .increment()
            let retryAfter = max(1, Int(oldestCounted.addingTimeInterval(window).timeIntervalSince(now).rounded(.up)))
            throw IdentityError(
                .tooManyAttempts,
                "Too many failed attempts. Please try again in \(Self.minutes(retryAfter)).",
                retryAfterSeconds: UInt32(retryAfter)
            )
        }
    }

    /// Takes one of the client IP's account checks (``IdentityServiceConfiguration/accountChecksPerHour``),
    /// or throws RESOURCE_EXHAUSTED `rate_limited` with the seconds until one is free. Counted in
    /// PostgreSQL under a lock per address: every replica spends one budget, and concurrent
    /// calls cannot overshoot it. A call without an address counts under the empty one.
    func spendAccountCheck(clientIP: String) async throws {
        let now = clock.microsecondNow()
        let window: TimeInterval = 3_600
        let key = clientIP.isEmpty ? "" : IPAddress.rateLimitKey(of: clientIP)
        guard
            let oldest = try await store.spendAccountCheck(
                ipHash: SHA256.hash(key),
                at: now,
                windowStart: now.addingTimeInterval(-window),
                limit: configuration.accountChecksPerHour
            )
        else { return }
        let retryAfter = max(1, Int(oldest.addingTimeInterval(window).timeIntervalSince(now).rounded(.up)))
        throw IdentityError(
            .rateLimited,
            "Too many requests. Please try again in \(Self.minutes(retryAfter)).",
            retryAfterSeconds: UInt32(retryAfter)
        )
    }

    static let factorLockedMessage =
        "Too many failed attempts: password sign-in is locked for this email. Reset your password to unlock it."

    // MARK: Operators

    public func unlockPassword(
        request: Auth_Identity_V1_UnlockPasswordRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_UnlockPasswordResponse {
        var validator = FieldValidator()
        let email = validator.email(request.email)
        try validator.check()
        guard let email else { throw IdentityError(.internal, "validated email missing") }
        let wasLocked = try await store.unlockPassword(
            emailHash: SHA256.hash(email),
            maxConsecutive: configuration.maxConsecutiveFailures
        )
        return Auth_Identity_V1_UnlockPasswordResponse(wasLocked: wasLocked)
    }

    /// The providers ID-token sign-in and browser sign-in are configured for, in a fixed order.
    public func getSignInMethods(
        request: Auth_Identity_V1_GetSignInMethodsRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_GetSignInMethodsResponse {
        Auth_Identity_V1_GetSignInMethodsResponse(
            idTokenProviders: IdentityProvider.allCases.filter { verifiers[$0] != nil }.map(Self.proto),
            redirectProviders: IdentityProvider.allCases.filter { oauthClients[$0] != nil }.map(Self.proto)
        )
    }

    // MARK: ID tokens

    /// Verifies an ID token of `provider` (issuer, audience, expiry, nonce: hashed for every
    /// provider when `nonceHashed`) and spends it (a second presentation is
    /// `id_token_replayed`), with `redirectFlowVerifier` or else the provider's ID-token sign-in
    /// verifier: the identity it proves.
    func verifiedIdentity(
        _ provider: IdentityProvider,
        _ idToken: String,
        rawNonce: String,
        nonceHashed: Bool = false,
        _ context: ServerContext,
        now: Date,
        using redirectFlowVerifier: IDTokenVerifier? = nil
    ) async throws -> ProviderIdentity {
        guard let verifier = redirectFlowVerifier ?? verifiers[provider] else {
            throw IdentityError(
                .providerNotEnabled,
                "Sign in with \(provider.rawValue.capitalized) is not available."
            )
        }
        let verified = try await verifier.verify(idToken, rawNonce: rawNonce, nonceHashed: nonceHashed, now: now)
        guard
            try await store.rememberToken(
                provider: provider,
                key: verified.replayKey,
                expiresAt: verified.expiresAt,
                now: now
            )
        else {
            logger.warning(
                "An ID token was presented again",
                metadata: [
                    "identity.provider": "\(provider.rawValue)",
                    "rpc.caller": "\(PeerText.loggable(context.authenticatedCaller))",
                ]
            )
            throw IdentityError(.idTokenReplayed, "This sign-in was already used. Please sign in again.")
        }
        return verified.identity
    }

    /// Signs a verified provider identity in (finds, links or creates its user; audit
    /// `sign_in`): ID-token and browser sign-in alike.
    func signIn(
        _ identity: ProviderIdentity,
        _ clientIP: String,
        _ context: ServerContext,
        now: Date
    ) async throws -> ProviderSignInResult {
        let method = identity.provider.method
        let result = try await store.signIn(
            with: identity,
            newID: SecureRandom.uuid(),
            audit: audit(.signIn, method: method, clientIP, context, at: now)
        )
        if result.created || result.linked {
            logger.info(
                result.created ? "User created" : "Provider identity linked",
                metadata: ["user.id": "\(result.user.id)", "identity.method": "\(method)"]
            )
        }
        return result
    }

    static func provider(_ proto: Auth_Identity_V1_Provider) -> IdentityProvider? {
        switch proto {
        case .apple: .apple
        case .google: .google
        case .facebook: .facebook
        default: nil
        }
    }

    /// Links the provider identity the token proves to the signed-in account.
    public func linkProvider(
        request: Auth_Identity_V1_LinkProviderRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_ListIdentitiesResponse {
        var validator = FieldValidator()
        let userID = validator.userID(request.userID)
        let provider = Self.provider(request.provider)
        if provider == nil { validator.fail("provider", "required", "A provider is required.") }
        if request.idToken.isEmpty { validator.fail("id_token", "required", "An ID token is required.") }
        let clientIP = validator.clientIP(request.clientIP, context: context)
        try validator.check()
        guard let userID, let provider else { throw IdentityError(.internal, "validated fields missing") }
        let now = clock.microsecondNow()
        let identity = try await verifiedIdentity(provider, presentedIn: request, context, now: now)
        switch try await store.link(
            identity,
            to: userID,
            audit: audit(.providerLinked, method: provider.method, clientIP, context, at: now)
        ) {
        case .linked:
            logger.info(
                "Provider identity linked",
                metadata: ["user.id": "\(userID)", "identity.method": "\(provider.method)"]
            )
        case .alreadyThis: break
        case .otherAccount:
            throw IdentityError(.identityAlreadyLinked, "This account is already linked to another user.")
        case .noUser: throw Self.notFound
        }
        return try await listIdentities(request: .init(userID: request.userID), context: context)
    }

    /// Unlinks the account's identity of a provider, unless it is the last way to sign in.
    public func unlinkProvider(
        request: Auth_Identity_V1_UnlinkProviderRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_UnlinkProviderResponse {
        var validator = FieldValidator()
        let userID = validator.userID(request.userID)
        let provider = Self.provider(request.provider)
        if provider == nil { validator.fail("provider", "required", "A provider is required.") }
        let clientIP = validator.clientIP(request.clientIP, context: context)
        try validator.check()
        guard let userID, let provider else { throw IdentityError(.internal, "validated fields missing") }
        let now = clock.microsecondNow()
        switch try await store.unlink(
            provider: provider,
            from: userID,
            audit: audit(.providerUnlinked, method: provider.method, clientIP, context, at: now)
        ) {
        case .unlinked:
            logger.info(
                "Provider identity unlinked",
                metadata: ["user.id": "\(userID)", "identity.method": "\(provider.method)"]
            )
        case .notLinked:
            throw IdentityError(.identityNotFound, "No \(provider.rawValue.capitalized) account is linked.")
        case .lastIdentity:
            throw IdentityError(.lastIdentity, "This is the only way to sign in to the account; add another first.")
        }
        return Auth_Identity_V1_UnlinkProviderResponse()
    }

    public func signInWithIDToken(
        request: Auth_Identity_V1_SignInWithIDTokenRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_SignInWithIDTokenResponse {
        var validator = FieldValidator()
        let provider = Self.provider(request.provider)
        if provider == nil { validator.fail("provider", "required", "A provider is required.") }
        if request.idToken.isEmpty { validator.fail("id_token", "required", "An ID token is required.") }
        if !request.displayName.isEmpty { validator.displayName(request.displayName) }
        let clientIP = validator.clientIP(request.clientIP, context: context)
        try validator.check()
        guard let provider else { throw IdentityError(.internal, "validated provider missing") }
        let now = clock.microsecondNow()
        var identity = try await verifiedIdentity(provider, presentedIn: request, context, now: now)
        if identity.name == nil, !request.displayName.isEmpty { identity.name = request.displayName }
        let result = try await signIn(identity, clientIP, context, now: now)
        return Auth_Identity_V1_SignInWithIDTokenResponse(
            user: result.user.proto,
            created: result.created,
            linked: result.linked
        )
    }

    // MARK: Profile, deletion, audit

    public func updateProfile(
        request: Auth_Identity_V1_UpdateProfileRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_UpdateProfileResponse {
        var validator = FieldValidator()
        let id = validator.userID(request.userID)
        if let name = request.displayName { validator.displayName(name.value) }
        if let url = request.photoURL { validator.photoURL(url.value) }
        let clientIP = validator.clientIP(request.clientIP, context: context)
        try validator.check()
        guard let id else { throw IdentityError(.internal, "validated user id missing") }
        var entry = audit(.profileUpdated, method: "", clientIP, context)
        entry.userID = id
        guard
            let user = try await store.updateProfile(
                userID: id,
                changes: ProfileChanges(
                    displayName: request.displayName?.value,
                    photoURL: request.photoURL?.value,
                    onboardingCompleted: request.onboardingCompleted?.value
                ),
                audit: entry
            )
        else { throw Self.notFound }
        return Auth_Identity_V1_UpdateProfileResponse(user: user.proto)
    }

    public func deleteUser(
        request: Auth_Identity_V1_DeleteUserRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_DeleteUserResponse {
        var validator = FieldValidator()
        let id = validator.userID(request.userID)
        let clientIP = validator.clientIP(request.clientIP, context: context)
        try validator.check()
        guard let id else { throw IdentityError(.internal, "validated user id missing") }
        var entry = audit(.accountDeleted, method: "", clientIP, context)
        entry.userID = id
        guard let deleted = try await store.delete(userID: id, audit: entry) else { throw Self.notFound }
        if deleted { logger.info("User deleted", metadata: ["user.id": "\(id)"]) }
        return Auth_Identity_V1_DeleteUserResponse(deleted: deleted)
    }

    public func listAuditEvents(
        request: Auth_Identity_V1_ListAuditEventsRequest,
        context: ServerContext
    ) async throws -> Auth_Identity_V1_ListAuditEventsResponse {
        var validator = FieldValidator()
        let id = validator.userID(request.userID)
        if request.limit > 500 { validator.fail("limit", "too_large", "At most 500 events per call.") }
        try validator.check()
        guard let id else { throw IdentityError(.internal, "validated user id missing") }
        let events = try await store.auditEvents(userID: id, limit: request.limit == 0 ? 100 : Int(request.limit))
        return Auth_Identity_V1_ListAuditEventsResponse(events: events)
    }

    // MARK: Helpers

    static let notFound = IdentityError(.userNotFound, "No account was found.")

    static func minutes(_ seconds: Int) -> String {
        let minutes = (seconds + 59) / 60
        return minutes == 1 ? "1 minute" : "\(minutes) minutes"
    }

    /// An audit row for this call: the end user's IP (``FieldValidator/clientIP(_:context:field:)``),
    /// the request id and the authenticated caller.
    func audit(
        _ kind: AuditEntry.Kind,
        method: String,
        _ clientIP: String,
        _ context: ServerContext,
        at time: Date? = nil
    ) -> AuditEntry {
        let requestID = context.metadata.requestID
        return AuditEntry(
            kind: kind,
            userID: nil,
            method: method,
            occurredAt: time ?? clock.microsecondNow(),
            clientIP: clientIP,
            requestID: requestID.utf8.count <= 128 ? requestID : String(requestID.prefix(128)),
            caller: context.authenticatedCaller
        )
    }

    /// Every method's failures become statuses in one place, the same for the three services
    /// (AuthServiceCore's ``ServiceErrorInterceptor``), which also logs INTERNAL and UNAVAILABLE.
    public var interceptors: [any RPCServerInterceptor] {
        [ServiceErrorInterceptor(service: "identity", logger: logger)]
    }
}

/// A request that presents a provider's ID token with the app's nonce: SignInWithIDToken's and
/// LinkProvider's.
protocol IDTokenPresentation {
    var idToken: String { get }
    var rawNonce: String { get }
    var nonceHashed: Bool { get }
}

extension Auth_Identity_V1_SignInWithIDTokenRequest: IDTokenPresentation {}
extension Auth_Identity_V1_LinkProviderRequest: IDTokenPresentation {}

extension IdentityService {
    /// ``verifiedIdentity(_:_:rawNonce:nonceHashed:_:now:using:)`` for the token `request` presents.
    func verifiedIdentity(
        _ provider: IdentityProvider,
        presentedIn request: some IDTokenPresentation,
        _ context: ServerContext,
        now: Date
    ) async throws -> ProviderIdentity {
        try await verifiedIdentity(
            provider,
            request.idToken,
            rawNonce: request.rawNonce,
            nonceHashed: request.nonceHashed,
            context,
            now: now
        )
    }
}
