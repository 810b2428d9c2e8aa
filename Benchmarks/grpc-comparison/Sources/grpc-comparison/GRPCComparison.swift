import ArgumentParser
import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2
import Histogram

/// A gRPC Swift 2 server answering a unary call with the bytes it was sent, and a client driving
/// it with N calls in flight on one HTTP/2 connection (what `authctl bench` does for our RPC).
@main
struct GRPCComparison: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "grpc-comparison",
        abstract: "gRPC Swift 2 unary echo: a server and a load client.",
        subcommands: [Serve.self, Drive.self]
    )
}

let echoMethod = MethodDescriptor(fullyQualifiedService: "bench.v1.Echo", method: "Echo")

/// Messages are the raw bytes: no protobuf, nothing but gRPC's own framing and HTTP/2.
struct RawSerializer: MessageSerializer {
    func serialize<Bytes: GRPCContiguousBytes>(_ message: [UInt8]) throws -> Bytes { Bytes(message) }
}

struct RawDeserializer: MessageDeserializer {
    func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> [UInt8] {
        serializedMessageBytes.withUnsafeBytes { Array($0) }
    }
}

struct EchoService: RegistrableRPCService {
    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        router.registerHandler(forMethod: echoMethod, deserializer: RawDeserializer(), serializer: RawSerializer()) {
            request,
            _ in
            var payload: [UInt8] = []
            for try await message in request.messages { payload = message }
            return StreamingServerResponse(single: ServerResponse(message: payload))
        }
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Serves the echo on 127.0.0.1 for a while.")

    @Option(help: "Port; 0 picks one (printed).")
    var port = 0

    @Option(help: "Seconds to serve, 1-3600.")
    var seconds: Double = 60

    func run() async throws {
        let server = GRPCServer(
            transport: .http2NIOPosix(address: .ipv4(host: "127.0.0.1", port: port), transportSecurity: .plaintext),
            services: [EchoService()]
        )
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { try await server.serve() }
            if let address = try await server.listeningAddress?.ipv4 {
                // Written at once, not buffered: run.sh waits for this line in a file.
                FileHandle.standardOutput.write(Data("gRPC echo listening on 127.0.0.1:\(address.port)\n".utf8))
            }
            try await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
            server.beginGracefulShutdown()
        }
    }
}

struct Drive: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Drives the echo and prints one JSON line.")

    @Option(help: "The server's port on 127.0.0.1.")
    var port: Int

    @Option(help: "Calls in flight on the one connection.")
    var concurrency = 64

    @Option(help: "Seconds measured (after warm-up).")
    var seconds: Double = 5

    @Option(help: "Seconds of warm-up.")
    var warmup: Double = 1

    @Option(help: "Payload bytes.")
    var payloadBytes = 64

    func run() async throws {
        let payload = [UInt8](repeating: 7, count: payloadBytes)
        try await withGRPCClient(
            transport: .http2NIOPosix(target: .ipv4(address: "127.0.0.1", port: port), transportSecurity: .plaintext)
        ) { client in
            @Sendable func call() async throws {
                let answer = try await client.unary(
                    request: ClientRequest(message: payload),
                    descriptor: echoMethod,
                    serializer: RawSerializer(),
                    deserializer: RawDeserializer(),
                    options: .defaults
                ) { try $0.message }
                precondition(answer.count == payload.count)
            }
            _ = try await loops(duration: .milliseconds(Int64(warmup * 1000)), call: call)
            let started = ContinuousClock.now
            let (calls, histogram) = try await loops(duration: .milliseconds(Int64(seconds * 1000)), call: call)
            let elapsed = ContinuousClock.now - started
            let elapsedSeconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let result: [String: Any] = [
                "concurrency": concurrency,
                "calls": calls,
                "calls_per_second": Double(calls) / elapsedSeconds,
                "latency_us": [
                    "p50": Double(histogram.valueAtPercentile(50)) / 1000,
                    "p99": Double(histogram.valueAtPercentile(99)) / 1000,
                ],
            ]
            let data = try JSONSerialization.data(withJSONObject: result, options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        }
    }

    /// `concurrency` tasks, each one call at a time, until `duration` has passed.
    func loops(
        duration: Duration,
        call: @escaping @Sendable () async throws -> Void
    ) async throws -> (Int, Histogram<UInt64>) {
        let clock = ContinuousClock()
        let end = clock.now + duration
        return try await withThrowingTaskGroup(of: (Int, Histogram<UInt64>).self) { group in
            for _ in 0..<concurrency {
                group.addTask {
                    var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000_000)
                    var calls = 0
                    repeat {
                        let callStarted = clock.now
                        try await call()
                        let took = clock.now - callStarted
                        _ = histogram.record(
                            UInt64(took.components.seconds) * 1_000_000_000
                                + UInt64(took.components.attoseconds / 1_000_000_000)
                        )
                        calls += 1
                    } while clock.now < end
                    return (calls, histogram)
                }
            }
            var total = 0
            var merged = Histogram<UInt64>(highestTrackableValue: 60_000_000_000)
            for try await (calls, histogram) in group {
                total += calls
                merged.add(histogram)
            }
            return (total, merged)
        }
    }
}
