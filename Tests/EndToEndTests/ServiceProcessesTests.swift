import AuthAPI
import AuthCrypto
import AuthProtobuf
import AuthRPC
import AuthRPCNIO
import AuthTestSupport
import Foundation
import Logging
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The built executables as separate processes, talking over real TCP: `session` and
/// `identity` serve, `gateway` and `authctl` call them, and the test itself is a third client
/// (well-behaved through our client library, misbehaving through raw sockets).
@Suite(.serialized) struct ServiceProcessesTests {
    let secret = SecureRandom.bytes(count: 32)
    var secretBase64: String { Data(secret).base64EncodedString() }

    func environment(_ extra: [String: String]) async throws -> [String: String] {
        try await ProcessEnvironment.services(
            secret: secretBase64,
            ["AUTH_LOG_LEVEL": "info", "AUTH_RPC_READ_TIMEOUT_SECONDS": "2"].merging(extra) { $1 }
        )
    }

    /// Starts `name`; with `tls`, with its own certificate from `tls` (inline PEM, which an
    /// unprivileged process can read too) and without the shared secret.
    func startService(
        _ name: String,
        portVariable: String,
        port: Int = 0,
        unprivileged: Bool = false,
        tls: TestCertificates? = nil
    ) async throws -> (ServiceProcess, Int) {
        var variables = try await environment([portVariable: String(port)])
        if let tls {
            variables.merge(tls.environment(for: name, inline: true)) { $1 }
            variables["AUTH_RPC_SECRET"] = nil
        }
        let process = try ServiceProcess(
            executable: name,
            environment: variables,
            unprivileged: unprivileged
        )
        return (process, try await process.listeningPort())
    }

    func client(port: Int, secret: [UInt8]? = nil) -> (Auth_Health_V1_Health.Client, TCPClientTransport) {
        let (client, transport) = loopbackClient(port: port, caller: "e2e-test", secret: secret ?? self.secret)
        return (Auth_Health_V1_Health.Client(wrapping: client), transport)
    }

    /// Issue 23 §4b: session's certificate files are swapped (for another CA's) while it runs;
    /// the next connection sees the new certificate (authctl of the new CA gets in, of the old
    /// one no longer), without a restart.
    @Test func aRenewedCertificateIsLoadedWithoutARestart() async throws {
        let names = ["session", "identity", "gateway", "authctl"]
        let tls = try await TestCertificates.shared("ca", names: names)
        let otherCA = try await TestCertificates.shared("other-ca", names: names)
        let folder = try RenewableTLSFolder()
        defer { folder.remove() }
        try folder.install(tls, name: "session")
        var variables = try await environment([
            "AUTH_SESSION_PORT": "0", "AUTH_RPC_TLS_CERT": folder.certificatePath, "AUTH_RPC_TLS_KEY": folder.keyPath,
            "AUTH_RPC_TLS_CA": folder.caPath, "AUTH_RPC_TLS_RELOAD_SECONDS": "1",
        ])
        variables["AUTH_RPC_SECRET"] = nil
        let session = try ServiceProcess(executable: "session", environment: variables)
        let port = try await session.listeningPort()
        func health(_ certificates: TestCertificates) async throws -> Int32? {
            try await ServiceProcess.run(
                "authctl",
                arguments: [
                    "health", "--target", "127.0.0.1:\(port)", "--server-name", "session", "--timeout", "3",
                    "--tls-cert", certificates.certificatePath("authctl"), "--tls-key", certificates.keyPath("authctl"),
                    "--tls-ca", certificates.caPath,
                ],
                environment: [:]
            ).status
        }
        #expect(try await health(tls) == 0)
        #expect(try await health(otherCA) == 2)
        try folder.install(otherCA, name: "session")
        // Logged with the new certificate's expiry.
        let reloaded = try await session.waitForLog("tls.not_valid_after=[^ ]+ [^\n]*RPC TLS certificate reloaded")
        #expect(!reloaded.isEmpty)
        #expect(try await health(otherCA) == 0)
        #expect(try await health(tls) == 2)
        #expect(await session.terminate() == 0)
    }

    @Test func servicesCallEachOtherOverMutualTLS() async throws {
        let names = ["session", "identity", "gateway", "authctl"]
        let tls = try await TestCertificates.shared("ca", names: names)
        let otherCA = try await TestCertificates.shared("other-ca", names: names)
        let (session, sessionPort) = try await startService("session", portVariable: "AUTH_SESSION_PORT", tls: tls)
        let (identity, identityPort) = try await startService(
            "identity",
            portVariable: "AUTH_IDENTITY_PORT",
            unprivileged: true,
            tls: tls
        )
        defer {
            _ = session
            _ = identity
        }
        _ = try await session.waitForLog("mutual TLS 1.3")

        // authctl (one executable) calls session (another) over mutual TLS, without root's
        // privileges (as in a container), with its certificate in the environment.
        let authctl = try await ServiceProcess.run(
            "authctl",
            arguments: ["health", "--target", "127.0.0.1:\(sessionPort)", "--server-name", "session"],
            environment: tls.environment(for: "authctl", inline: true),
            unprivileged: true
        )
        #expect(authctl.status == 0)
        #expect(authctl.log.contains("SERVING"), "\(authctl.log)")

        // ... and is refused with a certificate from another CA, or with none (plaintext).
        let foreign = try await ServiceProcess.run(
            "authctl",
            arguments: [
                "health", "--target", "127.0.0.1:\(sessionPort)", "--timeout", "3",
                "--tls-cert", otherCA.certificatePath("authctl"), "--tls-key", otherCA.keyPath("authctl"), "--tls-ca",
                tls.caPath,
            ],
            environment: [:]
        )
        #expect(foreign.status == 2)
        #expect(foreign.log.contains("authctl: "), "\(foreign.log)")
        let plaintext = try await ServiceProcess.run(
            "authctl",
            arguments: ["health", "--target", "127.0.0.1:\(sessionPort)", "--timeout", "3"],
            environment: ["AUTH_RPC_SECRET": secretBase64]
        )
        #expect(plaintext.status == 2)
        #expect(plaintext.log.contains("authctl: "), "\(plaintext.log)")

        // Who may call what comes from the certificate: gateway's may not rotate keys, authctl's may.
        let asGateway = try await ServiceProcess.run(
            "authctl",
            arguments: [
                "keys", "rotate", "--target", "127.0.0.1:\(sessionPort)",
                "--tls-cert", tls.certificatePath("gateway"), "--tls-key", tls.keyPath("gateway"), "--tls-ca",
                tls.caPath,
            ],
            environment: [:]
        )
        #expect(asGateway.status == 2)
        #expect(asGateway.log.contains(try Regex("PERMISSION_DENIED[^\n]*caller_not_allowed")), "\(asGateway.log)")
        _ = try await session.waitForLog(
            "caller=gateway[^\n]*RotateSigningKey[^\n]*|Refused a caller[^\n]*caller=gateway"
        )
        let rotate = try await ServiceProcess.run(
            "authctl",
            arguments: ["keys", "rotate", "--target", "127.0.0.1:\(sessionPort)"],
            environment: tls.environment(for: "authctl")
        )
        #expect(rotate.status == 0)
        #expect(rotate.log.contains("new key"), "\(rotate.log)")

        // gateway calls both over mutual TLS for its readiness; otp-dispatch is not running.
        var gatewayEnvironment = try await environment([
            "AUTH_GATEWAY_PORT": "0",
            "AUTH_GATEWAY_ADMIN_PORT": "0",
            "AUTH_SESSION_ADDRESSES": "127.0.0.1:\(sessionPort)",
            "AUTH_IDENTITY_ADDRESSES": "127.0.0.1:\(identityPort)",
            "AUTH_OTP_ADDRESSES": "127.0.0.1:1",
        ])
        gatewayEnvironment.merge(tls.environment(for: "gateway")) { $1 }
        gatewayEnvironment["AUTH_RPC_SECRET"] = nil
        let gateway = try ServiceProcess(executable: "gateway", environment: gatewayEnvironment)
        let gatewayPort = try await gateway.waitForLog(#"listening on [^\n]*:(\d+)"#)
        let ready = try await httpGet("http://127.0.0.1:\(gatewayPort)/health/ready")
        #expect(ready.status == 503)
        #expect(ready.body.contains(#""session":"SERVING""#))
        #expect(ready.body.contains(#""identity":"SERVING""#))
        #expect(ready.body.contains(#""otp-dispatch":"UNREACHABLE""#))

        // Restart session: gateway's client reconnects by itself.
        #expect(await session.terminate() == 0)
        let (restarted, _) = try await startService(
            "session",
            portVariable: "AUTH_SESSION_PORT",
            port: sessionPort,
            tls: tls
        )
        var sessionBack = false
        for _ in 0..<100 {
            let again = try await httpGet("http://127.0.0.1:\(gatewayPort)/health/ready")
            if again.body.contains(#""session":"SERVING""#) {
                sessionBack = true
                break
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(sessionBack)
        #expect(await gateway.terminate() == 0)
        #expect(await restarted.terminate() == 0)
        #expect(await identity.terminate() == 0)
    }

    @Test func productionRefusesPlaintextRPC() async throws {
        let refused = try await ServiceProcess.run(
            "identity",
            environment: try await environment([
                "AUTH_IDENTITY_PORT": "0", "AUTH_ENVIRONMENT": "production",
            ])
        )
        #expect(refused.status == 2)
        #expect(refused.log.contains("AUTH_RPC_TLS_CERT: is required in production"), "\(refused.log)")

        // Issue 19, item 10: behind a mesh too (this started, plaintext, before).
        let meshed = try await ServiceProcess.run(
            "identity",
            environment: try await environment([
                "AUTH_IDENTITY_PORT": "0", "AUTH_ENVIRONMENT": "production", "AUTH_RPC_MESH_MTLS": "true",
            ])
        )
        #expect(meshed.status == 2)
        #expect(meshed.log.contains("AUTH_RPC_MESH_MTLS: is no longer accepted"), "\(meshed.log)")

        let badCertificate = try await ServiceProcess.run(
            "identity",
            environment: try await environment([
                "AUTH_IDENTITY_PORT": "0", "AUTH_RPC_TLS_CERT": "/nonexistent/identity.pem",
                "AUTH_RPC_TLS_KEY": "/nonexistent/identity.key", "AUTH_RPC_TLS_CA": "/nonexistent/ca.pem",
            ])
        )
        #expect(badCertificate.status == 2)
        #expect(
            badCertificate.log.contains("AUTH_RPC_TLS_CERT: is neither PEM text nor a readable file"),
            "\(badCertificate.log)"
        )
    }

    /// Plaintext mode (development only): the shared-secret Hello, and raw peers.
    @Test func sessionProcessServesManyAndCutsOffMisbehavingPeers() async throws {
        var (session, port) = try await startService("session", portVariable: "AUTH_SESSION_PORT")
        let (health, transport) = client(port: port)

        // 64 concurrent calls on one connection.
        try await withThrowingTaskGroup(of: Auth_Health_V1_ServingStatus.self) { group in
            for _ in 0..<64 {
                group.addTask { try await health.check(Auth_Health_V1_HealthCheckRequest()).status }
            }
            for try await status in group { #expect(status == .serving) }
        }

        // An expired deadline, as the server sees it: answered DEADLINE_EXCEEDED, not run.
        let (raw, _) = try await RawFrameConnection.greeted(port: port, service: "raw", secret: secret)
        try await raw.sendRequest(callID: 1, method: Auth_Health_V1_Health.Method.check.path, timeoutUS: 1)
        guard case .response(let late) = try await raw.receiveFrame()?.kind else {
            Issue.record("expected a response")
            return
        }
        #expect(late.status?.code == .deadlineExceeded)

        // A wrong service credential is refused.
        let (wrong, wrongTransport) = client(port: port, secret: SecureRandom.bytes(count: 32))
        do {
            _ = try await wrong.check(Auth_Health_V1_HealthCheckRequest())
            Issue.record("a wrong credential must be refused")
        } catch let error as RPCError {
            #expect(error.code == .unauthenticated)
        }
        await wrongTransport.shutdown()

        // An oversized frame: cut off; the good client is still served.
        let big = try await RawFrameConnection(port: port)
        try await big.sendHello(service: "raw", secret: secret)
        _ = try await big.receiveFrame()
        await big.send([0x7F, 0xFF, 0xFF, 0xFF])
        let bigClosed = await big.isClosedByPeer()
        #expect(bigClosed)
        #expect(try await health.check(Auth_Health_V1_HealthCheckRequest()).status == .serving)

        // Garbage: cut off; the good client is still served.
        let garbage = try await RawFrameConnection(port: port)
        await garbage.send(Array(repeating: 0xEE, count: 64))
        let garbageClosed = await garbage.isClosedByPeer()
        #expect(garbageClosed)
        #expect(try await health.check(Auth_Health_V1_HealthCheckRequest()).status == .serving)

        // Restart the server process on the same port: the same client reconnects.
        #expect(await session.terminate() == 0)
        (session, _) = try await startService("session", portVariable: "AUTH_SESSION_PORT", port: port)
        var served = false
        for _ in 0..<100 {
            if (try? await health.check(Auth_Health_V1_HealthCheckRequest(), options: CallOptions(timeout: .seconds(1)))
                .status) == .serving
            {
                served = true
                break
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(served)
        await transport.shutdown()
        #expect(await session.terminate() == 0)
    }
}

func httpGet(_ url: String) async throws -> (status: Int, body: String) {
    var request = URLRequest(url: URL(string: url)!)
    request.timeoutInterval = 10
    let (data, response) = try await URLSession.shared.data(for: request)
    return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
}
