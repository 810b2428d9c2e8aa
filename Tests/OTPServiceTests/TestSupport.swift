import AuthAPI
import AuthCrypto
import AuthPostgres
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import AuthTime
import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import Testing

@testable import OTPService

let testLogger: Logger = PostgresTestDatabase.makeLogger(label: "auth.tests.otp")

func makeClient(_ service: OTPService, caller: String = "gateway") -> Auth_Otp_V1_OTP.Client {
    var router = RPCRouter()
    router.register(service)
    return Auth_Otp_V1_OTP.Client(
        wrapping: RPCClient(
            transport: InProcessTransport(router: router, authenticatedCaller: caller),
            callerService: caller
        )
    )
}

/// An otp service on its own schema of the test database, called as `gateway`.
struct OTPFixture: Sendable {
    let service: OTPService
    let client: Auth_Otp_V1_OTP.Client
    /// Called as `authctl`: the operator methods (delivery status, reports, unlock).
    var operatorClient: Auth_Otp_V1_OTP.Client { makeClient(service, caller: "authctl") }
    let clock: ManualClock
    let pool: PostgresPool
    let schema: String
    let configuration: OTPServiceConfiguration

    func start(
        _ destination: String,
        purpose: Auth_Otp_V1_Purpose = .login,
        locale: String = "",
        clientIP: String = "203.0.113.7"
    ) async throws -> Auth_Otp_V1_StartResponse {
        try await client.start(
            Auth_Otp_V1_StartRequest(destination: destination, purpose: purpose, locale: locale, clientIP: clientIP)
        )
    }

    /// `timeout` nil: the client's default (10 s).
    func check(_ id: String, _ code: String, timeout: Duration? = nil) async throws -> Auth_Otp_V1_CheckResponse {
        try await client.check(
            Auth_Otp_V1_CheckRequest(verificationID: id, code: code),
            options: CallOptions(timeout: timeout)
        )
    }

    func resend(_ id: String) async throws -> Auth_Otp_V1_ResendResponse {
        try await client.resend(Auth_Otp_V1_ResendRequest(verificationID: id))
    }

    /// The code of the verification's message still waiting in the outbox (the test reads what
    /// the provider would get).
    func queuedCode(_ id: String) async throws -> String {
        let rows = try await query(
            "SELECT code FROM @messages WHERE verification_id = $1 AND code IS NOT NULL ORDER BY created_at DESC LIMIT 1",
            [.uuid(try #require(UUID(uuidString: id)))]
        )
        return try #require(try rows.first?[0].string)
    }

    /// A code that is not the verification's.
    func wrongCode(for id: String) async throws -> String {
        let right = try await queuedCode(id)
        return right == "000000" ? "000001" : "000000"
    }

    /// Rows of one of the service's tables, by a query over the fixture's schema (`@table`).
    func query(_ sql: String, _ parameters: [PostgresValue] = []) async throws -> PostgresRows {
        try await pool.query(sql.replacingOccurrences(of: "@", with: "\"\(schema)\"."), parameters)
    }
}

func testConfiguration() -> OTPServiceConfiguration {
    OTPServiceConfiguration(secret: SecureRandom.bytes(count: 32))
}

/// Runs `body` with an otp service on a fresh schema.
func withOTPService<R>(
    clock: ManualClock = ManualClock(),
    maxConnections: Int = 8,
    configure: (inout OTPServiceConfiguration) -> Void = { _ in },
    _ body: (OTPFixture) async throws -> R
) async throws -> R {
    try await PostgresTestDatabase.withTestSchema(
        maxConnections: maxConnections,
        // 100 concurrent checks queue for the pool; a busy machine must not turn that into
        // pool timeouts.
        configure: { $0.acquireTimeout = .seconds(60) },
        logger: testLogger
    ) { pool, schema in
        var configuration = testConfiguration()
        configuration.schema = schema
        configure(&configuration)
        let service = try await OTPService.start(
            database: pool,
            configuration: configuration,
            clock: clock,
            logger: testLogger
        )
        return try await body(
            OTPFixture(
                service: service,
                client: makeClient(service),
                clock: clock,
                pool: pool,
                schema: schema,
                configuration: configuration
            )
        )
    }
}

/// A provider the test scripts: each send asks `outcome` (given how many sends it saw before)
/// and records the message.
final class ScriptedProvider: MessageProvider {
    let name: String
    private let outcome: @Sendable (Int) -> ProviderError?
    private let sentMessages = Mutex<[OutgoingMessage]>([])

    init(name: String, outcome: @escaping @Sendable (Int) -> ProviderError? = { _ in nil }) {
        self.name = name
        self.outcome = outcome
    }

    var sent: [OutgoingMessage] { sentMessages.withLock { $0 } }

    func send(_ message: OutgoingMessage) async throws -> ProviderReceipt {
        let index = sentMessages.withLock { list -> Int in
            list.append(message)
            return list.count - 1
        }
        if let error = outcome(index) { throw error }
        return ProviderReceipt(providerMessageID: "\(name)-\(message.id)")
    }
}

/// Runs `dispatcher` as the process would (LISTEN/NOTIFY, sweep, workers) during `body`.
func withRunningDispatcher<R>(_ dispatcher: OTPDispatcher, _ body: () async throws -> R) async throws -> R {
    try await withRunningServices([dispatcher], logger: testLogger, body)
}

/// Waits (polling the table, bounded) until every message of the fixture's outbox is in `state`.
func waitForAllMessages(
    _ otp: OTPFixture,
    state: String,
    count: Int,
    timeout: Duration = .seconds(60)
) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        let rows = try await otp.query(
            "SELECT count(*) FILTER (WHERE state = $1), count(*) FROM @messages",
            [.text(state)]
        )
        if try rows[0][0].int == count && rows[0][1].int == count { return true }
        try await Task.sleep(for: .milliseconds(50))
    }
    return false
}
