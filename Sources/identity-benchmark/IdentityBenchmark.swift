import ArgumentParser
import AuthAPI
import AuthCrypto
import AuthPostgres
import AuthProtobuf
import AuthRPC
import BenchmarkDatabase
import BenchmarkHarness
import Foundation
import IdentityService
import Logging

/// Measures the identity service through the RPC layer, with PostgreSQL on the same machine:
/// password sign-in and lookup-by-phone calls/s with p50/p99, next to the bare scrypt hashes/s of
/// the same parameters on the same number of threads in the same run (a password sign-in is one
/// hash, so the gap between the two is the service's own overhead). Runs on its own schema,
/// which it drops at the end; every row is bounded in time and the run stops by itself.
@main
struct IdentityBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "identity-benchmark",
        abstract: "Benchmarks password sign-in and lookup-by-phone over the RPC with PostgreSQL, beside bare scrypt."
    )

    @OptionGroup var database: DatabaseOptions

    @OptionGroup var load: LoadOptions

    @Option(help: "scrypt log2(N) (the service's default, OWASP's, is 17); r = 8, p = 1.")
    var scryptLogN = 17

    @Option(help: "Hashes at once (the service's default: the number of processors).")
    var hashConcurrency = ProcessInfo.processInfo.activeProcessorCount

    @Option(help: "Which measurements, comma-separated: hash (bare scrypt), signin, phone.")
    var calls = "hash,signin,phone"

    func run() async throws {
        let levels = try load.levels(default: [16], limit: 1024)
        let selected = try LoadOptions.selection(calls, of: ["hash", "signin", "phone"])
        guard (10...20).contains(scryptLogN), (1...64).contains(hashConcurrency) else {
            throw ValidationError("--scrypt-log-n in 10...20, --hash-concurrency in 1...64")
        }
        var logger = Logger(label: "identity-benchmark")
        logger.logLevel = .error

        try await database.withSchema(prefix: "identity_bench", applicationName: "identity-benchmark", logger: logger) {
            pool,
            schema in
            var configuration = IdentityServiceConfiguration()
            configuration.schema = schema
            configuration.scryptParameters = .init(logN: scryptLogN, r: 8, p: 1)
            configuration.hashConcurrency = hashConcurrency
            // Every loop signs in successfully; the lockout never counts here.
            let service = try await IdentityService.start(database: pool, configuration: configuration, logger: logger)
            let outcome: Result<Void, any Error>
            do {
                try await measure(
                    service,
                    pool: pool,
                    configuration: configuration,
                    levels: levels,
                    selected: selected,
                    logger: logger
                )
                outcome = .success(())
            } catch {
                outcome = .failure(error)
            }
            await service.shutdown()
            try outcome.get()
        }
    }

    func measure(
        _ service: IdentityService,
        pool: PostgresPool,
        configuration: IdentityServiceConfiguration,
        levels: [Int],
        selected: Set<String>,
        logger: Logger
    ) async throws {
        let rpc = try await LoopbackRPC.start(
            serving: service,
            serviceName: "identity",
            callerName: "gateway",
            logger: logger
        )
        let client = Auth_Identity_V1_Identity.Client(wrapping: rpc.client)
        let cpu = CPUAccounting { try await pool.backendPIDs(applicationName: "identity-benchmark") }
        let runner = load.closedLoop
        let serverVersion = try await pool.query("SHOW server_version")[0][0].string
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let password = "Bench-Mark-2026"

        print(
            "Identity service over the RPC layer (TCP loopback, 1 connection), PostgreSQL \(serverVersion) on the same machine"
        )
        print(
            "\(cores) cores shared by client, server and PostgreSQL; pool \(database.poolSize) connections; "
                + "scrypt \(configuration.scryptParameters) on \(configuration.hashConcurrency) hashing threads; \(load.description)"
        )
        print("")
        let table = MarkdownTable([
            .left("measurement"), .right("in flight"), .right("per second"), .right("p50"), .right("p99"),
            .right("CPU/call"),
        ])

        let hasher = ScryptPasswordHasher(parameters: configuration.scryptParameters)
        // What a sign-in computes: one scrypt of the presented password with the stored salt.
        let stored = try hasher.hash(password: password)
        /// Bare hashes/s on as many threads as the service hashes with; measured before and after
        /// the sign-in rows, since other work on a shared machine moves it.
        /// Bare hashes/s on as many threads as the service hashes with, and the CPU each took
        /// (this process only: nothing else of ours runs meanwhile); measured before and after
        /// the sign-in rows, since other work on a shared machine moves the rate.
        @Sendable func bareHashes(_ label: String) async throws -> (rate: Double, cpuPerHash: Double) {
            let cpuBefore = CPUAccounting.seconds(backends: [])
            let started = ContinuousClock.now
            let rate = try await ThreadedThroughput.measure(
                threads: configuration.hashConcurrency,
                duration: runner.duration
            ) {
                guard try hasher.verify(password: password, against: stored) else {
                    throw ValidationError("the bare hash did not verify")
                }
            }
            let elapsed = ContinuousClock.now - started
            let hashes = max(
                1,
                rate * (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
            )
            let cpuPerHash = (CPUAccounting.seconds(backends: []) - cpuBefore) / hashes
            table.row([
                "bare scrypt hash, \(label) (\(configuration.hashConcurrency) threads)",
                "\(configuration.hashConcurrency)", String(format: "%.1f", rate), "–", "–",
                String(format: "%.0f µs", cpuPerHash * 1e6),
            ])
            return (rate, cpuPerHash)
        }
        var hashesBefore: (rate: Double, cpuPerHash: Double)?
        if selected.contains("hash") {
            hashesBefore = try await bareHashes("before")
            // The same verifications through the service's own hashing pool, 16 waiting, no RPC
            // and no database: what the pool's threads and hand-offs cost by themselves.
            let pooled = try await runner.run(concurrency: 16, cpu: cpu) {
                guard try await service.hashing.verify(password, against: stored) else {
                    throw ValidationError("the pooled hash did not verify")
                }
            }
            table.row([
                "scrypt on the service's hashing pool (no RPC)", "16", String(format: "%.1f", pooled.callsPerSecond),
                pooled.p50, pooled.p99, pooled.cpuPerCall,
            ])
        }
        // 16 calls waiting for 2 hashing threads at ~0.5 s a hash wait several seconds each.
        let slow = CallOptions(timeout: .seconds(120))
        var summary: [String] = []
        var signInRates: [(level: Int, rate: Double, cpuPerCall: Double?)] = []
        if selected.contains("signin") {
            for level in levels {
                let result = try await runner.run(
                    concurrency: level,
                    cpu: cpu,
                    setup: { () async throws -> String in
                        let email = "bench-\(UUID().uuidString.prefix(8).lowercased())@example.com"
                        _ = try await client.signUp(
                            .init(displayName: "Bench User", email: email, password: password),
                            options: slow
                        )
                        return email
                    },
                    step: { email in
                        _ = try await client.signInWithPassword(.init(email: email, password: password), options: slow)
                        return email
                    }
                )
                table.row([
                    "SignInWithPassword", "\(level)", String(format: "%.1f", result.callsPerSecond), result.p50,
                    result.p99, result.cpuPerCall,
                ])
                signInRates.append((level, result.callsPerSecond, result.cpuSecondsPerCall))
            }
            if let hashesBefore {
                let hashesAfter = try await bareHashes("after")
                let hashesPerSecond = (hashesBefore.rate + hashesAfter.rate) / 2
                let cpuPerHash = (hashesBefore.cpuPerHash + hashesAfter.cpuPerHash) / 2
                for row in signInRates {
                    summary.append(
                        String(
                            format:
                                "%d in flight: sign-ins/s = %.1f%% of bare hashes/s (mean of before and after); "
                                + "CPU per sign-in (client, server, PostgreSQL) = %.1f%% of CPU per bare hash",
                            row.level,
                            row.rate / hashesPerSecond * 100,
                            (row.cpuPerCall ?? 0) / cpuPerHash * 100
                        )
                    )
                }
            }
        }

        if selected.contains("phone") {
            let users = 1000
            for i in 0..<users {
                _ = try await client.findOrCreateByContact(.init(phone: Self.phone(i)))
            }
            // GetUserByPhone is an operator's method (issue 19 trimmed the gateway from it): the
            // lookups call it as authctl, on a connection of their own.
            let lookupRPC = try await LoopbackRPC.start(
                serving: service,
                serviceName: "identity",
                callerName: "authctl",
                logger: logger
            )
            let lookups = Auth_Identity_V1_Identity.Client(wrapping: lookupRPC.client)
            for level in levels {
                let result = try await runner.run(concurrency: level, cpu: cpu) {
                    let response = try await lookups.getUserByPhone(.init(phone: Self.phone(Int.random(in: 0..<users))))
                    guard response.user != nil else { throw ValidationError("lookup found no user") }
                }
                table.row([
                    "GetUserByPhone", "\(level)", String(format: "%.0f", result.callsPerSecond), result.p50, result.p99,
                    result.cpuPerCall,
                ])
            }
            try await lookupRPC.shutdown()
        }
        if !summary.isEmpty {
            print("")
            summary.forEach { print($0) }
        }
        try await rpc.shutdown()
    }

    static func phone(_ i: Int) -> String { "+1415555" + String(format: "%04d", i) }
}
