import AuthCrypto
import AuthPostgres
import AuthTestSupport
import Foundation
import Testing

/// Issue 7, as production runs the system: two replicas of each service, all connected through a
/// real PgBouncer in transaction pooling mode (`AUTH_DB_POOLER=transaction`; migrations and
/// LISTEN over `AUTH_DATABASE_DIRECT_URL`), callers given both addresses of each. `authctl bench`
/// drives the RPC calls of an email sign-in (the gateway's routes are not written yet, so each
/// call is its own bench stream: OTP Start, identity FindOrCreateByContact, session Issue), one
/// replica of each service is killed with SIGKILL in the middle, and afterwards every session whose
/// Issue was acknowledged is refreshed, again with `authctl bench`.
@Suite(.serialized) struct ReplicasBehindPgBouncerTests {
    let rpcSecret = Data(SecureRandom.bytes(count: 32)).base64EncodedString()
    let otpSecret = Data(SecureRandom.bytes(count: 32)).base64EncodedString()
    /// The fixed master key of the end-to-end tests.
    let masterKey = ProcessEnvironment.masterKey

    /// The statuses a caller may retry (on another replica): nothing else may come back.
    static let retryable: Set<String> = ["OK", "UNAVAILABLE", "DEADLINE_EXCEEDED"]

    /// One bench stream of the sign-in load.
    struct Stream {
        let service: String
        let method: String
        let template: String
        var extra: [String] = []
    }

    func startReplicas(
        _ executable: String,
        portVariable: String,
        environment: [String: String]
    ) throws -> [ServiceProcess] {
        try (0..<2).map { _ in
            try ServiceProcess(executable: executable, environment: environment.merging([portVariable: "0"]) { $1 })
        }
    }

    func bench(_ address: String, _ stream: Stream, _ options: [String]) throws -> ServiceProcess {
        try ServiceProcess(
            executable: "authctl",
            arguments: [
                "bench", address, stream.method, stream.template, "--caller", "gateway", "--json", "--progress",
            ]
                + options + stream.extra,
            environment: ["AUTH_RPC_SECRET": rpcSecret]
        )
    }

    /// The JSON report bench prints last (progress lines on standard error come before it).
    func report(of bench: ServiceProcess) async throws -> [String: Any] {
        let status = await bench.exitStatus(timeout: .seconds(180))
        let output = try await bench.completeOutput()
        #expect(status == 0, "\(output)")
        let start = try #require(output.firstIndex(of: "{"), "no report in: \(output)")
        let end = try #require(output.lastIndex(of: "}"), "no report in: \(output)")
        let object = try JSONSerialization.jsonObject(with: Data(output[start...end].utf8))
        return try #require(object as? [String: Any], "\(output)")
    }

    /// How many progress lines (`authctl: N calls, …`, one a second) `log` holds.
    static func progressLines(in log: String) -> Int {
        log.components(separatedBy: " calls, ").count - 1
    }

    /// Waits until `bench` has printed at least `lines` progress lines. Counted, not matched
    /// with a pattern: `(?s)( calls, .*){N}` backtracks through every choice of lines while the
    /// log holds fewer than N, its time doubling with each line. When a kill came late (second
    /// 23), the wait for 28 lines failed with authctl still running.
    static func waitForProgress(of bench: ServiceProcess, lines: Int, timeout: Duration) async throws {
        try await bench.waitForLog(describedAs: "\(lines) progress lines", timeout: timeout) { log in
            progressLines(in: log) >= lines ? lines : nil
        }
    }

    static func statuses(_ report: [String: Any]) -> [String: Int] {
        var counts: [String: Int] = [:]
        for entry in report["statuses"] as? [[String: Any]] ?? [] {
            let code = entry["code"] as? String ?? "?"
            counts[code, default: 0] += entry["calls"] as? Int ?? 0
        }
        return counts
    }

    @Test(.timeLimit(.minutes(10)))
    func killingOneReplicaOfEachServiceLosesNothingAcknowledged() async throws {
        try await PostgresTestDatabase.withFreshDatabase(prefix: "replicas_e2e") { directURL, database in
            // Behind a transaction pooler the services send no SET: the database gives every
            // server session PgBouncer opens the statement timeout (docs/database.md).
            let admin = PostgresPool(
                configuration: PostgresConfiguration(connectionString: directURL, maxConnections: 1),
                logger: PostgresTestDatabase.makeLogger()
            )
            try await admin.query("ALTER DATABASE \(identifier: database) SET statement_timeout = '5s'")
            await admin.close()

            try await PgBouncer.withPgBouncer(server: directURL, poolSize: 8) { bouncer in
                // 6 processes × 4 pooled connections share PgBouncer's 8 server connections.
                try await run(pooledURL: bouncer.connectionString, directURL: directURL)
            }
        }
    }

    func run(pooledURL: String, directURL: String) async throws {
        let common = [
            "AUTH_RPC_SECRET": rpcSecret,
            "AUTH_DATABASE_URL": pooledURL,
            "AUTH_DB_POOLER": "transaction",
            "AUTH_DATABASE_DIRECT_URL": directURL,
            "AUTH_DB_POOL_SIZE": "4",
        ]
        // Both replicas of a service start together: their migrations meet at the advisory lock,
        // which is taken over the direct connection.
        let replicas: [String: [ServiceProcess]] = [
            "identity": try startReplicas("identity", portVariable: "AUTH_IDENTITY_PORT", environment: common),
            "otp-dispatch": try startReplicas(
                "otp-dispatch",
                portVariable: "AUTH_OTP_PORT",
                environment: common.merging([
                    "AUTH_OTP_SECRET": otpSecret,
                    "AUTH_OTP_EMAIL_PROVIDER": "log",
                    "AUTH_OTP_STARTS_PER_IP_PER_HOUR": "1000000",
                    // A message the killed replica had claimed is sent again soon.
                    "AUTH_OTP_HTTP_TIMEOUT_MS": "1000",
                    "AUTH_OTP_CLAIM_LEASE_SECONDS": "2",
                    // Every claimed message's send at once (one round of 1 s fits the 2 s lease).
                    "AUTH_OTP_PROVIDER_CONCURRENCY": "128",
                    "AUTH_OTP_SWEEP_INTERVAL_MS": "200",
                ]) { $1 }
            ),
            "session": try startReplicas(
                "session",
                portVariable: "AUTH_SESSION_PORT",
                environment: common.merging(["AUTH_MASTER_KEY": masterKey]) { $1 }
            ),
        ]
        var addresses: [String: String] = [:]
        for (service, processes) in replicas {
            var list: [String] = []
            // Six processes start at once on a shared machine: a bound that tells stuck from slow.
            for process in processes {
                list.append(
                    "127.0.0.1:"
                        + (try await process.waitForLog(
                            #"port=(\d+)[^\n]*RPC server listening"#,
                            timeout: .seconds(120)
                        ))
                )
            }
            addresses[service] = list.joined(separator: ",")
        }

        let records = FileManager.default.temporaryDirectory.appendingPathComponent("replicas-e2e-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: records, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: records) }
        let issued = records.appendingPathComponent("issued.jsonl").path
        let started = records.appendingPathComponent("started.jsonl").path
        let users = records.appendingPathComponent("users.jsonl").path

        let streams = [
            Stream(
                service: "otp-dispatch",
                method: "auth.otp.v1.OTP/Start",
                template: #"{"destination": "{{email}}", "purpose": "PURPOSE_LOGIN", "client_ip": "203.0.113.8"}"#,
                extra: ["--record", started]
            ),
            Stream(
                service: "identity",
                method: "auth.identity.v1.Identity/FindOrCreateByContact",
                template: #"{"email": "{{email}}", "client_ip": "203.0.113.7"}"#,
                extra: ["--record", users]
            ),
            Stream(
                service: "session",
                method: "auth.session.v1.Session/Issue",
                template: #"{"user_id": "{{uuid}}", "amr": ["otp_email"], "client_ip": "203.0.113.9"}"#,
                extra: ["--record", issued]
            ),
        ]
        let load = try streams.map {
            // Open loop at a modest rate: the suite runs other tests beside this one on the same
            // cores, and their time bounds must not suffer from it. The load runs until it is
            // stopped (SIGINT) once the kill lies behind it; a fixed length once ended before a
            // late kill (beside the whole suite on a loaded machine), and the test then checked
            // nothing. The duration only bounds a stream the test never stopped.
            try bench(
                addresses[$0.service]!,
                $0,
                ["--duration", "600", "--warmup", "0", "--concurrency", "8", "--rate", "60"]
            )
        }
        // Kill once every stream has answered calls for 5 seconds, so the kill lands in the middle
        // of the load.
        for bench in load {
            _ = try await bench.waitForLog("authctl: [1-9][0-9,]* calls")
            try await Self.waitForProgress(of: bench, lines: 5, timeout: .seconds(60))
        }
        // Progress lines are one a second. The kills lie between the line each stream was in
        // before the first and the one it is in after the last; "after the kill" counts from the
        // latter. (A kill that waited long for its process's output once put the last service's
        // kill in the stream's final second, after a count taken before the kills.)
        let beforeKills = load.map { Self.progressLines(in: $0.log) }
        var killTimes: [String: Duration] = [:]
        for (service, processes) in replicas {
            let started = ContinuousClock.now
            await processes[0].kill()
            killTimes[service] = ContinuousClock.now - started
        }
        let killSecond = load.map { Self.progressLines(in: $0.log) }
        // Each stream goes on for 5 more seconds after the kills (whenever they came), then stops
        // and reports.
        for (index, bench) in load.enumerated() {
            try await Self.waitForProgress(of: bench, lines: killSecond[index] + 5, timeout: .seconds(60))
        }
        for bench in load { bench.send(SIGINT) }

        for (index, bench) in load.enumerated() {
            let stream = streams[index]
            let report = try await report(of: bench)
            let statuses = Self.statuses(report)
            // Every call either succeeded or failed with a status a caller retries.
            #expect(Set(statuses.keys).isSubset(of: Self.retryable), "\(stream.method): \(statuses)")
            #expect(statuses["OK", default: 0] > 0, "\(stream.method): \(statuses)")
            // Throughput returns: after the kill and after the last failed call, calls succeed.
            let perSecond = (report["per_second"] as? [[String: Int]] ?? []).map { ($0["ok"] ?? 0, $0["not_ok"] ?? 0) }
            // The scenario took place: the load went on after the kill.
            try #require(
                perSecond.count > killSecond[index] + 1,
                "\(stream.method): the kill came in second \(killSecond[index]) but the load has \(perSecond.count)"
            )
            let lastFailure = perSecond.lastIndex { $0.1 > 0 } ?? -1
            let recovered = max(lastFailure, killSecond[index]) + 1
            let okAfter = perSecond.dropFirst(recovered).map { $0.0 }
            // For a failure's message and the printout: each status with its reason (a client-made
            // UNAVAILABLE names one; a bare code came from a server), the slowest answer, and the
            // second of the kill. Calls are filed under the second they were answered in.
            let reasons = (report["statuses"] as? [[String: Any]] ?? []).map { entry in
                "\(entry["code"] ?? "?") \(entry["reason"] ?? "") ×\(entry["calls"] ?? 0)"
            }
            let slowest = (report["latency_us"] as? [String: Any])?["max"] ?? "?"
            // A server-made UNAVAILABLE or INTERNAL is logged by the replica that made it, with its cause.
            let serverFailures = replicas[stream.service]!.flatMap { replica in
                replica.log.split(separator: "\n").filter { $0.contains("RPC call failed") }
            }
            let detail =
                "kills in seconds \(beforeKills[index])...\(killSecond[index]) (\(stream.service)'s took "
                + "\(killTimes[stream.service] ?? .zero)), statuses \(reasons), slowest answer \(slowest) µs, "
                + "failures its replicas logged: \(serverFailures.prefix(5))"
            #expect(
                okAfter.contains { $0 > 0 },
                "\(stream.method): no call succeeded after the kill: \(perSecond); \(detail)"
            )
            let before = perSecond.prefix(beforeKills[index]).map { $0.0 }
            // For the printout: without the last second, in which the run stopped part-way.
            let after = okAfter.dropLast()
            print(
                "replicas e2e: \(stream.method): \(statuses); OK calls/s before the kill "
                    + "\(before.isEmpty ? 0 : before.reduce(0, +) / before.count), after recovery "
                    + "\(after.isEmpty ? 0 : after.reduce(0, +) / after.count); per second \(perSecond.map { $0.0 }); "
                    + detail
            )
        }

        // Nothing acknowledged is lost: every session whose Issue answered OK refreshes, through
        // the surviving replica (the dead one's address is still in the list).
        let sessions = try String(contentsOfFile: issued, encoding: .utf8).split(separator: "\n").count
        #expect(sessions > 0)
        let refresh = try bench(
            addresses["session"]!,
            Stream(
                service: "session",
                method: "auth.session.v1.Session/Refresh",
                template: #"{"refresh_token": "{{input.tokens.refresh_token}}", "client_ip": "203.0.113.9"}"#
            ),
            ["--inputs", issued, "--total", "\(sessions)", "--warmup", "0", "--concurrency", "8", "--rate", "200"]
        )
        let refreshed = try await report(of: refresh)
        #expect(Self.statuses(refreshed) == ["OK": sessions], "\(refreshed)")
        print("replicas e2e: refreshed \(sessions) sessions at \(refreshed["calls_per_second"] ?? "?") calls/s")

        try await checkUsersAndCodes(directURL: directURL, users: users, started: started)
        for processes in replicas.values { await processes[1].terminate() }
    }

    /// Every user whose FindOrCreateByContact answered OK exists, and every code whose Start
    /// answered OK is sent, including those the killed replica had claimed.
    func checkUsersAndCodes(directURL: String, users: String, started: String) async throws {
        func ids(_ path: String, _ extract: ([String: Any]) -> String?) throws -> [String] {
            try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").compactMap { line in
                (try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]).flatMap(extract)
            }
        }
        let userIDs = Set(try ids(users) { ($0["user"] as? [String: Any])?["id"] as? String })
        let verificationIDs = Set(try ids(started) { $0["verification_id"] as? String })
        #expect(!userIDs.isEmpty && !verificationIDs.isEmpty)
        let pool = PostgresPool(
            configuration: PostgresConfiguration(connectionString: directURL, maxConnections: 1),
            logger: PostgresTestDatabase.makeLogger()
        )
        defer { Task { await pool.close() } }
        let foundUsers = try await pool.query(
            "SELECT count(*) FROM identity.users WHERE id = ANY(string_to_array($1, ',')::uuid[])",
            [.text(userIDs.joined(separator: ","))]
        )[0][0].int
        #expect(foundUsers == userIDs.count)
        // Delivery is asynchronous (the outbox): wait for it, bounded to tell stuck from slow.
        let deadline = ContinuousClock.now + .seconds(60)
        var sent = 0
        while ContinuousClock.now < deadline {
            sent = try await pool.query(
                """
                SELECT count(DISTINCT verification_id) FROM otp.messages
                WHERE state IN ('sent', 'delivered') AND verification_id = ANY(string_to_array($1, ',')::uuid[])
                """,
                [.text(verificationIDs.joined(separator: ","))]
            )[0][0].int
            if sent == verificationIDs.count { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(sent == verificationIDs.count)
    }
}
