import AuthCrypto
import AuthTestSupport
import Foundation
import Testing

/// `authctl list`, `describe` and `call` as processes against a real `session` process: any
/// method through the protobuf-c descriptors, with JSON in and out.
@Suite(.serialized) struct AuthctlTests {
    let secretBase64 = Data(SecureRandom.bytes(count: 32)).base64EncodedString()

    /// Runs `body` with a session process on the shared test database, and its port.
    func withSession(_ body: (Int) async throws -> Void) async throws {
        let environment = try await ProcessEnvironment.services(secret: secretBase64, ["AUTH_SESSION_PORT": "0"])
        try await withServiceProcess("session", environment: environment) { _, port in try await body(port) }
    }

    /// Runs authctl to its end and returns its exit status and everything it printed.
    func authctl(_ arguments: [String]) async throws -> (status: Int32?, output: String) {
        let finished = try await ServiceProcess.run(
            "authctl",
            arguments: arguments,
            environment: ["AUTH_RPC_SECRET": secretBase64]
        )
        return (finished.status, finished.log)
    }

    func object(_ text: String) throws -> [String: Any] {
        let value = try JSONSerialization.jsonObject(with: Data(text.utf8))
        return try #require(value as? [String: Any], "not a JSON object: \(text)")
    }

    @Test func listsOnlyTheServicesTheServerServes() async throws {
        try await withSession { port in
            let (status, output) = try await authctl(["list", "127.0.0.1:\(port)"])
            #expect(status == 0, "\(output)")
            #expect(output.contains("auth.session.v1.Session\n"))
            #expect(output.contains("  Issue(auth.session.v1.IssueRequest) returns (auth.session.v1.IssueResponse)\n"))
            #expect(
                output.contains(
                    "auth.health.v1.Health\n  Check(auth.health.v1.HealthCheckRequest) returns (auth.health.v1.HealthCheckResponse)"
                )
            )
            let listed = output.split(separator: "\n").filter { !$0.hasPrefix(" ") }
            #expect(Set(listed) == ["auth.health.v1.Health", "auth.session.v1.Session"], "\(output)")
        }
    }

    @Test func describesMessagesEnumsAndMethodsWithoutAServer() async throws {
        let message = try await authctl(["describe", "auth.session.v1.IssueRequest"])
        #expect(message.status == 0)
        #expect(message.output.contains("repeated string amr = 2;"), "\(message.output)")
        #expect(message.output.contains("optional auth.session.v1.Device device = 3;"), "\(message.output)")
        let enumeration = try await authctl(["describe", "auth.rpc.v1.StatusCode"])
        #expect(enumeration.output.contains("  UNAUTHENTICATED = 16;"))
        let method = try await authctl(["describe", "auth.session.v1.Session/Refresh"])
        #expect(
            method.output.contains(
                "rpc /auth.session.v1.Session/Refresh(auth.session.v1.RefreshRequest) returns (auth.session.v1.RefreshResponse);"
            )
        )
        let unknown = try await authctl(["describe", "auth.nope.v1.Nope"])
        #expect(
            unknown.status == 2
                && unknown.output.contains("no message, enum, service or method called 'auth.nope.v1.Nope'")
        )
    }

    @Test func callsAnyMethodWithJSON() async throws {
        try await withSession { port in
            let address = "127.0.0.1:\(port)"

            // Issue as the gateway (plaintext mode: the shared secret lets authctl name itself).
            let issue = try await authctl([
                "call", address, "auth.session.v1.Session/Issue",
                #"{"user_id": "authctl-e2e", "amr": ["pwd"], "device": {"platform": "ios", "name": "Test"}, "clientIp": "203.0.113.9"}"#,
                "--caller", "gateway",
            ])
            #expect(issue.status == 0, "\(issue.output)")
            let issued = try object(issue.output)
            #expect((issued["status"] as? [String: Any])?["code"] as? String == "OK")
            let tokens = try #require(
                (issued["response"] as? [String: Any])?["tokens"] as? [String: Any],
                "\(issue.output)"
            )
            let refreshToken = try #require(tokens["refresh_token"] as? String)
            #expect(!refreshToken.isEmpty && (tokens["access_token"] as? String)?.isEmpty == false)

            // The refresh token it printed works in the next call.
            let refresh = try await authctl([
                "call", address, "/auth.session.v1.Session/Refresh", #"{"refresh_token": "\#(refreshToken)"}"#,
                "--caller",
                "gateway",
            ])
            #expect(refresh.status == 0, "\(refresh.output)")

            // An error status is printed as JSON with its code and reason; exit status 1.
            let bogus = try await authctl([
                "call", address, "auth.session.v1.Session.Refresh", #"{"refresh_token": "not-a-token"}"#, "--caller",
                "gateway",
            ])
            #expect(bogus.status == 1, "\(bogus.output)")
            let status = try #require(try object(bogus.output)["status"] as? [String: Any])
            #expect(status["code"] as? String == "UNAUTHENTICATED", "\(bogus.output)")
            #expect(status["reason"] as? String == "invalid_refresh_token")

            // Who may call what still holds: authctl may not issue tokens.
            let refused = try await authctl(["call", address, "auth.session.v1.Session/Issue", #"{"user_id": "u"}"#])
            #expect(refused.status == 1)
            #expect(
                (try object(refused.output)["status"] as? [String: Any])?["reason"] as? String == "caller_not_allowed"
            )
        }
    }

    @Test(arguments: [
        (#"{"user_id": "u", "colour": "red"}"#, "field colour: unknown field"),
        (#"{"user_id": 7}"#, "field user_id: expected a string"),
        (#"{"device": {"platform": ["ios"]}}"#, "field device.platform: expected a string"),
        (#"{"user_id": "#, "not valid JSON"),
    ])
    func refusesABadRequestNamingTheField(json: String, message: String) async throws {
        // Refused before connecting: no server needed.
        let result = try await authctl(["call", "127.0.0.1:9", "auth.session.v1.Session/Issue", json])
        #expect(result.status == 2)
        #expect(
            result.output.contains("authctl: invalid JSON for auth.session.v1.IssueRequest: \(message)"),
            "\(result.output)"
        )
    }

    @Test func refusesAnUnknownMethod() async throws {
        let result = try await authctl(["call", "127.0.0.1:9", "auth.session.v1.Session/Nope", "{}"])
        #expect(result.status == 2 && result.output.contains("no method 'auth.session.v1.Session/Nope'"))
    }
}

/// `authctl bench` as a process against a real `session` process.
@Suite(.serialized) struct AuthctlBenchTests {
    let calls = AuthctlTests()

    func report(_ output: String) throws -> [String: Any] {
        // The JSON report is the last thing printed.
        let start = try #require(output.firstIndex(of: "{"), "no JSON in: \(output)")
        return try calls.object(String(output[start...]))
    }

    @Test func closedLoopMakesExactlyTheTotalAndCountsStatuses() async throws {
        try await calls.withSession { port in
            let ok = try await calls.authctl([
                "bench", "127.0.0.1:\(port)", "auth.health.v1.Health/Check", "--total", "500", "--concurrency", "8",
                "--warmup", "0.2", "--json",
            ])
            #expect(ok.status == 0, "\(ok.output)")
            let result = try report(ok.output)
            #expect(result["calls"] as? Int == 500)
            #expect(result["mode"] as? String == "closed")
            let statuses = try #require(result["statuses"] as? [[String: Any]])
            #expect(
                statuses.count == 1 && statuses[0]["code"] as? String == "OK" && statuses[0]["calls"] as? Int == 500
            )
            let latency = try #require(result["latency_us"] as? [String: Double])
            #expect(Set(latency.keys) == ["p50", "p90", "p99", "p99_9", "max"])
            #expect(latency["p50"]! > 0 && latency["p50"]! <= latency["p99"]! && latency["p99"]! <= latency["max"]!)

            // Refused calls are counted by code and reason (authctl may not issue tokens).
            let refused = try await calls.authctl([
                "bench", "127.0.0.1:\(port)", "auth.session.v1.Session/Issue",
                #"{"user_id": "u-{{seq}}", "amr": ["pwd"]}"#,
                "--total", "50", "--warmup", "0", "--json",
            ])
            let refusedStatuses = try #require(try report(refused.output)["statuses"] as? [[String: Any]])
            #expect(refusedStatuses.count == 1)
            #expect(refusedStatuses.first?["code"] as? String == "PERMISSION_DENIED")
            #expect(refusedStatuses.first?["reason"] as? String == "caller_not_allowed")
            #expect(refusedStatuses.first?["calls"] as? Int == 50)
        }
    }

    /// Open loop: one call due every 5 ms for 1 s is exactly 200 calls, however fast they answer.
    @Test func openLoopMakesTheCallsThatFallDue() async throws {
        try await calls.withSession { port in
            let result = try await calls.authctl([
                "bench", "127.0.0.1:\(port)", "auth.session.v1.Session/Validate",
                #"{"access_token": "{{setup.tokens.access_token}}"}"#,
                "--setup-method", "auth.session.v1.Session/Issue",
                "--setup-json", #"{"user_id": "bench-e2e", "amr": ["pwd"], "client_ip": "203.0.113.5"}"#,
                "--caller", "gateway", "--rate", "200", "--duration", "1", "--warmup", "0", "--concurrency", "4",
                "--json",
            ])
            #expect(result.status == 0, "\(result.output)")
            let object = try report(result.output)
            #expect(object["mode"] as? String == "open")
            #expect(object["calls"] as? Int == 200)
            let statuses = try #require(object["statuses"] as? [[String: Any]])
            #expect(statuses.map { $0["code"] as? String } == ["OK"], "\(result.output)")
        }
    }

    @Test func ctrlCPrintsWhatWasMeasured() async throws {
        try await calls.withSession { port in
            let bench = try ServiceProcess(
                executable: "authctl",
                arguments: [
                    "bench", "127.0.0.1:\(port)", "auth.health.v1.Health/Check", "--duration", "600", "--warmup", "0",
                    "--concurrency", "2", "--progress",
                ],
                environment: ["AUTH_RPC_SECRET": calls.secretBase64]
            )
            // Interrupt once its progress line shows answered calls: the report says it was
            // interrupted and counts the calls made.
            _ = try await bench.waitForLog("authctl: [1-9][0-9,]* calls")
            bench.send(SIGINT)
            #expect(await bench.exitStatus() == 0)
            let output = try await bench.completeOutput()
            #expect(output.contains("closed loop, 2 in flight, 1 connection(s), interrupted"), "\(output)")
            #expect(output.contains("| OK | "), "\(output)")
        }
    }

    @Test func refusesATemplateItCannotRender() async throws {
        let unknown = try await calls.authctl([
            "bench", "127.0.0.1:9", "auth.health.v1.Health/Check", #"{"service": "{{nope}}"}"#,
        ])
        #expect(unknown.status == 2 && unknown.output.contains("unknown placeholder {{nope}}"), "\(unknown.output)")
        let noSetup = try await calls.authctl([
            "bench", "127.0.0.1:9", "auth.health.v1.Health/Check", #"{"service": "{{setup.x}}"}"#,
        ])
        #expect(noSetup.status == 2 && noSetup.output.contains("no --setup-method"), "\(noSetup.output)")
    }
}

/// authctl against a real `otp-dispatch` process: the generic `call` reaches a service it has no
/// code for, and `otp status` reads what became of the code's message.
@Suite(.serialized) struct AuthctlOTPTests {
    let calls = AuthctlTests()

    @Test func startsACodeAndReadsItsDeliveryStatus() async throws {
        let environment = [
            "AUTH_RPC_SECRET": calls.secretBase64,
            "AUTH_DATABASE_URL": try await PostgresTestDatabase.connectionString(),
            "AUTH_OTP_SECRET": Data(SecureRandom.bytes(count: 32)).base64EncodedString(),
            "AUTH_OTP_PORT": "0",
            "AUTH_OTP_METRICS_PORT": "0",
            "AUTH_OTP_EMAIL_PROVIDER": "log",
        ]
        try await withServiceProcess("otp-dispatch", environment: environment) { _, port in
            let address = "127.0.0.1:\(port)"
            // A destination and an IP of its own, so the hourly limits of the shared test database
            // are not in play.
            let suffix = UUID().uuidString.prefix(8).lowercased()
            let ip = "10.\(Int.random(in: 0...255)).\(Int.random(in: 0...255)).\(Int.random(in: 1...254))"
            let started = try await calls.authctl([
                "call", address, "auth.otp.v1.OTP/Start",
                #"{"destination": "authctl-\#(suffix)@example.com", "purpose": "PURPOSE_LOGIN", "client_ip": "\#(ip)"}"#,
                "--caller", "gateway",
            ])
            #expect(started.status == 0, "\(started.output)")
            let response = try #require(try calls.object(started.output)["response"] as? [String: Any])
            #expect(response["channel"] as? String == "CHANNEL_EMAIL", "\(started.output)")
            #expect(response["masked_destination"] as? String == "a***@example.com")
            let id = try #require(response["verification_id"] as? String)

            // The log provider "sends" it; authctl (allowed to read delivery status) sees that.
            var line = ""
            for _ in 0..<100 {
                let status = try await calls.authctl(["otp", "status", "--target", address, id])
                #expect(status.status == 0, "\(status.output)")
                line = status.output
                if line.hasPrefix("sent") || line.hasPrefix("delivered") { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(line.hasPrefix("sent: email to a***@example.com via log"), "\(line)")
            let unknown = try await calls.authctl([
                "otp", "status", "--target", address, UUID().uuidString.lowercased(),
            ])
            #expect(unknown.status == 2 && unknown.output.contains("verification_not_found"), "\(unknown.output)")

            // `otp unlock` (issue 19, item 6): a destination that is not locked is cleared all the
            // same; a malformed one is refused naming the field.
            let unlocked = try await calls.authctl([
                "otp", "unlock", "--target", address, "authctl-\(suffix)@example.com",
            ])
            #expect(
                unlocked.status == 0 && unlocked.output.hasPrefix("cleared: the destination was not locked"),
                "\(unlocked.output)"
            )
            let malformed = try await calls.authctl(["otp", "unlock", "--target", address, "not a destination"])
            #expect(malformed.status == 2 && malformed.output.contains("destination"), "\(malformed.output)")
        }
    }
}
