import ArgumentParser
import AuthAPI
import AuthProtobuf
import AuthRPC
import AuthRPCNIO
import AuthServiceRuntime
import Foundation
import Histogram
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

    @Option(help: "Calls in flight, comma-separated.")
    var concurrency = "1,16,64"

    @Option(help: "Seconds measured per row (after warm-up).")
    var seconds: Double = 5

    @Option(help: "Seconds of warm-up per row.")
    var warmup: Double = 1

    @Flag(help: "Measure only the RPC layer (for profiling); the echo columns stay empty.")
    var rpcOnly = false

    @Flag(help: "Start Health/Check on the event loop until its first suspension, as the services do; by default it starts off the loop, as every other service method does.")
    var inlineHandlers = false

    @Flag(help: "Leave out the mutual-TLS columns.")
    var noTLS = false

    @Option(help: "Folder with ca.pem and benchmark/benchmark-client certificates (made with scripts/lib/make-dev-certs.sh, run from the repository root, when not given).")
    var tlsDir: String?

    func run() async throws {
        let levels = concurrency.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !levels.isEmpty, levels.allSatisfy({ (1...4096).contains($0) }) else {
            throw ValidationError("--concurrency must list numbers between 1 and 4096")
        }
        guard seconds > 0, seconds <= 120, warmup >= 0, warmup <= 60 else {
            throw ValidationError("--seconds must be in (0, 120] and --warmup in [0, 60]")
        }
        var logger = Logger(label: "rpc-benchmark")
        logger.logLevel = .error
        let secret = Array(repeating: UInt8(7), count: 32)

        // The RPC server and client.
        var router = RPCRouter()
        router.register(HealthService(serviceNames: []) { true })
        if inlineHandlers {
            router.setExecution(.onEventLoopUntilFirstSuspension, for: Auth_Health_V1_Health.Method.check)
        }
        let server = try RPCServer(
            configuration: RPCServerConfiguration(serviceName: "benchmark", secret: secret),
            router: router,
            logger: logger
        )
        let port = try await server.bind()
        let serverTask = Task { try await server.run() }
        let transport = TCPClientTransport(
            configuration: RPCClientConfiguration(
                addresses: [RPCAddress(host: "127.0.0.1", port: port)],
                connectionsPerAddress: 1,
                serviceName: "benchmark-client",
                secret: secret
            ),
            logger: logger
        )
        let health = Auth_Health_V1_Health.Client(wrapping: RPCClient(transport: transport, callerService: "benchmark-client"))

        // The same over mutual TLS 1.3: its own server and one client connection.
        var tlsParts: (RPCServer, Task<Void, any Error>, TCPClientTransport, Auth_Health_V1_Health.Client)?
        if !noTLS {
            let directory = try certificateDirectory()
            func tls(_ name: String) throws -> RPCTLSConfiguration {
                func read(_ file: String) throws -> [UInt8] {
                    guard let data = FileManager.default.contents(atPath: "\(directory)/\(file)") else {
                        throw ValidationError("cannot read \(directory)/\(file)")
                    }
                    return Array(data)
                }
                return try RPCTLSConfiguration(certificatePEM: read("\(name).pem"), privateKeyPEM: read("\(name).key"), trustRootsPEM: read("ca.pem"))
            }
            let tlsServer = try RPCServer(
                configuration: RPCServerConfiguration(serviceName: "benchmark", secret: [], tls: try tls("benchmark")),
                router: router,
                logger: logger
            )
            let tlsPort = try await tlsServer.bind()
            let tlsServerTask = Task { try await tlsServer.run() }
            let tlsTransport = TCPClientTransport(
                configuration: RPCClientConfiguration(
                    addresses: [RPCAddress(host: "127.0.0.1", port: tlsPort)],
                    connectionsPerAddress: 1,
                    serviceName: "benchmark-client",
                    secret: [],
                    tls: try tls("benchmark-client"),
                    serverName: "benchmark"
                ),
                logger: logger
            )
            let tlsHealth = Auth_Health_V1_Health.Client(wrapping: RPCClient(transport: tlsTransport, callerService: "benchmark-client"))
            if tlsDir == nil { try? FileManager.default.removeItem(atPath: directory) }  // loaded; made for this run
            tlsParts = (tlsServer, tlsServerTask, tlsTransport, tlsHealth)
        }
        let request = Auth_Health_V1_HealthCheckRequest()

        // The echo servers and clients, carrying the bytes of the same request frame.
        var echoes: [(EchoMode, EchoServer, EchoClient)] = []
        for mode in EchoMode.allCases {
            let server = try await EchoServer.start()
            echoes.append((mode, server, try await EchoClient.connect(port: server.port, mode: mode)))
        }
        var frameBuffer = ByteBuffer()
        try frameBuffer.writeFrame(Auth_Rpc_V1_Frame(kind: .request(Auth_Rpc_V1_Request(
            callID: 1,
            method: Auth_Health_V1_Health.Method.check.path,
            timeoutUS: 10_000_000,
            metadata: RPCMetadata(callerService: "benchmark-client").proto,
            payload: try request.serializedBytes()
        ))))
        let frame = frameBuffer

        print("Health/Check over the RPC layer vs a length-prefixed TCP echo of the same \(frame.readableBytes)-byte request frame")
        print("loopback, one connection each, \(seconds) s per row after \(warmup) s warm-up, \(ProcessInfo.processInfo.activeProcessorCount) cores")
        print("Health/Check handler started \(inlineHandlers ? "on the event loop until its first suspension" : "off the event loop (the default)")")
        print("plain echo: NIO's example echo server, client flushing each request; batched echo: client coalescing as the RPC transport does")
        print("RPC: plaintext TCP; TLS: the same RPC over mutual TLS 1.3 (EC P-256 certificates)")
        print("")
        var header = "| in flight | RPC calls/s | RPC p50 | RPC p99 |"
        var rule = "|---:|---:|---:|---:|"
        if tlsParts != nil {
            header += " TLS calls/s | TLS p50 | TLS p99 | TLS / RPC |"
            rule += "---:|---:|---:|---:|"
        }
        if !rpcOnly {
            header += " plain echo calls/s | p50 | p99 | RPC / plain | batched echo calls/s | p50 | p99 | RPC / batched |"
            rule += "---:|---:|---:|---:|---:|---:|---:|---:|"
        }
        print(header)
        print(rule)
        for level in levels {
            let rpc = try await measure(concurrency: level) {
                let response = try await health.check(request)
                precondition(response.status == .serving)
            }
            var row = "| \(level) | \(Int(rpc.callsPerSecond)) | \(rpc.p50) | \(rpc.p99) |"
            if let tlsHealth = tlsParts?.3 {
                let tls = try await measure(concurrency: level) {
                    let response = try await tlsHealth.check(request)
                    precondition(response.status == .serving)
                }
                let ratio = tls.callsPerSecond / rpc.callsPerSecond * 100
                row += " \(Int(tls.callsPerSecond)) | \(tls.p50) | \(tls.p99) | \(String(format: "%.0f", ratio)) % |"
            }
            if !rpcOnly {
                for (_, _, client) in echoes {
                    let echo = try await measure(concurrency: level) {
                        try await client.roundTrip(frame)
                    }
                    let ratio = rpc.callsPerSecond / echo.callsPerSecond * 100
                    row += " \(Int(echo.callsPerSecond)) | \(echo.p50) | \(echo.p99) | \(String(format: "%.0f", ratio)) % |"
                }
            }
            print(row)
        }

        await transport.shutdown()
        server.beginShutdown()
        try await serverTask.value
        if let (tlsServer, tlsServerTask, tlsTransport, _) = tlsParts {
            await tlsTransport.shutdown()
            tlsServer.beginShutdown()
            try await tlsServerTask.value
        }
        for (_, server, client) in echoes {
            try await client.close()
            try await server.close()
        }
    }

    /// `--tls-dir`, or a new folder made by scripts/lib/make-dev-certs.sh.
    func certificateDirectory() throws -> String {
        if let tlsDir { return tlsDir }
        let script = "scripts/lib/make-dev-certs.sh"
        guard FileManager.default.fileExists(atPath: script) else {
            throw ValidationError("run from the repository root (for \(script)) or pass --tls-dir")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rpc-benchmark-\(UUID().uuidString)").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [script, directory, "benchmark", "benchmark-client"]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw ValidationError("\(script) failed") }
        return directory
    }

    struct Result {
        var callsPerSecond: Double
        var histogram: Histogram<UInt64>

        var p50: String { Self.format(histogram.valueAtPercentile(50)) }
        var p99: String { Self.format(histogram.valueAtPercentile(99)) }

        static func format(_ nanoseconds: UInt64) -> String {
            nanoseconds >= 1_000_000
                ? String(format: "%.2f ms", Double(nanoseconds) / 1e6)
                : String(format: "%.0f µs", Double(nanoseconds) / 1e3)
        }
    }

    /// Runs `concurrency` loops of `call` for the warm-up, then for the measured time.
    func measure(concurrency: Int, call: @escaping @Sendable () async throws -> Void) async throws -> Result {
        _ = try await runLoops(concurrency: concurrency, duration: .milliseconds(Int64(warmup * 1000)), call: call)
        let start = ContinuousClock.now
        let (count, histogram) = try await runLoops(concurrency: concurrency, duration: .milliseconds(Int64(seconds * 1000)), call: call)
        let elapsed = ContinuousClock.now - start
        let elapsedSeconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return Result(callsPerSecond: Double(count) / elapsedSeconds, histogram: histogram)
    }

    func runLoops(
        concurrency: Int,
        duration: Duration,
        call: @escaping @Sendable () async throws -> Void
    ) async throws -> (Int, Histogram<UInt64>) {
        let end = ContinuousClock.now + duration
        return try await withThrowingTaskGroup(of: (Int, Histogram<UInt64>).self) { group in
            for _ in 0..<concurrency {
                group.addTask {
                    var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000_000)
                    var count = 0
                    let clock = ContinuousClock()
                    while clock.now < end {
                        let started = clock.now
                        try await call()
                        let took = clock.now - started
                        _ = histogram.record(UInt64(took.components.seconds) * 1_000_000_000 + UInt64(took.components.attoseconds / 1_000_000_000))
                        count += 1
                    }
                    return (count, histogram)
                }
            }
            var total = 0
            var merged = Histogram<UInt64>(highestTrackableValue: 60_000_000_000)
            for try await (count, histogram) in group {
                total += count
                merged.add(histogram)
            }
            return (total, merged)
        }
    }
}
