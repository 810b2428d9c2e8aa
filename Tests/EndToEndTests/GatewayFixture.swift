import AsyncHTTPClient
import AuthCrypto
import AuthPostgres
import AuthTestSupport
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The four executables as processes over a database of their own, with the test's own stand-ins
/// for the outside world: a webhook receiver that otp-dispatch delivers every code to, and a
/// JWKS server playing Apple. One fixture serves every test of ``GatewayEndToEndTests`` (the
/// suite trait ``GatewayFixtureTrait`` starts it before the first test and stops it after the
/// last); the tests that need other gateway settings or a service to stop start extra
/// processes of their own next to it.
final class GatewayFixture: Sendable {
    /// The fixture of the running suite.
    @TaskLocal static var current: GatewayFixture?

    static let appleClientID = "com.example.e2e"
    static let appleIssuer = "https://appleid.apple.com"

    let rpcSecret: String
    let otpSecret: String
    /// Fixed: session keeps its signing keys in the database, wrapped with it.
    let masterKey = ProcessEnvironment.masterKey
    let databaseURL: String
    let webhook: HTTPReceiver
    /// Receives the four processes' traces (OTLP/HTTP, JSON).
    let collector: HTTPReceiver
    let apple: AppleStandIn
    let session: ServiceProcess
    let identity: ServiceProcess
    let otp: ServiceProcess
    let gateway: ServiceProcess
    let sessionPort: Int
    let identityPort: Int
    let otpPort: Int
    let gatewayPort: Int
    let http: HTTPClient
    let database: PostgresPool
    private let extras = Mutex<[ServiceProcess]>([])

    private init(
        rpcSecret: String,
        otpSecret: String,
        databaseURL: String,
        webhook: HTTPReceiver,
        collector: HTTPReceiver,
        apple: AppleStandIn,
        session: (ServiceProcess, Int),
        identity: (ServiceProcess, Int),
        otp: (ServiceProcess, Int),
        gateway: (ServiceProcess, Int),
        http: HTTPClient,
        database: PostgresPool
    ) {
        self.rpcSecret = rpcSecret
        self.otpSecret = otpSecret
        self.databaseURL = databaseURL
        self.webhook = webhook
        self.collector = collector
        self.apple = apple
        (self.session, self.sessionPort) = session
        (self.identity, self.identityPort) = identity
        (self.otp, self.otpPort) = otp
        (self.gateway, self.gatewayPort) = gateway
        self.http = http
        self.database = database
    }

    var baseURL: String { "http://127.0.0.1:\(gatewayPort)" }

    // MARK: Starting and stopping

    /// Runs `body` with the whole system up, and stops it afterwards (processes, receivers, the
    /// database).
    static func run(_ body: (GatewayFixture) async throws -> Void) async throws {
        let apple = try AppleStandIn()
        try await HTTPReceiver.with(respond: { _, _ in (200, apple.jwksJSON) }) { jwksServer in
            try await HTTPReceiver.with { webhook in
                try await HTTPReceiver.with { collector in
                    try await withFreshDatabase { databaseURL, admin in
                        let rpcSecret = Data(SecureRandom.bytes(count: 32)).base64EncodedString()
                        let otpSecret = Data(SecureRandom.bytes(count: 32)).base64EncodedString()
                        let common = [
                            "AUTH_RPC_SECRET": rpcSecret,
                            "AUTH_DATABASE_URL": databaseURL,
                            "AUTH_LOG_LEVEL": "info",
                            // Traces on, as docs/deployment.md sets them, exported every 100 ms.
                            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(collector.port)",
                            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
                            "OTEL_BSP_SCHEDULE_DELAY": "100",
                        ]
                        func start(_ name: String, _ variables: [String: String]) async throws -> (ServiceProcess, Int)
                        {
                            let process = try ServiceProcess(
                                executable: name,
                                environment: common.merging(variables) { $1 }
                            )
                            return (process, try await process.listeningPort())
                        }
                        async let session = start(
                            "session",
                            sessionVariables(masterKey: ProcessEnvironment.masterKey)
                        )
                        async let identity = start(
                            "identity",
                            [
                                "AUTH_IDENTITY_PORT": "0",
                                // Cheap hashes: the tests sign in with passwords dozens of times.
                                "AUTH_IDENTITY_SCRYPT_LOG_N": "10",
                                // Every test comes from 127.0.0.1 (the budget's own test has its
                                // identity and its client addresses).
                                "AUTH_IDENTITY_ACCOUNT_CHECKS_PER_HOUR": "1000000",
                                "AUTH_OIDC_APPLE_CLIENT_IDS": appleClientID,
                                "AUTH_OIDC_APPLE_ISSUER": appleIssuer,
                                "AUTH_OIDC_APPLE_JWKS_URL": "http://127.0.0.1:\(jwksServer.port)/auth/keys",
                            ]
                        )
                        async let otp = start(
                            "otp-dispatch",
                            [
                                "AUTH_OTP_PORT": "0",
                                "AUTH_OTP_SECRET": otpSecret,
                                "AUTH_OTP_SMS_PROVIDER": "webhook",
                                "AUTH_OTP_EMAIL_PROVIDER": "webhook",
                                "AUTH_OTP_WEBHOOK_URL": "http://127.0.0.1:\(webhook.port)/otp",
                                "AUTH_OTP_WEBHOOK_SECRET": "e2e-webhook",
                                // Every test comes from 127.0.0.1.
                                "AUTH_OTP_STARTS_PER_IP_PER_HOUR": "1000000",
                                // The first resend at once (the resend flow), later ones 120 s apart
                                // (resend_too_soon).
                                "AUTH_OTP_RESEND_AFTER_SECONDS": "0",
                                "AUTH_OTP_SWEEP_INTERVAL_MS": "500",
                                // Checks the signatures of Twilio's status callbacks (no SMS goes to Twilio).
                                "AUTH_OTP_TWILIO_AUTH_TOKEN": GatewayFixture.twilioAuthToken,
                            ]
                        )
                        let started = try await (session: session, identity: identity, otp: otp)
                        let gatewayProcess = try ServiceProcess(
                            executable: "gateway",
                            environment: common.merging(
                                gatewayVariables(
                                    session: started.session.1,
                                    identity: started.identity.1,
                                    otp: started.otp.1,
                                    extra: [
                                        "AUTH_GATEWAY_RATE_LIMIT_PER_MINUTE": "1000000",
                                        "AUTH_PUBLIC_URL": GatewayFixture.publicURL,
                                        // Where the Supabase door's confirmation links send the browser.
                                        "AUTH_OAUTH_REDIRECT_URLS": GatewayFixture.confirmedURL,
                                    ]
                                )
                            ) { $1 }
                        )
                        let gatewayPort = try await Self.gatewayPort(gatewayProcess)
                        // Redirects are the browser sign-in's answers: the tests read them, never follow.
                        var httpSettings = HTTPClient.Configuration()
                        httpSettings.redirectConfiguration = .disallow
                        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: httpSettings)
                        let fixture = GatewayFixture(
                            rpcSecret: rpcSecret,
                            otpSecret: otpSecret,
                            databaseURL: databaseURL,
                            webhook: webhook,
                            collector: collector,
                            apple: apple,
                            session: started.session,
                            identity: started.identity,
                            otp: started.otp,
                            gateway: (gatewayProcess, gatewayPort),
                            http: http,
                            database: admin
                        )
                        do {
                            try await body(fixture)
                        } catch {
                            await fixture.stop()
                            try? await http.shutdown()
                            throw error
                        }
                        await fixture.stop()
                        try await http.shutdown()
                    }
                }
            }
        }
    }

    private func stop() async {
        for process in extras.withLock({ $0 }) { await process.terminate(grace: .seconds(5)) }
        await gateway.terminate(grace: .seconds(10))
        await otp.terminate(grace: .seconds(10))
        await identity.terminate(grace: .seconds(10))
        await session.terminate(grace: .seconds(10))
    }

    static func sessionVariables(masterKey: String) -> [String: String] {
        [
            "AUTH_SESSION_PORT": "0",
            "AUTH_MASTER_KEY": masterKey,
            // A replayed refresh token is a reuse at once: the reuse test need not wait out 10 s.
            "AUTH_SESSION_REFRESH_GRACE_SECONDS": "0",
            "AUTH_SESSION_KEY_PUBLISH_DELAY_SECONDS": "0",
        ]
    }

    static func gatewayVariables(session: Int, identity: Int, otp: Int, extra: [String: String]) -> [String: String] {
        [
            "AUTH_GATEWAY_PORT": "0",
            "AUTH_GATEWAY_ADMIN_PORT": "0",
            "AUTH_SESSION_ADDRESSES": "127.0.0.1:\(session)",
            "AUTH_IDENTITY_ADDRESSES": "127.0.0.1:\(identity)",
            "AUTH_OTP_ADDRESSES": "127.0.0.1:\(otp)",
        ].merging(extra) { $1 }
    }

    static func gatewayPort(_ process: ServiceProcess) async throws -> Int {
        let text = try await process.waitForLog(#"listening on [^\n]*:(\d+)"#)
        guard let port = Int(text) else { throw ServiceProcessError(message: "bad gateway port \(text)") }
        return port
    }

    /// Another gateway over the fixture's services (or `sessionPort`'s session, `identityPort`'s
    /// identity), with `variables` (its own rate limits, RPC timeout); stopped with the fixture
    /// unless the test stops it.
    func startGateway(
        sessionPort: Int? = nil,
        identityPort: Int? = nil,
        _ variables: [String: String]
    ) async throws -> (ServiceProcess, String) {
        var environment = ["AUTH_RPC_SECRET": rpcSecret, "AUTH_LOG_LEVEL": "info"]
        environment.merge(
            Self.gatewayVariables(
                session: sessionPort ?? self.sessionPort,
                identity: identityPort ?? self.identityPort,
                otp: otpPort,
                extra: variables
            )
        ) { $1 }
        let process = try ServiceProcess(executable: "gateway", environment: environment)
        extras.withLock { $0.append(process) }
        let port = try await Self.gatewayPort(process)
        return (process, "http://127.0.0.1:\(port)")
    }

    /// A second identity process over the same database, with `variables` (the browser sign-in's
    /// providers); stopped with the fixture.
    func startIdentity(_ variables: [String: String]) async throws -> (ServiceProcess, Int) {
        let environment = [
            "AUTH_RPC_SECRET": rpcSecret, "AUTH_LOG_LEVEL": "info", "AUTH_DATABASE_URL": databaseURL,
            "AUTH_IDENTITY_PORT": "0", "AUTH_IDENTITY_SCRYPT_LOG_N": "10",
        ].merging(variables) { $1 }
        let process = try ServiceProcess(executable: "identity", environment: environment)
        extras.withLock { $0.append(process) }
        return (process, try await process.listeningPort())
    }

    /// A second session process over the same database and keys (for the tests that stop it).
    func startSession() async throws -> (ServiceProcess, Int) {
        var environment = ["AUTH_RPC_SECRET": rpcSecret, "AUTH_LOG_LEVEL": "info", "AUTH_DATABASE_URL": databaseURL]
        environment.merge(Self.sessionVariables(masterKey: masterKey)) { $1 }
        let process = try ServiceProcess(executable: "session", environment: environment)
        extras.withLock { $0.append(process) }
        return (process, try await process.listeningPort())
    }

    /// A database of its own in the test cluster, dropped afterwards; `body` also gets a pool
    /// on it (for the few facts only the database shows).
    static func withFreshDatabase(_ body: (String, PostgresPool) async throws -> Void) async throws {
        let url = try await PostgresTestDatabase.connectionString()
        let name = "gateway_e2e_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
        var logger = Logger(label: "gateway-e2e")
        logger.logLevel = .critical
        let admin = PostgresPool(
            configuration: PostgresConfiguration(
                connectionString: url,
                maxConnections: 1,
                applicationName: "gateway-e2e-admin"
            ),
            logger: logger
        )
        try await admin.query("CREATE DATABASE \(identifier: name)")
        let fresh = url.replacingOccurrences(of: "dbname=auth", with: "dbname=\(name)")
        let pool = PostgresPool(
            configuration: PostgresConfiguration(
                connectionString: fresh,
                maxConnections: 2,
                applicationName: "gateway-e2e"
            ),
            logger: logger
        )
        do {
            try await body(fresh, pool)
        } catch {
            await pool.close()
            _ = try? await admin.query("DROP DATABASE IF EXISTS \(identifier: name) WITH (FORCE)")
            await admin.close()
            throw error
        }
        await pool.close()
        _ = try? await admin.query("DROP DATABASE IF EXISTS \(identifier: name) WITH (FORCE)")
        await admin.close()
    }

    // MARK: HTTP

    /// One answer of the gateway.
    struct Reply: CustomStringConvertible {
        var status: Int
        var headers: HTTPHeaders
        var text: String

        var json: [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
        }
        subscript(_ key: String) -> Any? { json[key] }
        var error: String? { json["error"] as? String }
        var message: String? { json["message"] as? String }
        func string(_ key: String) -> String? { json[key] as? String }
        func int(_ key: String) -> Int? { (json[key] as? NSNumber)?.intValue }
        var user: [String: Any] { json["user"] as? [String: Any] ?? [:] }
        var accessToken: String { string("access_token") ?? "" }
        var refreshToken: String { string("refresh_token") ?? "" }
        func header(_ name: String) -> String? { headers.first(name: name) }
        var description: String { "\(status) \(text)" }
    }

    /// Sends a request to `base` (the fixture's gateway by default). `json` is serialized as the
    /// body with `Content-Type: application/json`; `raw` is sent as it is with `contentType`.
    func send(
        _ method: HTTPMethod,
        _ path: String,
        json: [String: Any]? = nil,
        raw: String? = nil,
        contentType: String? = nil,
        token: String? = nil,
        authorization: String? = nil,
        headers: [(String, String)] = [],
        base: String? = nil
    ) async throws -> Reply {
        var request = HTTPClientRequest(url: (base ?? baseURL) + path)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        // A test's own gateway lives shorter than the client's connection pool, which is keyed by
        // host and port: once it has stopped listening, a new gateway can get its port while a
        // pooled connection still reaches the old process, still draining, and a request meant
        // for one test's gateway would be answered by another's. Only the fixture's own
        // gateway, up for the whole suite, keeps connections.
        if let base, base != baseURL { request.headers.add(name: "Connection", value: "close") }
        if let json {
            let data = try JSONSerialization.data(withJSONObject: json, options: [.sortedKeys])
            request.body = .bytes(ByteBuffer(bytes: Array(data)))
            request.headers.add(name: "Content-Type", value: contentType ?? "application/json")
        } else if let raw {
            request.body = .bytes(ByteBuffer(string: raw))
            if let contentType { request.headers.add(name: "Content-Type", value: contentType) }
        }
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let authorization { request.headers.add(name: "Authorization", value: authorization) }
        let response = try await http.execute(request, timeout: .seconds(60))
        let body = try await response.body.collect(upTo: 4 << 20)
        let reply = Reply(status: Int(response.status.code), headers: response.headers, text: String(buffer: body))
        // Every answer, whatever the route and status, has its request id.
        #expect(!(reply.header("X-Request-Id") ?? "").isEmpty, "no X-Request-Id: \(method) \(path) -> \(reply)")
        // No cache keeps a JSON answer (tokens, user data, errors); the JWK Set and the OpenAPI
        // document are public and say how long they may be kept.
        if reply.header("Content-Type")?.hasPrefix("application/json") == true,
            !path.contains("/.well-known/"), path != "/openapi.json"
        {
            #expect(reply.header("Cache-Control") == "no-store", "\(method) \(path) -> \(reply.headers)")
            #expect(reply.header("Pragma") == "no-cache", "\(method) \(path) -> \(reply.headers)")
        }
        return reply
    }

    func post(_ path: String, _ json: [String: Any], token: String? = nil, base: String? = nil) async throws -> Reply {
        try await send(.POST, path, json: json, token: token, base: base)
    }

    func get(_ path: String, token: String? = nil, base: String? = nil) async throws -> Reply {
        try await send(.GET, path, token: token, base: base)
    }

    // MARK: Codes through the webhook

    /// The messages the webhook received for `destination`, in order, one per message id.
    func messages(to destination: String) -> [[String: String]] {
        Self.messages(to: destination, in: webhook.requests)
    }

    /// The same over `requests` (inside the receiver's wait condition, which runs under its
    /// lock: the condition must not read `webhook.requests` itself).
    static func messages(to destination: String, in requests: [HTTPReceiver.Received]) -> [[String: String]] {
        var seen = Set<String>()
        var messages: [[String: String]] = []
        for request in requests {
            guard let object = (try? JSONSerialization.jsonObject(with: Data(request.body))) as? [String: Any],
                object["to"] as? String == destination, let id = object["id"] as? String, seen.insert(id).inserted
            else { continue }
            messages.append(object.compactMapValues { $0 as? String })
        }
        return messages
    }

    /// The code of the `index`-th message to `destination` (0: the first), waiting for it.
    func code(to destination: String, index: Int = 0) async throws -> String {
        let arrived = await webhook.wait(timeout: .seconds(30)) { requests in
            Self.messages(to: destination, in: requests).count > index
        }
        guard arrived, let code = messages(to: destination)[index]["code"] else {
            throw ServiceProcessError(message: "no code #\(index) reached the webhook for \(destination)")
        }
        return code
    }

    // MARK: Accounts

    /// A fresh phone number (+1 555 01x xxxx, 12 digits in all).
    static func newPhone() -> String {
        "+1555" + String(format: "%07d", Int(SecureRandom.uniform(below: 10_000_000)))
    }

    static func newEmail(_ tag: String = "user") -> String {
        "\(tag)-\(Base64URL.encode(SecureRandom.bytes(count: 6)).lowercased().replacingOccurrences(of: "_", with: "x").replacingOccurrences(of: "-", with: "y"))@example.com"
    }

    static let password = "Correct-Horse-42"
    /// What the fixture's gateway and otp-dispatch are told for Twilio's status callbacks.
    static let publicURL = "https://auth.example.test"
    /// The app URL the Supabase door's confirmation links may send the browser back to.
    static let confirmedURL = "laten://auth/confirmed"
    static let twilioAuthToken = "e2e-twilio-token"

    /// Signs in by a code sent to `phone` or `email` (`purpose` auto): the session body.
    func signInWithCode(
        phone: String? = nil,
        email: String? = nil,
        device: [String: Any] = [:],
        base: String? = nil
    ) async throws -> Reply {
        var body: [String: Any] = ["purpose": "auto"]
        if let phone { body["phone"] = phone }
        if let email { body["email"] = email }
        let destination = phone ?? email ?? ""
        let before = messages(to: destination).count
        let sent = try await post("/v1/otp/send", body, base: base)
        guard sent.status == 200, let id = sent.string("verification_id") else {
            throw ServiceProcessError(message: "otp/send: \(sent)")
        }
        let code = try await code(to: destination, index: before)
        let verified = try await post(
            "/v1/otp/verify",
            ["verification_id": id, "code": code].merging(device) { $1 },
            base: base
        )
        guard verified.status == 200 else { throw ServiceProcessError(message: "otp/verify: \(verified)") }
        return verified
    }

    /// Creates an account with a password: the sign-up body (201).
    func signUp(
        email: String,
        password: String = GatewayFixture.password,
        name: String = "E2E User"
    ) async throws -> Reply {
        let reply = try await post("/v1/signup", ["display_name": name, "email": email, "password": password])
        guard reply.status == 201 else { throw ServiceProcessError(message: "signup: \(reply)") }
        return reply
    }

    func logIn(
        email: String,
        password: String = GatewayFixture.password,
        path: String = "/v1/login"
    ) async throws -> Reply {
        try await post(path, ["email": email, "password": password])
    }

    /// How many outbox messages otp-dispatch wrote for `destination` (its `otp` schema): the
    /// outbox is written with the verification, so 0 means no code was ever started for it.
    func outboxCount(to destination: String) async throws -> Int {
        let statement: PostgresStatement = "SELECT count(*)::int8 FROM otp.messages WHERE destination = \(destination)"
        let rows = try await database.query(statement)
        return Int(try rows[0].decode(Int64.self, at: 0))
    }

    /// Moves the expiry of verification `id` into the past: the code-expired answer without
    /// waiting the minimum code lifetime (60 s) out.
    func expireVerification(_ id: String) async throws {
        guard let uuid = UUID(uuidString: id) else { throw ServiceProcessError(message: "bad id \(id)") }
        let statement: PostgresStatement =
            "UPDATE otp.verifications SET expires_at = now() - interval '1 minute' WHERE id = \(uuid)"
        _ = try await database.query(statement)
    }
}

/// Apple for the test: an ES256 key, its JWK Set (served by the fixture's JWKS server), and ID
/// tokens signed with it.
final class AppleStandIn: Sendable {
    let key: ES256PrivateKey
    let kid: String

    init() throws {
        key = try ES256PrivateKey()
        kid = "apple-e2e-" + Base64URL.encode(SecureRandom.bytes(count: 4))
    }

    var jwksJSON: String {
        let set = JWKSet(keys: [key.publicKey.jwk(kid: kid)])
        return String(decoding: (try? JSONEncoder().encode(set)) ?? Data(), as: UTF8.self)
    }

    /// Lower-case hex of SHA-256 of `raw`: what Apple puts in the token's `nonce`.
    static func hashedNonce(_ raw: String) -> String {
        SHA256.hash(raw).map { String(format: "%02x", $0) }.joined()
    }

    /// An ID token for `subject` carrying `nonce` (already hashed), valid for 10 minutes.
    func idToken(
        subject: String,
        nonce: String,
        email: String? = nil,
        audience: String = GatewayFixture.appleClientID
    ) throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        var claims: [String: Any] = [
            "iss": GatewayFixture.appleIssuer, "aud": audience, "sub": subject,
            "iat": now, "exp": now + 600, "nonce": nonce,
            "jti": Base64URL.encode(SecureRandom.bytes(count: 12)),
        ]
        if let email {
            claims["email"] = email
            claims["email_verified"] = "true"
        }
        let payload = try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])
        return try JWS.signES256(payload: Array(payload), key: key, kid: kid)
    }
}

/// Starts one ``GatewayFixture`` for a whole suite (and its nested suites) and gives it to
/// their tests through ``GatewayFixture/current``.
struct GatewayFixtureTrait: SuiteTrait, TestScoping {
    var isRecursive: Bool { false }

    func provideScope(
        for test: Test,
        testCase: Test.Case?,
        performing function: @Sendable () async throws -> Void
    ) async throws {
        try await GatewayFixture.run { fixture in
            try await GatewayFixture.$current.withValue(fixture) {
                try await function()
            }
        }
    }
}

extension Trait where Self == GatewayFixtureTrait {
    static var gatewayFixture: Self { Self() }
}

/// The rows of /proc/net/tcp for established IPv4 connections whose local port is `port`,
/// with the bytes waiting in each one's receive queue: how a test sees that a request reached
/// a process it has stopped (SIGSTOP), without timing anything.
func receiveQueueBytes(localPort port: Int) -> Int {
    // Read to the end: /proc files report a size of 0.
    guard let handle = FileHandle(forReadingAtPath: "/proc/net/tcp") else { return 0 }
    defer { try? handle.close() }
    let table = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
    var total = 0
    for line in table.split(separator: "\n").dropFirst() {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count > 4, fields[3] == "01" else { continue }
        let local = fields[1].split(separator: ":")
        guard local.count == 2, Int(local[1], radix: 16) == port else { continue }
        let queues = fields[4].split(separator: ":")
        guard queues.count == 2, let rx = Int(queues[1], radix: 16) else { continue }
        total += rx
    }
    return total
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
func acceptsConnections(port: Int) -> Bool {
    let fd = closeOnExecTCPSocket()
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    return result == 0
}
