import AuthAPI
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

/// `auth.otp.v1.OTP`: issues one-time codes, queues their messages in a transactional outbox
/// (sent by ``OTPDispatcher``), checks them, and enforces every limit in PostgreSQL so that
/// they hold across replicas and restarts. docs/otp.md describes the rules and reasons.
///
/// Create it with ``start(database:configuration:clock:logger:)``, which applies the schema's
/// migrations, then register it with an `RPCRouter`.
public final class OTPService: Auth_Otp_V1_OTP.ServiceProtocol {
    public let configuration: OTPServiceConfiguration
    let store: OTPStore
    let codes: CodeMAC
    let clock: any WallClock
    let logger: Logger
    let metrics: OTPMetrics
    /// Starts hand their messages to this process's running dispatcher through it.
    let handoff = OutboxHandoff()

    /// The schema's migrations, embedded in the executable from `Migrations/` (a test checks that
    /// this list names every file there).
    public static func migrations() throws -> [PostgresMigration] {
        try PostgresMigration.load(files: [
            "0001_create_otp_schema.sql": PackageResources._001_create_otp_schema_sql,
            "0002_pumping_counts.sql": PackageResources._002_pumping_counts_sql,
            "0003_decoy_verifications.sql": PackageResources._003_decoy_verifications_sql,
            "0004_consecutive_failures.sql": PackageResources._004_consecutive_failures_sql,
            "0005_contact_change_and_notices.sql": PackageResources._005_contact_change_and_notices_sql,
            "0006_check_by_destination_and_signup_notice.sql":
                PackageResources._006_check_by_destination_and_signup_notice_sql,
            "0007_confirmation_links.sql": PackageResources._007_confirmation_links_sql,
            "0008_column_checks_in_domains.sql": PackageResources._008_column_checks_in_domains_sql,
        ])
    }

    /// Applies the migrations to ``OTPServiceConfiguration/schema`` and returns the service.
    public static func start(
        database: PostgresPool,
        configuration: OTPServiceConfiguration,
        clock: any WallClock = SystemWallClock(),
        metrics: OTPMetrics = OTPMetrics(),
        logger: Logger
    ) async throws -> OTPService {
        try await PostgresMigrator(pool: database, logger: logger)
            .migrate(schema: configuration.schema, migrations: migrations())
        return OTPService(
            database: database,
            configuration: configuration,
            clock: clock,
            metrics: metrics,
            logger: logger
        )
    }

    init(
        database: PostgresPool,
        configuration: OTPServiceConfiguration,
        clock: any WallClock,
        metrics: OTPMetrics,
        logger: Logger
    ) {
        self.configuration = configuration
        self.store = OTPStore(pool: database, schema: configuration.schema)
        self.codes = CodeMAC(secret: configuration.secret)
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
    }

    /// A dispatcher for this service's outbox (same schema, clock and metrics). While it runs,
    /// this service's Starts hand their messages to it (``OutboxHandoff``) unless
    /// `takesStartHandoffs` is false (tests of the `NOTIFY` path) or another of its dispatchers
    /// runs already.
    public func makeDispatcher(
        providers: ProviderSet,
        closing factory: ProviderFactory? = nil,
        workerName: String = "\(ProcessInfo.processInfo.hostName):\(ProcessInfo.processInfo.processIdentifier)",
        takesStartHandoffs: Bool = true,
        sleepClock: any Clock<Duration> = ContinuousClock()
    ) -> OTPDispatcher {
        OTPDispatcher(
            factory: factory,
            handoff: takesStartHandoffs ? handoff : nil,
            store: store,
            configuration: configuration,
            providers: providers,
            clock: clock,
            sleepClock: sleepClock,
            metrics: metrics,
            workerName: workerName,
            logger: logger
        )
    }

    /// Who may call each method: the gateway serves the apps; authctl reads delivery states
    /// and may record a provider's report.
    public var allowedCallers: Auth_Otp_V1_OTP.AllowedCallersByMethod {
        .init(
            start: .only([CallerName.gateway]),
            resend: .only([CallerName.gateway]),
            check: .only([CallerName.gateway]),
            // Trimmed to the callers of today (issue 19): no gateway route reads a delivery
            // status or relays a provider's report yet.
            getDeliveryStatus: .only([CallerName.authctl, CallerName.gateway]),
            reportDelivery: .only([CallerName.authctl]),
            reportTwilioStatus: .only([CallerName.gateway]),
            unlockDestination: .only([CallerName.authctl]),
            forgetDestination: .only([CallerName.gateway]),
            sendNotice: .only([CallerName.gateway])
        )
    }

    /// A message without a code to `destination` (docs/otp.md, "Notices"): through the outbox
    /// like a code, so it is delivered at least once. A test destination gets none (its codes
    /// are never sent either).
    public func sendNotice(
        request: Auth_Otp_V1_SendNoticeRequest,
        context: ServerContext
    ) async throws -> Auth_Otp_V1_SendNoticeResponse {
        var validator = FieldValidator()
        let destination = validator.destination(request.destination)
        let purpose: Purpose?
        switch request.notice {
        case .contactChanged: purpose = .contactChanged
        case .signupAttempted: purpose = .signupAttempted
        default:
            purpose = nil
            validator.fail("notice", "required", "contact_changed or signup_attempted.")
        }
        let locale = validator.locale(request.locale)
        let ip = validator.clientIP(request.clientIP, context: context)
        guard validator.isValid, let destination, let purpose else { throw OTPError(invalid: validator) }
        guard configuration.testDestinations[destination.normalized] == nil else {
            return Auth_Otp_V1_SendNoticeResponse()
        }
        let now = clock.microsecondNow()
        try await store.writeNotice(
            id: CodeMAC.newID(),
            messageID: CodeMAC.newID(),
            purpose: purpose,
            // A sign-up attempt is anyone's to make: one notice an hour is enough to warn.
            unlessWrittenSince: purpose == .signupAttempted ? now.addingTimeInterval(-3600) : nil,
            destination: destination,
            locale: locale,
            clientIP: ip,
            now: now,
            expiresAt: now.addingTimeInterval(configuration.codeLifetime.timeInterval)
        )
        return Auth_Otp_V1_SendNoticeResponse()
    }

    public func forgetDestination(
        request: Auth_Otp_V1_ForgetDestinationRequest,
        context: ServerContext
    ) async throws -> Auth_Otp_V1_ForgetDestinationResponse {
        let destination = try Self.destination(request.destination)
        let deleted = try await store.forget(destination: destination.normalized)
        return Auth_Otp_V1_ForgetDestinationResponse(verificationsDeleted: UInt32(clamping: deleted))
    }

    // MARK: Operators

    public func unlockDestination(
        request: Auth_Otp_V1_UnlockDestinationRequest,
        context: ServerContext
    ) async throws -> Auth_Otp_V1_UnlockDestinationResponse {
        let destination = try Self.destination(request.destination)
        let wasLocked = try await store.unlock(
            destination: destination.normalized,
            maxConsecutive: configuration.maxConsecutiveFailures
        )
        logger.notice(
            "A destination was unlocked",
            metadata: ["otp.destination": "\(destination.masked)", "otp.was_locked": "\(wasLocked)"]
        )
        return Auth_Otp_V1_UnlockDestinationResponse(wasLocked: wasLocked)
    }

    // MARK: Start

    public func start(
        request: Auth_Otp_V1_StartRequest,
        context: ServerContext
    ) async throws -> Auth_Otp_V1_StartResponse {
        var validator = FieldValidator()
        let destination = validator.destination(request.destination)
        let purpose = Purpose(request.purpose)
        if purpose == nil {
            validator.fail("purpose", "required", "login, signup, verify, password_reset or change_contact.")
        }
        let locale = validator.locale(request.locale)
        let ip = validator.clientIP(request.clientIP, context: context)
        if request.subject.utf8.count > 128 { validator.fail("subject", "too_long", "At most 128 bytes.") }
        let subject = request.subject
        let linkBase = request.linkBase
        if !linkBase.isEmpty {
            if !LinkToken.isAcceptableBase(linkBase) {
                validator.fail(
                    "link_base",
                    "invalid_value",
                    "An http or https URL of printable ASCII, at most 1024 bytes."
                )
            } else if destination?.channel == .sms {
                validator.fail("link_base", "invalid_value", "Only an email carries a link.")
            }
        }
        guard validator.isValid, let destination, let purpose else {
            throw OTPError(invalid: validator)
        }
        if destination.channel == .sms,
            let refusal = StartDecision.smsRefusal(callingCode: destination.callingCode, configuration: configuration)
        {
            throw refusal
        }

        // The per-IP budget counts an IPv6 client by its /64 (issue 19, item 2).
        let ipKey = ip.isEmpty ? "" : IPAddress.rateLimitKey(of: ip)
        let now = clock.microsecondNow()
        let id = CodeMAC.newID()
        let testCode = configuration.testDestinations[destination.normalized]
        let code = testCode ?? SecureRandom.numericCode(digits: configuration.codeDigits)
        let mac = codes.mac(verificationID: id, code: code)
        let expiresAt = now.addingTimeInterval(configuration.codeLifetime.timeInterval)
        let configuration = self.configuration
        let store = self.store
        // The message goes to this process's dispatcher already claimed when it has room
        // (OutboxHandoff), else to the outbox with a NOTIFY. A test destination sends nothing.
        let messageID = CodeMAC.newID()
        let handoff = self.handoff
        // A decoy (issue 19, item 7) passes through every limit like a real start, and sends nothing.
        let decoy = request.decoy
        let reservation = testCode == nil && !decoy ? handoff.reserve(now: now) : nil
        var handedOver = false
        defer { if reservation != nil && !handedOver { handoff.release() } }
        // Three statements (locks, every limit's figures, every write) in two round trips: the locks
        // travel with the figures.
        let outcome = try await store.pool.transaction { connection -> StartDecision in
            let attemptsSince = now.addingTimeInterval(-configuration.attemptWindow.timeInterval)
            guard testCode == nil else {
                // A test destination passes every start limit and is never sent; a lock
                // from its wrong codes holds, as for any destination.
                try store.lock(connection, "destination:\(destination.normalized)")
                let decision = StartDecision(
                    testDestinationLocks: try store.locks(connection, destination: destination.normalized, now: now),
                    now: now,
                    configuration: configuration
                )
                if case .start = decision {
                    try store.insertVerification(
                        connection,
                        id: id,
                        destination: destination,
                        purpose: purpose,
                        locale: locale,
                        clientIP: ip,
                        codeMAC: mac,
                        now: now,
                        expiresAt: expiresAt,
                        test: true,
                        subject: subject
                    )
                }
                return decision
            }
            // The destination's lock first, then the client IP's: always in this order.
            try store.lock(
                connection,
                keys: ["destination:\(destination.normalized)"] + (ipKey.isEmpty ? [] : ["ip:\(ipKey)"])
            )
            let hourAgo = now.addingTimeInterval(-3_600)
            let figures = try store.startFigures(
                connection,
                destination: destination,
                clientIPKey: ipKey,
                now: now,
                attemptsSince: attemptsSince,
                hourAgo: hourAgo,
                destinationLimit: configuration.startsPerDestinationPerHour,
                ipLimit: configuration.startsPerIPPerHour
            )
            let decision = StartDecision(figures, destination: destination, now: now, configuration: configuration)
            guard case .start = decision else { return decision }
            try store.writeStartAndCommit(
                connection,
                id: id,
                messageID: messageID,
                destination: destination,
                purpose: purpose,
                locale: locale,
                clientIP: ip,
                clientIPKey: ipKey,
                codeMAC: mac,
                code: code,
                now: now,
                expiresAt: expiresAt,
                claim: reservation,
                decoy: decoy,
                subject: subject,
                linkBase: linkBase
            )
            return decision
        }
        switch outcome {
        case .refuse(let error):
            metrics.refused(error.code.reason, channel: destination.channel, callingCode: destination.callingCode)
            throw error
        case .start(let remaining):
            if reservation != nil {
                handedOver = true
                handoff.hand(
                    ClaimedMessage(
                        id: messageID,
                        verificationID: id,
                        channel: destination.channel,
                        destination: destination.normalized,
                        callingCode: destination.callingCode,
                        code: code,
                        purpose: purpose.rawValue,
                        locale: locale,
                        createdAt: now,
                        providerIndex: 0,
                        attempts: 1,
                        linkBase: linkBase
                    )
                )
            }
            metrics.started(channel: destination.channel, callingCode: destination.callingCode, test: testCode != nil)
            return Auth_Otp_V1_StartResponse(
                verificationID: id.uuidString.lowercased(),
                channel: destination.channel.proto,
                maskedDestination: destination.masked,
                expiresIn: UInt32(configuration.codeLifetime.components.seconds),
                resendAfter: UInt32(configuration.firstResendDelay.components.seconds),
                attemptsRemaining: UInt32(remaining)
            )
        }
    }

    // MARK: Resend

    enum ResendOutcome: Sendable {
        case resent(VerificationRow, attemptsRemaining: Int, resendsRemaining: Int)
        case refused(OTPError)
    }

    public func resend(
        request: Auth_Otp_V1_ResendRequest,
        context: ServerContext
    ) async throws -> Auth_Otp_V1_ResendResponse {
        var validator = FieldValidator()
        let id = validator.uuid(request.verificationID, field: "verification_id", name: "a verification id")
        _ = validator.clientIP(request.clientIP, context: context)
        guard validator.isValid, let id else {
            throw OTPError(invalid: validator)
        }
        let now = clock.microsecondNow()
        let configuration = self.configuration
        let store = self.store
        let codes = self.codes
        let outcome = try await store.pool.transaction { connection -> ResendOutcome in
            guard let row = try store.lockVerification(connection, id: id), row.status != "verified" else {
                return .refused(Self.notFound())
            }
            let destination = row.destination
            try store.lock(connection, "destination:\(destination.normalized)")
            if let refusal = try store.locks(connection, destination: destination.normalized, now: now)
                .refusal(now: now, maxConsecutive: configuration.maxConsecutiveFailures)
            {
                return .refused(refusal)
            }
            guard row.status == "pending" else { return .refused(Self.notFound()) }
            if let refusal = ResendDecision.tooSoon(row, now: now, configuration: configuration) {
                return .refused(refusal)
            }
            var resendsLeft = configuration.maxResends
            if !row.testDestination {
                let resends = try store.events(
                    connection,
                    "resend",
                    destination.normalized,
                    since: now.addingTimeInterval(-configuration.resendWindow.timeInterval)
                )
                switch ResendDecision.budget(resends: resends, now: now, configuration: configuration) {
                case .success(let left): resendsLeft = left
                case .failure(let refusal): return .refused(refusal)
                }
            }
            let code =
                configuration.testDestinations[destination.normalized]
                ?? SecureRandom.numericCode(digits: configuration.codeDigits)
            let expiresAt = now.addingTimeInterval(configuration.codeLifetime.timeInterval)
            try store.replaceCode(
                connection,
                id: id,
                codeMAC: codes.mac(verificationID: id, code: code),
                now: now,
                expiresAt: expiresAt
            )
            var updated = row
            updated.expiresAt = expiresAt
            let wrong = try store.events(
                connection,
                "wrong_code",
                destination.normalized,
                since: now.addingTimeInterval(-configuration.attemptWindow.timeInterval)
            ).count
            if !row.testDestination {
                try store.record(connection, "resend", destination.normalized, at: now)
            }
            if !row.testDestination && !row.decoy {
                try store.supersede(connection, verificationID: id, now: now)
                try store.enqueue(
                    connection,
                    verificationID: id,
                    destination: destination,
                    code: code,
                    purpose: row.purpose,
                    locale: row.locale,
                    linkBase: row.linkBase,
                    now: now
                )
            }
            return .resent(
                updated,
                attemptsRemaining: max(0, configuration.maxWrongCodes - wrong),
                resendsRemaining: resendsLeft
            )
        }
        switch outcome {
        case .refused(let error):
            throw error
        case .resent(let row, let attempts, let resends):
            metrics.resent(channel: row.destination.channel, callingCode: row.destination.callingCode)
            return Auth_Otp_V1_ResendResponse(
                verificationID: id.uuidString.lowercased(),
                channel: row.destination.channel.proto,
                maskedDestination: row.destination.masked,
                expiresIn: UInt32(configuration.codeLifetime.components.seconds),
                resendAfter: UInt32(configuration.resendInterval.components.seconds),
                attemptsRemaining: UInt32(attempts),
                resendsRemaining: UInt32(max(0, resends))
            )
        }
    }

    // MARK: Check

    enum CheckOutcome: Sendable {
        case verified(VerificationRow)
        case refused(OTPError)
        /// A wrong code; `locked` when it was the last allowed one.
        case wrong(remaining: Int, locked: Bool, VerificationRow)
    }

    /// One transaction: the verification's row lock (`FOR UPDATE`) serializes every check of
    /// it, and the destination's advisory lock every check and start of the destination, so
    /// the count of wrong codes cannot be overshot by concurrent calls, and a right code
    /// succeeds once.
    public func check(
        request: Auth_Otp_V1_CheckRequest,
        context: ServerContext
    ) async throws -> Auth_Otp_V1_CheckResponse {
        var validator = FieldValidator()
        // By id, or (the Supabase door) by the destination's newest pending verification.
        var id: UUID?
        var byDestination: Destination?
        var presented = request.code.trimmingWhitespace()
        if !request.linkToken.isEmpty {
            // A link's token names its verification and carries its code.
            guard request.verificationID.isEmpty, request.destination.isEmpty, request.code.isEmpty else {
                validator.fail("link_token", "invalid_value", "Give link_token alone, without id, destination or code.")
                throw OTPError(invalid: validator)
            }
            guard let token = LinkToken(request.linkToken) else { throw Self.notFound() }
            id = token.verificationID
            presented = token.code
        } else if request.destination.isEmpty {
            id = validator.uuid(request.verificationID, field: "verification_id", name: "a verification id")
        } else if !request.verificationID.isEmpty {
            validator.fail("destination", "invalid_value", "Give verification_id or destination, not both.")
        } else {
            byDestination = validator.destination(request.destination)
            if request.acceptedPurposes.isEmpty {
                validator.fail("accepted_purposes", "required", "Required with destination.")
            }
        }
        if presented.isEmpty {
            validator.fail("code", "required", "The code is required.")
        } else if request.code.utf8.count > 32 {
            validator.fail("code", "too_long", "At most 32 bytes.")
        }
        _ = validator.clientIP(request.clientIP, context: context)
        var accepted: Set<Purpose> = []
        for (index, value) in request.acceptedPurposes.enumerated() {
            guard let purpose = Purpose(value) else {
                validator.fail(
                    "accepted_purposes[\(index)]",
                    "invalid_value",
                    "login, signup, verify, password_reset or change_contact."
                )
                continue
            }
            accepted.insert(purpose)
        }
        guard validator.isValid, id != nil || byDestination != nil else {
            throw OTPError(invalid: validator)
        }
        let acceptedPurposes = accepted
        let verificationID = id
        let lookedUp = byDestination
        let code = presented
        let now = clock.microsecondNow()
        let configuration = self.configuration
        let store = self.store
        let codes = self.codes
        let outcome = try await store.pool.transaction { connection -> CheckOutcome in
            let found =
                if let verificationID {
                    try store.lockVerification(connection, id: verificationID)
                } else if let lookedUp {
                    try store.lockNewestPendingVerification(
                        connection,
                        destination: lookedUp,
                        purposes: acceptedPurposes
                    )
                } else {
                    VerificationRow?.none
                }
            guard let row = found, row.status != "verified",
                acceptedPurposes.isEmpty || acceptedPurposes.contains(row.purpose)
            else {
                return .refused(Self.notFound())
            }
            let id = row.id
            let destination = row.destination.normalized
            try store.lock(connection, "destination:\(destination)")
            if let refusal = try store.locks(connection, destination: destination, now: now)
                .refusal(now: now, maxConsecutive: configuration.maxConsecutiveFailures)
            {
                return .refused(refusal)
            }
            if let refusal = CheckDecision.refusal(row, now: now) { return .refused(refusal) }
            if codes.matches(row.codeMAC, verificationID: id, code: code) {
                let countsForPumping = !row.testDestination && row.destination.channel == .sms
                try store.markVerifiedAndCommit(
                    connection,
                    id: id,
                    destination: destination,
                    now: now,
                    pumpingCallingCode: countsForPumping ? row.destination.callingCode : nil,
                    startedAt: row.createdAt
                )
                return .verified(row)
            }
            // A test destination's wrong codes count too (issue 19, item 3): its code is fixed.
            try store.record(connection, "wrong_code", destination, at: now)
            try store.countConsecutiveFailure(connection, destination: destination, at: now)
            let wrong = try store.events(
                connection,
                "wrong_code",
                destination,
                since: now.addingTimeInterval(-configuration.attemptWindow.timeInterval)
            ).count
            let (remaining, lockedUntil) = CheckDecision.afterWrongCode(
                wrongInWindow: wrong,
                now: now,
                configuration: configuration
            )
            if let lockedUntil {
                try store.markFailed(connection, id: id)
                try store.lockDestination(connection, destination: destination, until: lockedUntil)
            }
            return .wrong(remaining: remaining, locked: lockedUntil != nil, row)
        }
        switch outcome {
        case .refused(let error):
            throw error
        case .wrong(let remaining, let locked, let row):
            metrics.wrongCode(channel: row.destination.channel)
            if locked {
                metrics.locked(channel: row.destination.channel)
                logger.notice(
                    "A destination entered too many wrong codes and is locked",
                    metadata: [
                        "otp.verification_id": "\(row.id)", "otp.destination": "\(row.destination.masked)",
                        "otp.locked_seconds": "\(configuration.lockout.components.seconds)",
                    ]
                )
            }
            throw OTPError(.invalidCode, "The code is not right.", attemptsRemaining: UInt32(remaining))
        case .verified(let row):
            metrics.verified(channel: row.destination.channel, callingCode: row.destination.callingCode)
            return Auth_Otp_V1_CheckResponse(
                destination: row.destination.normalized,
                channel: row.destination.channel.proto,
                purpose: row.purpose.proto,
                subject: row.subject
            )
        }
    }

    // MARK: Delivery state

    public func getDeliveryStatus(
        request: Auth_Otp_V1_GetDeliveryStatusRequest,
        context: ServerContext
    ) async throws -> Auth_Otp_V1_GetDeliveryStatusResponse {
        var validator = FieldValidator()
        let id = validator.uuid(request.verificationID, field: "verification_id", name: "a verification id")
        guard validator.isValid, let id else {
            throw OTPError(invalid: validator)
        }
        let now = clock.microsecondNow()
        guard
            let status = try await store.deliveryStatus(
                verificationID: id,
                resendWindowStart: now.addingTimeInterval(-configuration.resendWindow.timeInterval),
                maxResends: configuration.maxResends
            )
        else {
            throw Self.notFound()
        }
        let destination = Destination(stored: status.destination)
        var response = Auth_Otp_V1_GetDeliveryStatusResponse(
            channel: destination.channel.proto,
            maskedDestination: destination.masked
        )
        response.pending = status.status == "pending"
        if response.pending {
            response.expiresIn = status.expiresAt > now ? secondsUntil(status.expiresAt, from: now) : 0
            (response.resendAfter, response.resendsRemaining) = ResendDecision.outlook(
                status,
                now: now,
                configuration: configuration
            )
        }
        if status.test {
            response.state = .notSentTestDestination
            return response
        }
        if status.decoy {
            // Answered as a sent message, so the id tells nothing a real one would not.
            response.state = .sent
            response.updatedAt = status.lastSentAt.unixSeconds
            response.messages = UInt32(clamping: status.resends + 1)
            return response
        }
        if let record = status.record {
            response.state =
                switch record.state {
                case "queued", "sending": .queued
                case "sent": .sent
                case "delivered": .delivered
                default: .failed
                }
            response.provider = record.provider
            response.attempts = UInt32(clamping: record.attempts)
            response.updatedAt = record.updatedAt.unixSeconds
            response.lastError = record.lastError
            response.messages = UInt32(clamping: record.messages)
        }
        return response
    }

    public func reportDelivery(
        request: Auth_Otp_V1_ReportDeliveryRequest,
        context: ServerContext
    ) async throws -> Auth_Otp_V1_ReportDeliveryResponse {
        guard !request.providerMessageID.isEmpty, request.providerMessageID.utf8.count <= 128 else {
            throw OTPError(
                .invalidArgument,
                "The request has invalid fields.",
                fieldViolations: [.init(field: "provider_message_id", reason: "required", description: "1-128 bytes.")]
            )
        }
        let found = try await store.reportDelivery(
            providerMessageID: request.providerMessageID,
            delivered: request.delivered,
            error: String(request.error.prefix(256)),
            now: clock.microsecondNow()
        )
        if found { metrics.reported(delivered: request.delivered) }
        return Auth_Otp_V1_ReportDeliveryResponse(found: found)
    }

    /// A Twilio status callback relayed by the gateway: verified with the auth token (constant
    /// time), then `delivered` → delivered; `undelivered`/`failed` → not, with Twilio's
    /// `ErrorCode`; any other status (`queued`, `sent`, …) changes nothing (`found` false).
    public func reportTwilioStatus(
        request: Auth_Otp_V1_TwilioStatusCallback,
        context: ServerContext
    ) async throws -> Auth_Otp_V1_ReportDeliveryResponse {
        guard request.url.utf8.count <= 2048, request.parameters.count <= 64,
            request.parameters.allSatisfy({ $0.name.utf8.count <= 128 && $0.value.utf8.count <= 2048 })
        else {
            throw OTPError(.invalidArgument, "The callback is larger than any Twilio sends.")
        }
        let parameters = request.parameters.map { (name: $0.name, value: $0.value) }
        guard let authToken = configuration.twilioAuthToken,
            ConstantTime.equals(
                Array(TwilioProvider.signature(url: request.url, parameters: parameters, authToken: authToken).utf8),
                Array(request.signature.utf8)
            )
        else {
            throw OTPError(.invalidSignature, "The callback is not signed with the Twilio auth token.")
        }
        func value(_ name: String) -> String? { parameters.first { $0.name == name }?.value }
        guard let sid = value("MessageSid"), !sid.isEmpty, let status = value("MessageStatus") else {
            throw OTPError(.invalidArgument, "A status callback names MessageSid and MessageStatus.")
        }
        let delivered: Bool
        switch status {
        case "delivered": delivered = true
        case "undelivered", "failed": delivered = false
        default: return Auth_Otp_V1_ReportDeliveryResponse(found: false)
        }
        return try await reportDelivery(
            request: Auth_Otp_V1_ReportDeliveryRequest(
                providerMessageID: sid,
                delivered: delivered,
                error: delivered ? "" : "twilio: \(status) (ErrorCode \(value("ErrorCode") ?? "none"))"
            ),
            context: context
        )
    }

    // MARK: Helpers

    /// Every method's failures become statuses in one place, the same for the three services
    /// (AuthServiceCore's ``ServiceErrorInterceptor``), which also logs INTERNAL and UNAVAILABLE.
    public var interceptors: [any RPCServerInterceptor] {
        [ServiceErrorInterceptor(service: "otp", logger: logger)]
    }

    static func notFound() -> OTPError {
        OTPError(.verificationNotFound, "No such verification, or it was already used.")
    }

    /// The `destination` field of UnlockDestination and ForgetDestination.
    static func destination(_ text: String) throws(OTPError) -> Destination {
        var validator = FieldValidator()
        guard let destination = validator.destination(text) else { throw OTPError(invalid: validator) }
        return destination
    }

    static func tooManyAttempts(until: Date, now: Date) -> OTPError {
        OTPError(
            .tooManyAttempts,
            "Too many wrong codes; try again later.",
            retryAfterSeconds: secondsUntil(until, from: now)
        )
    }
}

/// otp-dispatch's field rules, on the validator every service shares.
extension FieldValidator {
    /// A phone number or an email address (``Destination``).
    mutating func destination(_ value: String, field: String = "destination") -> Destination? {
        if value.isEmpty {
            fail(field, "required", "A phone number or email address is required.")
            return nil
        }
        guard let destination = Destination(parsing: value) else {
            fail(field, "invalid_value", "An E.164 phone number (+ and 8-15 digits) or an email address.")
            return nil
        }
        return destination
    }
}
