import AuthAPI
import AuthCrypto
import AuthPostgres
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import AuthTime
import Foundation
import Logging
import Synchronization
import Testing

@testable import SessionService

/// A session service on its own schema of the test database, called through the in-process
/// transport as `gateway` (``client``) or `authctl` (``operatorClient``).
struct SessionFixture: Sendable {
    let service: SessionService
    let client: Auth_Session_V1_Session.Client
    let operatorClient: Auth_Session_V1_Session.Client
    let clock: ManualClock
    let pool: PostgresPool
    let schema: String
    let configuration: SessionServiceConfiguration

    /// Another replica on the same schema (own key cache, same master key and clock).
    func replica() async throws -> (SessionService, Auth_Session_V1_Session.Client) {
        let other = try await SessionService.start(
            database: pool,
            configuration: configuration,
            clock: clock,
            logger: testLogger
        )
        return (other, makeClient(other, caller: "gateway"))
    }

    /// Issues a session for `userID`.
    func issue(
        userID: String = "user-1",
        amr: [String] = ["otp_sms"],
        platform: String = "ios",
        clientIP: String = "203.0.113.7"
    ) async throws -> Auth_Session_V1_TokenPair {
        let response = try await client.issue(
            Auth_Session_V1_IssueRequest(
                userID: userID,
                amr: amr,
                device: Auth_Session_V1_Device(
                    platform: platform,
                    name: "Asha's iPhone",
                    userAgent: "Laten/1.0 iOS/18"
                ),
                clientIP: clientIP
            )
        )
        return try #require(response.tokens)
    }

    func refresh(_ token: String, clientIP: String = "") async throws -> Auth_Session_V1_TokenPair {
        try #require(
            try await client.refresh(Auth_Session_V1_RefreshRequest(refreshToken: token, clientIP: clientIP)).tokens
        )
    }

    func validate(_ token: String, checkSession: Bool = false) async throws -> Auth_Session_V1_ValidateResponse {
        try await client.validate(Auth_Session_V1_ValidateRequest(accessToken: token, checkSession: checkSession))
    }

    /// Rows of one of the service's tables, by a query over the fixture's schema.
    func query(_ sql: String, _ parameters: [PostgresValue] = []) async throws -> PostgresRows {
        try await pool.query(sql.replacingOccurrences(of: "@", with: "\"\(schema)\"."), parameters)
    }
}

let testLogger: Logger = PostgresTestDatabase.makeLogger(label: "auth.tests.session")

func makeClient(_ service: SessionService, caller: String) -> Auth_Session_V1_Session.Client {
    var router = RPCRouter()
    router.register(service)
    return Auth_Session_V1_Session.Client(
        wrapping: RPCClient(
            transport: InProcessTransport(router: router, authenticatedCaller: caller),
            callerService: caller
        )
    )
}

/// Runs `body` with a session service on a fresh schema.
func withSessionService<R>(
    clock: ManualClock = ManualClock(),
    maxConnections: Int = 8,
    configure: (inout SessionServiceConfiguration) -> Void = { _ in },
    _ body: (SessionFixture) async throws -> R
) async throws -> R {
    try await PostgresTestDatabase.withTestSchema(maxConnections: maxConnections, logger: testLogger) { pool, schema in
        var configuration = SessionServiceConfiguration(masterKey: .random())
        configuration.schema = schema
        configure(&configuration)
        let service = try await SessionService.start(
            database: pool,
            configuration: configuration,
            clock: clock,
            logger: testLogger
        )
        return try await body(
            SessionFixture(
                service: service,
                client: makeClient(service, caller: "gateway"),
                operatorClient: makeClient(service, caller: "authctl"),
                clock: clock,
                pool: pool,
                schema: schema,
                configuration: configuration
            )
        )
    }
}

/// The header and claims of a JWT, decoded without verification.
func decodeJWT(_ token: String) throws -> (header: [String: Any], claims: [String: Any]) {
    let parts = try JWS.parse(token)
    let header = try #require(try JSONSerialization.jsonObject(with: Data(parts.headerJSON)) as? [String: Any])
    let claims = try #require(try JSONSerialization.jsonObject(with: Data(parts.payload)) as? [String: Any])
    return (header, claims)
}

func kid(of token: String) throws -> String {
    try #require(try JWS.parse(token).header.kid)
}
