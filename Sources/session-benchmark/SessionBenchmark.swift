import ArgumentParser
import AuthAPI
import AuthPostgres
import AuthProtobuf
import AuthRPC
import AuthRPCNIO
import Foundation
import Histogram
import Logging
import SessionService
import Synchronization

/// Measures the session service through the RPC layer, with PostgreSQL on the same machine:
/// Issue, Refresh and Validate calls/s with p50/p99 at several numbers of calls in flight, and
/// local (in-process, no RPC) JWT verification per second. Runs on its own schema, which it
/// drops at the end; every row is bounded in time and the run stops by itself.
@main
struct SessionBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "session-benchmark",
        abstract: "Benchmarks Issue, Refresh and Validate over the RPC with PostgreSQL, and local JWT verification."
    )

    @Option(help: "libpq connection string of the PostgreSQL to use (default: AUTH_DATABASE_URL).")
    var databaseURL: String?

    @Option(help: "Calls in flight, comma-separated.")
    var concurrency = "16,64"

    @Option(help: "Seconds measured per row (after warm-up).")
    var seconds: Double = 5

    @Option(help: "Seconds of warm-up per row.")
    var warmup: Double = 1

    @Option(help: "PostgreSQL connections of the service's pool (the services' default is 10).")
    var poolSize = 10

    @Option(help: "RPC connections from the client to the server.")
    var connections = 1

    @Option(
        help:
            "Which measurements, comma-separated: issue, refresh, validate, check (Validate with check_session), local."
    )
    var calls = "issue,refresh,validate,check,local"

    func run() async throws {
        guard let url = databaseURL ?? ProcessInfo.processInfo.environment["AUTH_DATABASE_URL"], !url.isEmpty else {
            throw ValidationError(
                "give --database-url or AUTH_DATABASE_URL (e.g. `scripts/postgres.sh start .data/pg-bench | tail -1`)"
            )
        }
        let levels = concurrency.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !levels.isEmpty, levels.allSatisfy({ (1...1024).contains($0) }) else {
            throw ValidationError("--concurrency must list numbers between 1 and 1024")
        }
        let known: Set<String> = ["issue", "refresh", "validate", "check", "local"]
        let selected = Set(calls.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
        guard !selected.isEmpty, selected.isSubset(of: known) else {
            throw ValidationError("--calls takes issue, refresh, validate, check, local")
        }
        guard seconds > 0, seconds <= 120, warmup >= 0, warmup <= 60, (1...200).contains(poolSize),
            (1...16).contains(connections)
        else {
            throw ValidationError(
                "--seconds in (0, 120], --warmup in [0, 60], --pool-size in 1...200, --connections in 1...16"
            )
        }
        var logger = Logger(label: "session-benchmark")
        logger.logLevel = .error
        let cores = ProcessInfo.processInfo.activeProcessorCount

        // Own schema, dropped at the end.
        let schema =
            "session_bench_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
        let pool = PostgresPool(
            configuration: PostgresConfiguration(
                connectionString: url,
                maxConnections: poolSize,
                applicationName: "session-benchmark"
            ),
            logger: logger
        )
        let serverVersion = try await pool.query("SHOW server_version")[0][0].string
        let durability = try await pool.query(
            "SELECT current_setting('fsync') || '/' || current_setting('synchronous_commit')"
        )[0][0].string
        var configuration = SessionServiceConfiguration(masterKey: .random())
        configuration.schema = schema

        let outcome: Result<Void, any Error>
        do {
            let service = try await SessionService.start(database: pool, configuration: configuration, logger: logger)
            try await benchmark(
                service: service,
                pool: pool,
                configuration: configuration,
                levels: levels,
                selected: selected,
                cores: cores,
                serverVersion: serverVersion,
                durability: durability,
                logger: logger
            )
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        _ = try? await pool.query("DROP SCHEMA IF EXISTS \(identifier: schema) CASCADE")
        await pool.close()
        try outcome.get()
    }

    func benchmark(
        service: SessionService,
        pool: PostgresPool,
        configuration: SessionServiceConfiguration,
        levels: [Int],
        selected: Set<String>,
        cores: Int,
        serverVersion: String,
        durability: String,
        logger: Logger
    ) async throws {
        let secret = Array(repeating: UInt8(7), count: 32)
        var router = RPCRouter()
        router.register(service)
        let server = try RPCServer(
            configuration: RPCServerConfiguration(serviceName: "session", secret: secret),
            router: router,
            logger: logger
        )
        let port = try await server.bind()
        let serverTask = Task { try await server.run() }
        let transport = TCPClientTransport(
            configuration: RPCClientConfiguration(
                addresses: [RPCAddress(host: "127.0.0.1", port: port)],
                connectionsPerAddress: connections,
                serviceName: "gateway",
                secret: secret
            ),
            logger: logger
        )
        let client = Auth_Session_V1_Session.Client(wrapping: RPCClient(transport: transport, callerService: "gateway"))
        let cpu = CPUAccounting(pool: pool)
        let users = Atomic<Int>(0)
        @Sendable func issue() async throws -> Auth_Session_V1_TokenPair {
            let user = users.add(1, ordering: .relaxed).newValue
            let response = try await client.issue(
                Auth_Session_V1_IssueRequest(
                    userID: "bench-user-\(user)",
                    amr: ["otp_sms"],
                    device: Auth_Session_V1_Device(
                        platform: "ios",
                        name: "Bench iPhone",
                        userAgent: "Bench/1.0 iOS/18"
                    ),
                    clientIP: "203.0.113.7"
                )
            )
            guard let tokens = response.tokens else { throw ValidationError("Issue returned no tokens") }
            return tokens
        }

        print(
            "Session service over the RPC layer (TCP loopback, \(connections) connection(s)), "
                + "PostgreSQL \(serverVersion) on the same machine"
        )
        print(
            "\(cores) cores shared by client, server and PostgreSQL; pool \(poolSize) connections; "
                + "fsync/synchronous_commit = \(durability)"
        )
        print("\(seconds) s per row after \(warmup) s warm-up")
        print("")
        print("calls/s and latencies are wall-clock: they drop when other work shares the cores. CPU/call counts this")
        print("process (client and server) and the PostgreSQL backends serving it, so calls per CPU-second is the")
        print("capacity of one fully used vCPU, the client's share included.")
        print("")
        print("| call | in flight | calls/s | calls/s per vCPU | p50 | p99 | CPU/call | calls per CPU-second |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        func row(_ name: String, _ level: Int, _ result: Measurement) {
            print(
                "| \(name) | \(level) | \(Int(result.callsPerSecond)) | \(Int(result.callsPerSecond / Double(cores))) "
                    + "| \(result.p50) | \(result.p99) | \(result.cpuPerCall) | \(result.callsPerCPUSecond) |"
            )
        }

        for level in levels {
            if selected.contains("issue") {
                row("Issue", level, try await measure(concurrency: level, cpu: cpu, setup: {}) { _ in _ = try await issue() })
            }

            // Each loop refreshes its own session's chain: the state is the current refresh token.
            if selected.contains("refresh") {
                row(
                    "Refresh",
                    level,
                    try await measure(concurrency: level, cpu: cpu, setup: { try await issue().refreshToken }) { token in
                        let response = try await client.refresh(
                            Auth_Session_V1_RefreshRequest(refreshToken: token, clientIP: "203.0.113.7")
                        )
                        guard let next = response.tokens?.refreshToken else {
                            throw ValidationError("Refresh returned no tokens")
                        }
                        return next
                    }
                )
            }

            if selected.contains("validate") {
                row(
                    "Validate",
                    level,
                    try await measure(concurrency: level, cpu: cpu, setup: { try await issue().accessToken }) { token in
                        let response = try await client.validate(Auth_Session_V1_ValidateRequest(accessToken: token))
                        guard response.claims != nil else { throw ValidationError("Validate returned no claims") }
                        return token
                    }
                )
            }

            if selected.contains("check") {
                row(
                    "Validate + check_session",
                    level,
                    try await measure(concurrency: level, cpu: cpu, setup: { try await issue().accessToken }) { token in
                        let response = try await client.validate(
                            Auth_Session_V1_ValidateRequest(accessToken: token, checkSession: true)
                        )
                        guard response.sessionLive else {
                            throw ValidationError("Validate says the session is not live")
                        }
                        return token
                    }
                )
            }
        }

        // Local verification: what an API server does with the JWKS, no RPC, no database.
        guard selected.contains("local") else {
            await transport.shutdown()
            server.beginShutdown()
            try await serverTask.value
            return
        }
        let token = try await issue().accessToken
        let verifier = try LocalAccessTokenVerifier(
            jwksJSON: try await client.getJWKS(Auth_Session_V1_GetJWKSRequest()).jwksJson,
            issuer: configuration.issuer,
            audience: configuration.audience
        )
        print("")
        print("| local JWT verification (ES256, JWKS, claims) | threads | verifications/s | per thread |")
        print("|---|---:|---:|---:|")
        for threads in Set([1, cores]).sorted() {
            let perSecond = try await verifyLocally(verifier: verifier, token: token, threads: threads)
            print(
                "| LocalAccessTokenVerifier.verify | \(threads) | \(Int(perSecond)) "
                    + "| \(Int(perSecond / Double(threads))) |"
            )
        }

        await transport.shutdown()
        server.beginShutdown()
        try await serverTask.value
    }

    struct Measurement {
        var callsPerSecond: Double
        var histogram: Histogram<UInt64>
        /// CPU time (user + system) of this process (client and server) and of the PostgreSQL
        /// backends serving it, per call: independent of what else runs on the machine.
        var cpuSecondsPerCall: Double

        var cpuPerCall: String { String(format: "%.0f µs", cpuSecondsPerCall * 1e6) }
        var callsPerCPUSecond: Int { cpuSecondsPerCall > 0 ? Int(1 / cpuSecondsPerCall) : 0 }

        var p50: String { Self.format(histogram.valueAtPercentile(50)) }
        var p99: String { Self.format(histogram.valueAtPercentile(99)) }

        static func format(_ nanoseconds: UInt64) -> String {
            nanoseconds >= 1_000_000
                ? String(format: "%.2f ms", Double(nanoseconds) / 1e6)
                : String(format: "%.0f µs", Double(nanoseconds) / 1e3)
        }
    }

    /// Prepares `concurrency` loops' states with `setup`, warms up, then measures: each loop
    /// calls `step` on its state until the time is up.
    func measure<State: Sendable>(
        concurrency: Int,
        cpu: CPUAccounting,
        setup: @escaping @Sendable () async throws -> State,
        step: @escaping @Sendable (State) async throws -> State
    ) async throws -> Measurement {
        var states = try await withThrowingTaskGroup(of: State.self) { group in
            for _ in 0..<concurrency { group.addTask { try await setup() } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        (states, _, _) = try await runLoops(states: states, duration: .milliseconds(Int64(warmup * 1000)), step: step)
        let backends = try await cpu.backendPIDs()
        let cpuBefore = cpu.seconds(backends: backends)
        let (_, count, histogram) = try await runLoops(
            states: states,
            duration: .milliseconds(Int64(seconds * 1000)),
            step: step
        )
        let cpuUsed = cpu.seconds(backends: backends) - cpuBefore
        return Measurement(
            callsPerSecond: Double(count) / seconds,
            histogram: histogram,
            cpuSecondsPerCall: cpuUsed / Double(max(count, 1))
        )
    }

    func runLoops<State: Sendable>(
        states: [State],
        duration: Duration,
        step: @escaping @Sendable (State) async throws -> State
    ) async throws -> ([State], Int, Histogram<UInt64>) {
        let end = ContinuousClock.now + duration
        return try await withThrowingTaskGroup(of: (State, Int, Histogram<UInt64>).self) { group in
            for initial in states {
                group.addTask {
                    var state = initial
                    var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000_000)
                    var count = 0
                    let clock = ContinuousClock()
                    while clock.now < end {
                        let started = clock.now
                        state = try await step(state)
                        let took = clock.now - started
                        _ = histogram.record(
                            UInt64(took.components.seconds) * 1_000_000_000
                                + UInt64(took.components.attoseconds / 1_000_000_000)
                        )
                        count += 1
                    }
                    return (state, count, histogram)
                }
            }
            var finalStates: [State] = []
            var total = 0
            var merged = Histogram<UInt64>(highestTrackableValue: 60_000_000_000)
            for try await (state, count, histogram) in group {
                finalStates.append(state)
                total += count
                merged.add(histogram)
            }
            return (finalStates, total, merged)
        }
    }

    func verifyLocally(verifier: LocalAccessTokenVerifier, token: String, threads: Int) async throws -> Double {
        let duration = Duration.milliseconds(Int64(seconds * 1000))
        let start = ContinuousClock.now
        let end = start + duration
        let total = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<threads {
                group.addTask {
                    var count = 0
                    let now = Date()
                    while ContinuousClock.now < end {
                        for _ in 0..<100 { _ = try verifier.verify(token, now: now) }
                        count += 100
                    }
                    return count
                }
            }
            return try await group.reduce(0, +)
        }
        let elapsed = ContinuousClock.now - start
        return Double(total) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }
}

/// CPU time used by this process and by the PostgreSQL backends of the benchmark's pool.
struct CPUAccounting: Sendable {
    let pool: PostgresPool

    /// The backends of the pool (`application_name` `session-benchmark`).
    func backendPIDs() async throws -> [Int32] {
        try await pool.query(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'session-benchmark'"
        ).map { try $0[0].int32 }
    }

    /// User + system seconds of this process and of `backends`, from /proc (a backend that
    /// cannot be read, e.g. PostgreSQL on another machine, counts 0).
    func seconds(backends: [Int32]) -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        var total = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        total += Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        for pid in backends {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            // After "(comm)" come the state (field 3) ... utime and stime (fields 14 and 15).
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { continue }
            total += (user + system) / ticks
        }
        return total
    }
}
