import AuthAPI
import AuthCrypto
import AuthPostgres
import AuthProtobuf
import AuthRPC
import AuthRPCNIO
import AuthTestSupport
import AuthTime
import Foundation
import Hummingbird
import Logging
import NIOCore
import Synchronization
import Testing

@testable import IdentityService

let testLogger: Logger = PostgresTestDatabase.makeLogger(label: "auth.tests.identity")
let rpcSecret: [UInt8] = SecureRandom.bytes(count: 32)
/// Cheap scrypt for tests (N = 2^10); the timing test sets its own.
let testScrypt = ScryptPasswordHasher.Parameters(logN: 10, r: 8, p: 1)
let goodPassword = "Blue-Harbor-42"

/// An identity service on its own schema of the test database, behind a real RPC server on a
/// loopback port, called over TCP as `gateway` (``client``) and as `authctl` (``operatorClient``).
struct IdentityFixture: Sendable {
    let service: IdentityService
    let client: Auth_Identity_V1_Identity.Client
    let operatorClient: Auth_Identity_V1_Identity.Client
    let clock: ManualClock
    let pool: PostgresPool
    let schema: String
    let port: Int

    func signUp(
        email: String = "asha@example.com",
        password: String = goodPassword,
        displayName: String = "Asha K"
    ) async throws -> Auth_Identity_V1_User {
        try #require(
            try await client.signUp(
                Auth_Identity_V1_SignUpRequest(
                    displayName: displayName,
                    email: email,
                    password: password,
                    clientIP: "203.0.113.7"
                )
            ).user
        )
    }

    func signIn(
        email: String = "asha@example.com",
        password: String = goodPassword
    ) async throws
        -> Auth_Identity_V1_User
    {
        try #require(
            try await client.signInWithPassword(
                Auth_Identity_V1_SignInWithPasswordRequest(email: email, password: password, clientIP: "203.0.113.7")
            ).user
        )
    }

    /// Rows of one of the service's tables, by a query over the fixture's schema (`@` = schema).
    func query(_ sql: String, _ parameters: [PostgresValue] = []) async throws -> PostgresRows {
        try await pool.query(sql.replacingOccurrences(of: "@", with: "\"\(schema)\"."), parameters)
    }

    /// A client calling as `caller`, over its own TCP connection.
    func makeClient(caller: String) -> (Auth_Identity_V1_Identity.Client, TCPClientTransport) {
        makeTCPClient(port: port, caller: caller)
    }
}

/// Runs `body` with an identity service on a fresh schema, served over TCP.
func withIdentityService<R>(
    clock: ManualClock = ManualClock(),
    maxConnections: Int = 8,
    fetcher: (any JWKSFetching)? = nil,
    configure: (inout IdentityServiceConfiguration) -> Void = { _ in },
    _ body: (IdentityFixture) async throws -> R
) async throws -> R {
    try await PostgresTestDatabase.withTestSchema(maxConnections: maxConnections, logger: testLogger) { pool, schema in
        var configuration = IdentityServiceConfiguration()
        configuration.schema = schema
        configuration.scryptParameters = testScrypt
        configuration.hashConcurrency = 2
        configure(&configuration)
        let service = try await IdentityService.start(
            database: pool,
            configuration: configuration,
            clock: clock,
            fetcher: fetcher,
            logger: testLogger
        )
        var router = RPCRouter()
        router.register(service)
        let server = try RPCServer(
            configuration: RPCServerConfiguration(serviceName: "identity", secret: rpcSecret),
            router: router,
            logger: testLogger
        )
        let port = try await server.bind()
        let running = Task { try await server.run() }
        let (client, clientTransport) = makeTCPClient(port: port, caller: "gateway")
        let (operatorClient, operatorTransport) = makeTCPClient(port: port, caller: "authctl")
        let fixture = IdentityFixture(
            service: service,
            client: client,
            operatorClient: operatorClient,
            clock: clock,
            pool: pool,
            schema: schema,
            port: port
        )
        let result: Result<R, any Error>
        do {
            result = .success(try await body(fixture))
        } catch {
            result = .failure(error)
        }
        await clientTransport.shutdown()
        await operatorTransport.shutdown()
        server.beginShutdown()
        _ = try? await running.value
        await service.shutdown()
        return try result.get()
    }
}

private func makeTCPClient(port: Int, caller: String) -> (Auth_Identity_V1_Identity.Client, TCPClientTransport) {
    let transport = TCPClientTransport(
        configuration: RPCClientConfiguration(
            addresses: [RPCAddress(host: "127.0.0.1", port: port)],
            connectionsPerAddress: 2,
            serviceName: caller,
            secret: rpcSecret
        ),
        logger: testLogger
    )
    return (
        Auth_Identity_V1_Identity.Client(
            wrapping: RPCClient(transport: transport, callerService: caller, defaultTimeout: .seconds(30))
        ),
        transport
    )
}

// MARK: ID tokens

/// A provider for tests: its signing keys (made in the test) and a JWKS it serves from a real
/// HTTP server on 127.0.0.1 (plain HTTP is allowed for loopback), counting the fetches.
final class TestProvider: Sendable {
    let key: ES256PrivateKey
    let kid: String
    let issuer: String
    let clientID: String
    private let published: Mutex<[JWK]>
    private let fetches = Atomic<Int>(0)

    init(issuer: String = "https://issuer.test", clientID: String = "com.laten.app") throws {
        self.key = try ES256PrivateKey()
        self.kid = "k-" + Base64URL.encode(SecureRandom.bytes(count: 6))
        self.issuer = issuer
        self.clientID = clientID
        self.published = Mutex([key.publicKey.jwk(kid: kid)])
    }

    var fetchCount: Int { fetches.load(ordering: .relaxed) }

    func publish(_ keys: [JWK]) { published.withLock { $0 = keys } }

    var jwksJSON: String {
        let set = JWKSet(keys: published.withLock { $0 })
        return String(decoding: (try? JSONEncoder().encode(set)) ?? Data(), as: UTF8.self)
    }

    func noteFetch() { fetches.add(1, ordering: .relaxed) }

    /// A signed ID token with the given claims (nil values are left out).
    func token(
        _ claims: [String: Any?],
        key: ES256PrivateKey? = nil,
        kid: String? = nil
    ) throws -> String {
        let payload = try JSONSerialization.data(
            withJSONObject: claims.compactMapValues { $0 },
            options: [.sortedKeys]
        )
        return try JWS.signES256(payload: Array(payload), key: key ?? self.key, kid: kid ?? self.kid)
    }

    /// Claims of a valid token at `now`.
    func claims(
        subject: String = "001234.abcdef",
        nonce: String? = nil,
        email: String? = nil,
        emailVerified: Any? = nil,
        now: Date,
        lifetime: TimeInterval = 600
    ) -> [String: Any?] {
        [
            "iss": issuer, "aud": clientID, "sub": subject,
            "iat": Int(now.timeIntervalSince1970), "exp": Int(now.timeIntervalSince1970 + lifetime),
            "nonce": nonce, "email": email, "email_verified": emailVerified,
            "jti": Base64URL.encode(SecureRandom.bytes(count: 12)),
        ]
    }
}

/// Serves `provider.jwksJSON` at `http://127.0.0.1:<port>/jwks` while `body` runs.
func withJWKSServer<R: Sendable>(
    _ provider: TestProvider,
    _ body: (URL) async throws -> R
) async throws -> R {
    let router = Router()
    router.get("/jwks") { _, _ -> Response in
        provider.noteFetch()
        return Response(
            status: .ok,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: provider.jwksJSON))
        )
    }
    let (portStream, portContinuation) = AsyncStream.makeStream(of: Int.self)
    let app = Application(
        router: router,
        configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { channel in
            portContinuation.yield(channel.localAddress?.port ?? 0)
            portContinuation.finish()
        },
        logger: Logger(label: "jwks-test-server", factory: { _ in SwiftLogNoOpLogHandler() })
    )
    let running = Task { try await app.runService(gracefulShutdownSignals: []) }
    var port = 0
    for await value in portStream {
        port = value
        break
    }
    let result: Result<R, any Error>
    do {
        result = .success(try await body(URL(string: "http://127.0.0.1:\(port)/jwks")!))
    } catch {
        result = .failure(error)
    }
    running.cancel()
    _ = try? await running.value
    return try result.get()
}

/// An identity service with `provider` enabled as Apple, Google and Facebook alike (same keys),
/// its JWKS served over HTTP from the test.
func withProviderService<R: Sendable>(
    _ provider: TestProvider,
    clock: ManualClock = ManualClock(),
    enabled: [IdentityProvider] = IdentityProvider.allCases,
    _ body: (IdentityFixture) async throws -> R
) async throws -> R {
    try await withJWKSServer(provider) { url in
        try await withIdentityService(
            clock: clock,
            configure: { configuration in
                for name in enabled {
                    configuration.providers[name] = OIDCProviderConfiguration(
                        provider: name,
                        clientIDs: [provider.clientID, "other.client"],
                        issuers: [provider.issuer],
                        jwksURL: url
                    )
                }
            }
        ) { fixture in
            try await body(fixture)
        }
    }
}

extension IdentityFixture {
    func signIn(
        _ provider: Auth_Identity_V1_Provider,
        token: String,
        rawNonce: String = "",
        displayName: String = "",
        nonceHashed: Bool = false
    ) async throws -> Auth_Identity_V1_SignInWithIDTokenResponse {
        try await client.signInWithIDToken(
            Auth_Identity_V1_SignInWithIDTokenRequest(
                provider: provider,
                idToken: token,
                rawNonce: rawNonce,
                displayName: displayName,
                clientIP: "198.51.100.4",
                nonceHashed: nonceHashed
            )
        )
    }
}

func appleNonce(_ raw: String) -> String { hex(SHA256.hash(raw)) }
