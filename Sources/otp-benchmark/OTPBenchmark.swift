import ArgumentParser
import AuthAPI
import AuthCrypto
import AuthPostgres
import AuthProtobuf
import AuthRPC
import AuthRPCNIO
import BenchmarkDatabase
import BenchmarkHarness
import Foundation
import Hummingbird
import Logging
import OTPService
import ServiceLifecycle
import Synchronization

/// Measures the otp-dispatch service through the RPC layer, with PostgreSQL on the same
/// machine: Start and Check calls/s with p50/p99 at several numbers of calls in flight, and
/// delivered messages/s through the webhook provider to a local receiver. Runs on its own
/// schema, which it drops at the end; every row is bounded in time and the run stops by itself.
@main
struct OTPBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "otp-benchmark",
        abstract:
            "Benchmarks Start and Check over the RPC with PostgreSQL, and outbox delivery through the webhook provider."
    )

    @OptionGroup var database: DatabaseOptions

    @OptionGroup var load: LoadOptions

    @Option(help: "RPC connections from the client to the server.")
    var connections = 1

    @Option(help: "Messages drained through the webhook provider in the delivery measurement.")
    var messages = 5_000

    @Option(help: "Dispatcher workers for the delivery measurement (the service's default is 8).")
    var workers = 8

    @Option(help: "Which measurements, comma-separated: start, check, deliver.")
    var calls = "start,check,deliver"

    @Option(
        name: .customLong("claim-batches"),
        help: "Claim batch sizes of the delivery rows, comma-separated (1: one message per claim, as before batching)."
    )
    var claimBatchList = "1,16"

    @Option(
        help:
            "Also write one tab-separated line per row to this file (measurement, in flight, calls, seconds, calls/s, p50, p99, p99.9 and max in µs, CPU µs per call; delivery rows: \"deliver batch N\", workers as in flight, messages as calls, no latencies): for scripts such as scripts/bench/all.sh."
    )
    var resultFile: String?

    var claimBatches: [Int] {
        claimBatchList.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
    }

    func run() async throws {
        let levels = try load.levels(default: [16, 64], limit: 1024)
        let selected = try LoadOptions.selection(calls, of: ["start", "check", "deliver"])
        guard (1...16).contains(connections), (1...200_000).contains(messages), (1...256).contains(workers),
            !claimBatches.isEmpty, claimBatches.allSatisfy({ (1...256).contains($0) })
        else {
            throw ValidationError(
                "--connections in 1...16, --messages in 1...200000, --workers in 1...256, --claim-batches each in 1...256"
            )
        }
        var logger = Logger(label: "otp-benchmark")
        logger.logLevel = .error
        let results = try ResultFile(path: resultFile)
        try await database.withSchema(
            prefix: "otp_bench",
            applicationName: "otp-benchmark",
            acquireTimeout: .seconds(30),
            logger: logger
        ) { pool, schema in
            let serverVersion = try await pool.query("SHOW server_version")[0][0].string
            let durability = try await pool.query(
                "SELECT current_setting('fsync') || '/' || current_setting('synchronous_commit')"
            )[0][0].string
            try await benchmark(
                pool: pool,
                schema: schema,
                levels: levels,
                selected: selected,
                results: results,
                logger: logger,
                header:
                    "PostgreSQL \(serverVersion) (fsync/synchronous_commit \(durability)), \(ProcessInfo.processInfo.activeProcessorCount) cores, pool \(database.poolSize), \(load.description)"
            )
        }
    }

    /// The service with every abuse limit out of the way (the benchmark measures the work of a
    /// call, not the limits' refusals), webhook provider to `receiverPort`.
    func configuration(schema: String, receiverPort: Int) -> OTPServiceConfiguration {
        var configuration = OTPServiceConfiguration(secret: SecureRandom.bytes(count: 32))
        configuration.schema = schema
        configuration.startsPerIPPerHour = 1_000_000
        configuration.startsPerDestinationPerHour = 100_000
        configuration.pumpingMinimumSent = 1_000_000
        configuration.emailProvider = .webhook
        configuration.smsProvider = .webhook
        configuration.webhookURL = "http://127.0.0.1:\(receiverPort)/otp"
        configuration.webhookSecret = "otp-benchmark"
        configuration.dispatchWorkers = workers
        configuration.sweepInterval = .milliseconds(200)
        return configuration
    }

    func benchmark(
        pool: PostgresPool,
        schema: String,
        levels: [Int],
        selected: Set<String>,
        results: ResultFile?,
        logger: Logger,
        header: String
    ) async throws {
        // The webhook receiver: answers 200 to every POST.
        let received = Atomic<Int>(0)
        let router = Router()
        router.post("/otp") { request, _ -> Response in
            _ = try await request.body.collect(upTo: 1 << 16)
            received.add(1, ordering: .relaxed)
            return Response(status: .ok)
        }
        let portStream = AsyncStream<Int>.makeStream()
        let application = Application(
            router: router,
            configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { portStream.continuation.yield($0.localAddress?.port ?? 0) },
            logger: logger
        )
        let receiverGroup = ServiceGroup(services: [application], logger: logger)
        let receiverTask = Task { try await receiverGroup.run() }
        var ports = portStream.stream.makeAsyncIterator()
        let receiverPort = await ports.next() ?? 0
        defer { receiverTask.cancel() }

        let configuration = configuration(schema: schema, receiverPort: receiverPort)
        let service = try await OTPService.start(database: pool, configuration: configuration, logger: logger)
        var rpcRouter = RPCRouter()
        rpcRouter.register(service)
        let rpc = try await LoopbackRPC.start(
            router: rpcRouter,
            serviceName: "otp-dispatch",
            callerName: "gateway",
            connections: connections,
            logger: logger
        )
        let client = Auth_Otp_V1_OTP.Client(wrapping: rpc.client)
        let cpu = CPUAccounting { try await pool.backendPIDs(applicationName: "otp-benchmark") }
        let runner = load.closedLoop
        let destinations = SharedCounter()
        @Sendable func start() async throws -> Auth_Otp_V1_StartResponse {
            let n = destinations.next()
            return try await client.start(.init(destination: "bench\(n)@example.com", purpose: .login, locale: "en"))
        }

        print("otp-benchmark: \(header)")
        let table = MarkdownTable([
            .left("call"), .right("in flight"), .right("calls/s"), .right("p50"), .right("p99"), .right("CPU per call"),
        ])
        if selected.contains("start") {
            for level in levels {
                let result = try await runner.run(concurrency: level, cpu: cpu) { _ = try await start() }
                try results?.append("Start", inFlight: level, result)
                table.row([
                    "Start", "\(level)", LoadResult.formatCount(result.callsPerSecond), result.p50, result.p99,
                    result.cpuPerCall,
                ])
            }
        }
        if selected.contains("check") {
            for level in levels {
                // Verifications to check, with their codes read from the outbox (the provider's
                // view): enough for the row at a generous rate.
                let needed = Int((load.seconds + load.warmup) * 4_000) + level
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for lane in 0..<32 {
                        group.addTask {
                            for _ in stride(from: lane, to: needed, by: 32) { _ = try await start() }
                        }
                    }
                    try await group.waitForAll()
                }
                let rows = try await pool.query(
                    "SELECT m.verification_id, m.code FROM \(identifier: schema).messages m JOIN \(identifier: schema).verifications v ON v.id = m.verification_id WHERE m.code IS NOT NULL AND v.status = 'pending'"
                )
                let pending = Mutex(try rows.map { (try $0[0].uuid.uuidString.lowercased(), try $0[1].string) })
                let result = try await runner.run(concurrency: level, cpu: cpu) {
                    guard let (id, code) = pending.withLock({ $0.popLast() }) else {
                        throw ValidationError("ran out of verifications to check")
                    }
                    _ = try await client.check(.init(verificationID: id, code: code))
                }
                try results?.append("Check (right code)", inFlight: level, result)
                table.row([
                    "Check (right code)", "\(level)", LoadResult.formatCount(result.callsPerSecond), result.p50,
                    result.p99, result.cpuPerCall,
                ])
            }
        }
        try await rpc.shutdown()

        if selected.contains("deliver") {
            // One row per claim batch size, in this run: the same messages, workers and receiver.
            for batch in claimBatches {
                var batchConfiguration = configuration
                batchConfiguration.claimBatchSize = batch
                let batchService = try await OTPService.start(
                    database: pool,
                    configuration: batchConfiguration,
                    logger: logger
                )
                try await deliver(
                    service: batchService,
                    pool: pool,
                    schema: schema,
                    configuration: batchConfiguration,
                    received: received,
                    destinations: destinations,
                    cpu: cpu,
                    results: results,
                    logger: logger
                )
            }
        }
        await receiverGroup.triggerGracefulShutdown()
        _ = await receiverTask.result
    }

    /// Queues exactly `messages` messages (earlier rows' are set aside) and times `service`'s
    /// dispatcher draining them through the webhook provider: messages/s and CPU per message
    /// (this process, receiver included, and its PostgreSQL backends).
    func deliver(
        service: OTPService,
        pool: PostgresPool,
        schema: String,
        configuration: OTPServiceConfiguration,
        received: borrowing Atomic<Int>,
        destinations: SharedCounter,
        cpu: CPUAccounting,
        results: ResultFile?,
        logger: Logger
    ) async throws {
        try await pool.query(
            "UPDATE \(identifier: schema).messages SET state = 'superseded', code = NULL WHERE state = 'queued'"
        )
        let messages = self.messages
        try await withThrowingTaskGroup(of: Void.self) { group in
            for lane in 0..<32 {
                group.addTask {
                    for _ in stride(from: lane, to: messages, by: 32) {
                        _ = try await service.start(
                            request: .init(destination: "deliver\(destinations.next())@example.com", purpose: .login),
                            context: ServerContext(method: Auth_Otp_V1_OTP.Method.start, authenticatedCaller: "gateway")
                        )
                    }
                }
            }
            try await group.waitForAll()
        }
        let total = try await pool.query(
            "SELECT count(*) FROM \(identifier: schema).messages WHERE state = 'queued'"
        )[0][0].int
        let factory = ProviderFactory(configuration: configuration, logger: logger)
        let dispatcher = service.makeDispatcher(providers: factory.providerSet(), closing: factory, workerName: "bench")
        let before = received.load(ordering: .relaxed)
        let cpuBefore = try await cpu.start()
        let started = ContinuousClock.now
        let group = ServiceGroup(services: [dispatcher], logger: logger)
        let task = Task { try await group.run() }
        let deadline = started + .seconds(300)
        while received.load(ordering: .relaxed) - before < total, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        let elapsed = ContinuousClock.now - started
        let cpuSeconds = try await cpuBefore.secondsSince()
        await group.triggerGracefulShutdown()
        _ = await task.result
        let delivered = received.load(ordering: .relaxed) - before
        let rate = Double(delivered) / elapsed.seconds
        let cpuPerMessage = delivered > 0 ? cpuSeconds / Double(delivered) * 1_000_000 : 0
        try results?.append(
            "deliver batch \(configuration.claimBatchSize)",
            inFlight: configuration.dispatchWorkers,
            calls: delivered,
            seconds: elapsed.seconds,
            cpuSeconds: cpuSeconds
        )
        print("")
        print(
            "Delivered through the webhook provider, \(configuration.claimBatchSize) claimed per statement: \(LoadResult.formatCount(Double(delivered))) messages in \(String(format: "%.2f", elapsed.seconds)) s = \(LoadResult.formatCount(rate)) messages/s, \(Int(cpuPerMessage)) µs CPU per message (\(configuration.dispatchWorkers) workers, receiver on loopback answering 200)"
        )
    }

}

/// A counter the load's tasks share.
final class SharedCounter: Sendable {
    private let value = Atomic<Int>(0)

    func next() -> Int { value.add(1, ordering: .relaxed).newValue }

}
