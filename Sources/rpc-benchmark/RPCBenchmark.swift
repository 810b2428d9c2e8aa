import ArgumentParser
import AuthAPI
import AuthConfiguration
import AuthProtobuf
import AuthRPC
import AuthRPCNIO
import AuthServiceRuntime
import BenchmarkHarness
import Foundation
import Logging
import NIOCore
import NIOPosix

/// Measures the RPC layer on loopback: Health/Check calls/s and latency at several numbers of
/// calls in flight on one connection, in plaintext and over mutual TLS 1.3, and, in the same
/// run, a plain length-prefixed TCP echo of the same request bytes as the ceiling. Every run is
/// bounded in time and stops by itself.
@main
struct RPCBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rpc-benchmark",
        abstract: "Benchmarks Health/Check over the RPC layer against a plain TCP echo."
    )

    @OptionGroup var load: LoadOptions

    @Flag(help: "Measure only the RPC layer (for profiling); the echo columns stay empty.")
    var rpcOnly = false

    @Flag(
        help:
            "Start Health/Check on the event loop until its first suspension, as the services do; by default it starts off the loop, as every other service method does."
    )
    var inlineHandlers = false

    @Flag(help: "Leave out the mutual-TLS columns.")
    var noTLS = false

    @Option(
        help:
            "Only serve Health/Check in plaintext on this port (0: any; printed) for this many seconds, for an outside client such as `authctl bench` (secret: AUTH_RPC_SECRET). Measures nothing itself."
    )
    var serve: Int?

    @Option(
        help:
            "Only drive Health/Check on this server (host:port, e.g. another rpc-benchmark --serve) with this benchmark's own client, plaintext with AUTH_RPC_SECRET: the RPC columns alone."
    )
    var target: String?

    @Option(help: "With --serve: seconds to serve, 1-3600.")
    var serveSeconds: Double = 60

    @Flag(
        help:
            "With --serve or --target: the plain length-prefixed TCP echo of the same request frame instead of Health/Check, so the echo's ceiling can be measured across processes too."
    )
    var echo = false

    @Option(
        help:
            "Also write one tab-separated line per row to this file (measurement, in flight, calls, seconds, calls/s, p50, p99, p99.9 and max in µs, CPU µs per call of this process): for scripts such as scripts/bench/all.sh."
    )
    var resultFile: String?

    @Option(
        help:
            "With --target and --result-file: count this process's CPU too (e.g. the pid of the --serve process) in the CPU per call."
    )
    var cpuPid: Int32?

    @Option(
        help:
            "Folder with ca.pem and benchmark/benchmark-client certificates (made with scripts/lib/make-dev-certs.sh, run from the repository root, when not given)."
    )
    var tlsDir: String?

    func run() async throws {
        let levels = try load.levels(default: [1, 16, 64])
        var logger = Logger(label: "rpc-benchmark")
        logger.logLevel = .error
        if echo, serve == nil, target == nil { throw ValidationError("--echo goes with --serve or --target") }
        let results = try ResultFile(path: resultFile)
        if let serve {
            try await serveOnly(port: serve, logger: logger)
            return
        }
        if let target {
            try await driveOnly(target: target, levels: levels, results: results, logger: logger)
            return
        }

        // The RPC server and client, and the same over mutual TLS 1.3.
        var router = RPCRouter()
        router.register(HealthService(serviceNames: []) { true })
        if inlineHandlers {
            router.setExecution(.onEventLoopUntilFirstSuspension, for: Auth_Health_V1_Health.Method.check)
        }
        let plaintext = try await LoopbackRPC.start(
            router: router,
            serviceName: "benchmark",
            callerName: "benchmark-client",
            logger: logger
        )
        let health = Auth_Health_V1_Health.Client(wrapping: plaintext.client)
        var tlsParts: (LoopbackRPC, Auth_Health_V1_Health.Client)?
        if !noTLS {
            let directory = try certificateDirectory()
            func tls(_ name: String) throws -> RPCTLSConfiguration {
                func read(_ file: String) throws -> [UInt8] {
                    guard let data = FileManager.default.contents(atPath: "\(directory)/\(file)") else {
                        throw ValidationError("cannot read \(directory)/\(file)")
                    }
                    return Array(data)
                }
                return try RPCTLSConfiguration(
                    certificatePEM: read("\(name).pem"),
                    privateKeyPEM: read("\(name).key"),
                    trustRootsPEM: read("ca.pem")
                )
            }
            let overTLS = try await LoopbackRPC.start(
                router: router,
                serviceName: "benchmark",
                callerName: "benchmark-client",
                tls: (server: try tls("benchmark"), client: try tls("benchmark-client")),
                logger: logger
            )
            if tlsDir == nil { try? FileManager.default.removeItem(atPath: directory) }  // loaded; made for this run
            tlsParts = (overTLS, Auth_Health_V1_Health.Client(wrapping: overTLS.client))
        }
        let request = Auth_Health_V1_HealthCheckRequest()

        // The echo servers and clients, carrying the bytes of the same request frame.
        var echoes: [(EchoMode, EchoServer, EchoClient)] = []
        for mode in EchoMode.allCases {
            let server = try await EchoServer.start()
            echoes.append((mode, server, try await EchoClient.connect(port: server.port, mode: mode)))
        }
        let frame = try Self.requestFrame()

        print(
            "Health/Check over the RPC layer vs a length-prefixed TCP echo of the same \(frame.readableBytes)-byte request frame"
        )
        print(
            "loopback, one connection each, \(load.description), \(ProcessInfo.processInfo.activeProcessorCount) cores"
        )
        print(
            "Health/Check handler started \(inlineHandlers ? "on the event loop until its first suspension" : "off the event loop (the default)")"
        )
        print(
            "plain echo: NIO's example echo server, client flushing each request; batched echo: client coalescing as the RPC transport does"
        )
        print("RPC: plaintext TCP; TLS: the same RPC over mutual TLS 1.3 (EC P-256 certificates)")
        print("")
        var columns: [MarkdownTable.Column] = [
            .right("in flight"), .right("RPC calls/s"), .right("RPC p50"), .right("RPC p99"),
        ]
        if tlsParts != nil {
            columns += [.right("TLS calls/s"), .right("TLS p50"), .right("TLS p99"), .right("TLS / RPC")]
        }
        if !rpcOnly {
            for echo in ["plain", "batched"] {
                columns += [.right("\(echo) echo calls/s"), .right("p50"), .right("p99"), .right("RPC / \(echo)")]
            }
        }
        let table = MarkdownTable(columns)
        let runner = load.closedLoop
        // This process's CPU (client and server), only for the result file.
        let cpu: CPUAccounting? = results == nil ? nil : CPUAccounting()
        for level in levels {
            let rpc = try await runner.run(concurrency: level, cpu: cpu) {
                let response = try await health.check(request)
                precondition(response.status == .serving)
            }
            try results?.append("rpc", inFlight: level, rpc)
            var cells = ["\(level)", LoadResult.formatCount(rpc.callsPerSecond), rpc.p50, rpc.p99]
            if let tlsHealth = tlsParts?.1 {
                let tls = try await runner.run(concurrency: level, cpu: cpu) {
                    let response = try await tlsHealth.check(request)
                    precondition(response.status == .serving)
                }
                try results?.append("tls", inFlight: level, tls)
                let ratio = tls.callsPerSecond / rpc.callsPerSecond * 100
                cells += [
                    LoadResult.formatCount(tls.callsPerSecond), tls.p50, tls.p99, String(format: "%.0f %%", ratio),
                ]
            }
            if !rpcOnly {
                for (mode, _, client) in echoes {
                    let echo = try await runner.run(concurrency: level, cpu: cpu) {
                        try await client.roundTrip(frame)
                    }
                    try results?.append("\(mode.rawValue) echo", inFlight: level, echo)
                    let ratio = rpc.callsPerSecond / echo.callsPerSecond * 100
                    cells += [
                        LoadResult.formatCount(echo.callsPerSecond), echo.p50, echo.p99,
                        String(format: "%.0f %%", ratio),
                    ]
                }
            }
            table.row(cells)
        }

        try await plaintext.shutdown()
        try await tlsParts?.0.shutdown()
        for (_, server, client) in echoes {
            try await client.close()
            try await server.close()
        }
    }

    /// Serves the same Health/Check as the measured rows for `--serve-seconds`, so another
    /// process can drive it (docs/benchmarks.md: authctl bench beside rpc-benchmark).
    func serveOnly(port: Int, logger: Logger) async throws {
        guard (0...65535).contains(port), serveSeconds >= 1, serveSeconds <= 3600 else {
            throw ValidationError("--serve must be a port in 0...65535 and --serve-seconds in 1...3600")
        }
        if echo {
            let server = try await EchoServer.start(port: port)
            FileHandle.standardOutput.write(
                Data(
                    "serving the plain echo on 127.0.0.1:\(server.port) for \(LoadOptions.format(serveSeconds)) s\n"
                        .utf8
                )
            )
            try await Task.sleep(for: .milliseconds(Int64(serveSeconds * 1000)))
            try await server.close()
            return
        }
        let secret: [UInt8]
        do {
            secret = try readRPCSecret(ProcessInfo.processInfo.environment)
        } catch let error as ConfigurationError {
            throw ValidationError("\(error.variable): \(error.problem)")
        }
        var router = RPCRouter()
        router.register(HealthService(serviceNames: []) { true })
        if inlineHandlers {
            router.setExecution(.onEventLoopUntilFirstSuspension, for: Auth_Health_V1_Health.Method.check)
        }
        let server = try RPCServer(
            configuration: RPCServerConfiguration(port: port, serviceName: "benchmark", secret: secret),
            router: router,
            logger: logger
        )
        let bound = try await server.bind()
        let task = Task { try await server.run() }
        // Written at once, not buffered: a script waits for this line in a file.
        FileHandle.standardOutput.write(
            Data("serving Health/Check on 127.0.0.1:\(bound) for \(LoadOptions.format(serveSeconds)) s\n".utf8)
        )
        try await Task.sleep(for: .milliseconds(Int64(serveSeconds * 1000)))
        server.beginShutdown()
        try await task.value
    }

    /// Drives Health/Check on a server in another process with this benchmark's client: the
    /// same client as the RPC columns, for comparing with another client (authctl bench).
    /// With `--echo`, the plain echo client on an echo server in another process instead.
    func driveOnly(target: String, levels: [Int], results: ResultFile?, logger: Logger) async throws {
        guard let address = RPCAddress(target) else { throw ValidationError("--target must be host:port") }
        let cpuPid = self.cpuPid
        let cpu: CPUAccounting? = results == nil ? nil : CPUAccounting { cpuPid.map { [$0] } ?? [] }
        if echo {
            let client = try await EchoClient.connect(host: address.host, port: address.port, mode: .plain)
            let frame = try Self.requestFrame()
            print("plain echo on \(target) (another process), one connection, \(load.description)")
            print("")
            let table = MarkdownTable([
                .right("in flight"), .right("plain echo calls/s"), .right("p50"), .right("p99"),
            ])
            for level in levels {
                let result = try await load.closedLoop.run(concurrency: level, cpu: cpu) {
                    try await client.roundTrip(frame)
                }
                try results?.append("plain echo", inFlight: level, result)
                table.row(["\(level)", LoadResult.formatCount(result.callsPerSecond), result.p50, result.p99])
            }
            try await client.close()
            return
        }
        let secret: [UInt8]
        do {
            secret = try readRPCSecret(ProcessInfo.processInfo.environment)
        } catch let error as ConfigurationError {
            throw ValidationError("\(error.variable): \(error.problem)")
        }
        let transport = TCPClientTransport(
            configuration: RPCClientConfiguration(
                addresses: [address],
                serviceName: "benchmark-client",
                secret: secret
            ),
            logger: logger
        )
        let health = Auth_Health_V1_Health.Client(
            wrapping: RPCClient(transport: transport, callerService: "benchmark-client")
        )
        print("Health/Check on \(target) (another process), one connection, \(load.description)")
        print("")
        let table = MarkdownTable([.right("in flight"), .right("RPC calls/s"), .right("RPC p50"), .right("RPC p99")])
        let request = Auth_Health_V1_HealthCheckRequest()
        for level in levels {
            let result = try await load.closedLoop.run(concurrency: level, cpu: cpu) {
                let response = try await health.check(request)
                precondition(response.status == .serving)
            }
            try results?.append("rpc", inFlight: level, result)
            table.row(["\(level)", LoadResult.formatCount(result.callsPerSecond), result.p50, result.p99])
        }
        await transport.shutdown()
    }

    /// The bytes of one Health/Check request frame, as the RPC client sends it: what the echo
    /// rows carry.
    static func requestFrame() throws -> ByteBuffer {
        var frame = ByteBuffer()
        try frame.writeFrame(
            Auth_Rpc_V1_Frame(
                kind: .request(
                    Auth_Rpc_V1_Request(
                        callID: 1,
                        method: Auth_Health_V1_Health.Method.check.path,
                        timeoutUS: 10_000_000,
                        metadata: RPCMetadata(callerService: "benchmark-client").proto,
                        payload: try Auth_Health_V1_HealthCheckRequest().serializedBytes()
                    )
                )
            )
        )
        return frame
    }

    /// `--tls-dir`, or a new folder made by scripts/lib/make-dev-certs.sh.
    func certificateDirectory() throws -> String {
        if let tlsDir { return tlsDir }
        let script = "scripts/lib/make-dev-certs.sh"
        guard FileManager.default.fileExists(atPath: script) else {
            throw ValidationError("run from the repository root (for \(script)) or pass --tls-dir")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "rpc-benchmark-\(UUID().uuidString)"
        ).path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [script, directory, "benchmark", "benchmark-client"]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw ValidationError("\(script) failed") }
        return directory
    }
}
