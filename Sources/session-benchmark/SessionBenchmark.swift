import ArgumentParser
import AuthAPI
import AuthAccessToken
import AuthPostgres
import AuthProtobuf
import AuthRPC
import AuthRPCNIO
import BenchmarkDatabase
import BenchmarkHarness
import Foundation
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

    @OptionGroup var database: DatabaseOptions

    @OptionGroup var load: LoadOptions

    @Option(help: "RPC connections from the client to the server.")
    var connections = 1

    @Option(
        help:
            "Which measurements, comma-separated: issue, refresh, validate, check (Validate with check_session), local; also statement (SELECT 1 through the pool and on connections of its own threads: the pool's hand-off cost)."
    )
    var calls = "issue,refresh,validate,check,local"

    @Option(
        help:
            "Also write one tab-separated line per RPC row to this file (measurement, in flight, calls, seconds, calls/s, p50, p99, p99.9 and max in µs, CPU µs per call): for scripts such as scripts/bench/all.sh."
    )
    var resultFile: String?

    /// The measurements of `--calls` that are RPC calls (the main table's rows); `local` and
    /// `statement` print tables of their own.
    static let rpcMeasurements = ["issue", "refresh", "validate", "check"]

    func run() async throws {
        let levels = try load.levels(default: [16, 64], limit: 1024)
        let selected = try LoadOptions.selection(
            calls,
            of: Self.rpcMeasurements + ["local", "statement"]
        )
        guard (1...16).contains(connections) else {
            throw ValidationError("--connections in 1...16")
        }
        var logger = Logger(label: "session-benchmark")
        logger.logLevel = .error
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let results = try ResultFile(path: resultFile)

        try await database.withSchema(prefix: "session_bench", applicationName: "session-benchmark", logger: logger) {
            pool,
            schema in
            let serverVersion = try await pool.query("SHOW server_version")[0][0].string
            let durability = try await pool.query(
                "SELECT current_setting('fsync') || '/' || current_setting('synchronous_commit')"
            )[0][0].string
            var configuration = SessionServiceConfiguration(masterKey: .random())
            configuration.schema = schema
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
                results: results,
                logger: logger
            )
        }
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
        results: ResultFile?,
        logger: Logger
    ) async throws {
        let rpc = try await LoopbackRPC.start(
            serving: service,
            serviceName: "session",
            callerName: "gateway",
            connections: connections,
            logger: logger
        )
        let client = Auth_Session_V1_Session.Client(wrapping: rpc.client)
        let cpu = CPUAccounting { try await pool.backendPIDs(applicationName: "session-benchmark") }
        let runner = load.closedLoop
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
            "\(cores) cores shared by client, server and PostgreSQL; pool \(database.poolSize) connections; "
                + "fsync/synchronous_commit = \(durability)"
        )
        print(load.description)
        print("")
        print("calls/s and latencies are wall-clock: they drop when other work shares the cores. CPU/call counts this")
        print("process (client and server) and the PostgreSQL backends serving it, so calls per CPU-second is the")
        print("capacity of one fully used vCPU, the client's share included.")
        let rpcRows = !selected.isDisjoint(with: Self.rpcMeasurements)
        if rpcRows { print("") }
        let table =
            rpcRows
            ? MarkdownTable([
                .left("call"), .right("in flight"), .right("calls/s"), .right("calls/s per vCPU"), .right("p50"),
                .right("p99"), .right("CPU/call"), .right("calls per CPU-second"),
            ]) : nil
        var slowest: [String] = []
        func row(_ name: String, _ level: Int, _ result: LoadResult) throws {
            try results?.append(name, inFlight: level, result)
            if let call = result.slowestCall { slowest.append("- \(name), \(level) in flight: \(call.description)") }
            table?.row([
                name, "\(level)", LoadResult.formatCount(result.callsPerSecond),
                LoadResult.formatCount(result.callsPerSecond / Double(cores)), result.p50, result.p99,
                result.cpuPerCall, result.callsPerCPUSecond,
            ])
        }

        for level in levels {
            if selected.contains("issue") {
                try row(
                    "Issue",
                    level,
                    try await runner.run(concurrency: level, cpu: cpu, setup: {}) { _ in _ = try await issue() }
                )
            }

            // Each loop refreshes its own session's chain: the state is the current refresh token.
            if selected.contains("refresh") {
                try row(
                    "Refresh",
                    level,
                    try await runner.run(concurrency: level, cpu: cpu, setup: { try await issue().refreshToken }) {
                        token in
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
                try row(
                    "Validate",
                    level,
                    try await runner.run(concurrency: level, cpu: cpu, setup: { try await issue().accessToken }) {
                        token in
                        let response = try await client.validate(Auth_Session_V1_ValidateRequest(accessToken: token))
                        guard response.claims != nil else { throw ValidationError("Validate returned no claims") }
                        return token
                    }
                )
            }

            if selected.contains("check") {
                try row(
                    "Validate + check_session",
                    level,
                    try await runner.run(concurrency: level, cpu: cpu, setup: { try await issue().accessToken }) {
                        token in
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

        if selected.contains("statement") {
            try await statementCost(pool: pool, levels: levels, results: results, logger: logger)
        }

        // Where an outlier came from is in the session's and PostgreSQL's logs of that moment.
        if rpcRows {
            print("")
            print("Slowest call of each row:")
            for line in slowest { print(line) }
        }

        // Local verification: what an API server does with the JWKS, no RPC, no database.
        guard selected.contains("local") else {
            try await rpc.shutdown()
            return
        }
        let token = try await issue().accessToken
        let verifier = try LocalAccessTokenVerifier(
            jwksJSON: try await client.getJWKS(Auth_Session_V1_GetJWKSRequest()).jwksJson,
            issuer: configuration.issuer,
            audience: configuration.audience
        )
        print("")
        let localTable = MarkdownTable([
            .left("local JWT verification (ES256, JWKS, claims)"), .right("threads"), .right("verifications/s"),
            .right("per thread"),
        ])
        let now = Date()
        for threads in Set([1, cores]).sorted() {
            let perSecond = try await ThreadedThroughput.measure(
                threads: threads,
                duration: runner.duration,
                batch: 100
            ) { _ = try verifier.verify(token, now: now) }
            localTable.row([
                "LocalAccessTokenVerifier.verify", "\(threads)", LoadResult.formatCount(perSecond),
                LoadResult.formatCount(perSecond / Double(threads)),
            ])
        }

        try await rpc.shutdown()
    }

    /// ``StatementCost``: `SELECT 1` through the pool (as a service's calls run their
    /// statements), then the same on as many threads each holding a connection.
    func statementCost(pool: PostgresPool, levels: [Int], results: ResultFile?, logger: Logger) async throws {
        print("")
        print(
            "\(StatementCost.statement): through the pool (\(database.poolSize) connections) and on connections of "
                + "the threads' own; CPU of this process and the backends serving it:"
        )
        print("")
        let table = MarkdownTable([
            .left("path"), .right("in flight"), .right("statements/s"), .right("CPU/statement"),
            .right("statements per CPU-second"),
        ])
        let cpu = CPUAccounting { try await pool.backendPIDs(applicationName: "session-benchmark") }
        for level in levels {
            let pooled = try await load.closedLoop.run(concurrency: level, cpu: cpu) {
                try await pool.query(StatementCost.statement, [])
            }
            let direct = try await StatementCost.direct(
                threads: level,
                duration: load.closedLoop.duration,
                configuration: PostgresConfiguration(connectionString: try database.url()),
                applicationName: "session-benchmark-direct",
                pool: pool,
                logger: logger
            )
            // The closed loop's own cost per call (a task's step, the clock, the histogram), which
            // the pool's row carries and the threads' does not.
            let harness = try await load.closedLoop.run(concurrency: level, cpu: cpu) {}
            for (name, result) in [
                ("pool", pooled), ("own connection per thread", direct), ("closed loop alone, no statement", harness),
            ] {
                try results?.append("\(StatementCost.statement), \(name)", inFlight: level, result)
                table.row([
                    name, "\(level)", LoadResult.formatCount(result.callsPerSecond), result.cpuPerCall,
                    result.callsPerCPUSecond,
                ])
            }
        }
    }
}
