import AuthProtobuf
import AuthRPC
import AuthText
import BenchmarkHarness
import Foundation
import Synchronization
import Testing

@Suite struct LoadOptionsTests {
    @Test func levelsDefaultWhenNotGiven() throws {
        let options = try LoadOptions.parse([])
        #expect(try options.levels(default: [16, 64]) == [16, 64])
        #expect(options.description == "5 s per row after 1 s warm-up")
    }

    @Test func levelsParsedAndBounded() throws {
        #expect(try LoadOptions.parse(["--concurrency", "1, 16,64"]).levels(default: []) == [1, 16, 64])
        for bad in ["0", "16,x", "", "5000", "16,,64"] {
            let options = try LoadOptions.parse(["--concurrency", bad])
            #expect(throws: (any Error).self, "\(bad)") { try options.levels(default: [1]) }
        }
        #expect(throws: (any Error).self) {
            try LoadOptions.parse(["--concurrency", "2000"]).levels(default: [], limit: 1024)
        }
    }

    @Test func secondsAndWarmupValidated() {
        #expect(throws: (any Error).self) { try LoadOptions.parse(["--seconds", "0"]) }
        #expect(throws: (any Error).self) { try LoadOptions.parse(["--seconds", "121"]) }
        #expect(throws: (any Error).self) { try LoadOptions.parse(["--warmup", "-1"]) }
    }
}

@Suite struct LoadResultTests {
    @Test func formatsCountsWithSeparators() {
        #expect(LoadResult.formatCount(0) == "0")
        #expect(LoadResult.formatCount(999) == "999")
        #expect(LoadResult.formatCount(1_000) == "1,000")
        #expect(LoadResult.formatCount(1_234_567.4) == "1,234,567")
        #expect(LoadResult.formatCount(-12_345) == "-12,345")
    }

    @Test func formatsLatencies() {
        #expect(LoadResult.formatNanoseconds(812_000) == "812 µs")
        #expect(LoadResult.formatNanoseconds(1_250_000) == "1.25 ms")
    }

    @Test func cpuPerCallNeedsAccounting() {
        var result = LoadResult(calls: 1_000, elapsed: .seconds(1), histogram: LoadResult.emptyHistogram())
        #expect(result.cpuPerCall == "–")
        result.cpuSeconds = 0.5
        #expect(result.cpuPerCall == "500 µs")
        #expect(result.callsPerCPUSecond == "2,000")
        #expect(result.callsPerSecond == 1_000)
    }
}

@Suite struct ClosedLoopLoadTests {
    /// Every measured call is counted once and recorded once; each loop carries its own state.
    @Test func countsEveryMeasuredCallAndCarriesState() async throws {
        let made = Atomic<Int>(0)
        let stepped = Atomic<Int>(0)
        let broken = Atomic<Int>(0)
        let lastSeen = Mutex<[Int: Int]>([:])
        let load = ClosedLoopLoad(warmup: .milliseconds(20), duration: .milliseconds(100))
        let result = try await load.run(
            concurrency: 4,
            setup: { made.add(1, ordering: .relaxed).newValue * 1_000_000 },
            step: { state in
                stepped.add(1, ordering: .relaxed)
                // Each loop's state goes base, base + 1, … : the state a step returns is the next one's.
                lastSeen.withLock { seen in
                    let base = state / 1_000_000
                    if let previous = seen[base], previous + 1 != state { broken.add(1, ordering: .relaxed) }
                    seen[base] = state
                }
                await Task.yield()
                return state + 1
            }
        )
        #expect(broken.load(ordering: .relaxed) == 0)
        #expect(lastSeen.withLock { $0.count } == 4)
        #expect(made.load(ordering: .relaxed) == 4)
        #expect(result.calls >= 4)  // every loop makes at least one call
        #expect(Int(result.histogram.totalCount) == result.calls)
        // Warm-up calls are made but not counted.
        #expect(stepped.load(ordering: .relaxed) >= result.calls)
        #expect(result.elapsed >= .milliseconds(100))
    }

    struct Refused: Error {}

    @Test func aFailingCallEndsTheRun() async {
        let load = ClosedLoopLoad(warmup: .zero, duration: .seconds(30))
        await #expect(throws: Refused.self) {
            _ = try await load.run(concurrency: 2) { throw Refused() }
        }
    }
}

@Suite struct ThreadedThroughputTests {
    @Test func countsOperationsOnItsThreads() async throws {
        let count = Atomic<Int>(0)
        let perSecond = try await ThreadedThroughput.measure(threads: 2, duration: .milliseconds(50), batch: 10) {
            count.add(1, ordering: .relaxed)
        }
        #expect(count.load(ordering: .relaxed) % 10 == 0)
        #expect(count.load(ordering: .relaxed) >= 20)  // each thread runs at least one batch
        #expect(perSecond > 0)
    }

    struct Broken: Error {}

    @Test func anErrorEndsTheMeasurement() async {
        await #expect(throws: Broken.self) {
            _ = try await ThreadedThroughput.measure(threads: 2, duration: .seconds(30)) { throw Broken() }
        }
    }

    final class Counter: Sendable {
        private let count = Atomic<Int>(0)
        var value: Int { count.load(ordering: .relaxed) }
        @discardableResult func add(_ delta: Int = 1) -> Int { count.add(delta, ordering: .relaxed).newValue }
    }

    /// What one thread made: which thread made it; `alive` counts those not yet freed.
    final class ThreadState: Sendable {
        let maker = pthread_self()
        let alive: Counter

        init(alive: Counter) {
            self.alive = alive
            alive.add()
        }

        deinit { alive.add(-1) }
    }

    @Test func eachThreadUsesTheStateItMadeWhichLastsUntilAroundReturns() async throws {
        let threads = 3
        let made = Counter()
        let alive = Counter()
        let usedElsewhere = Counter()
        let operations = Counter()
        let (count, aliveAfterRun) = try await ThreadedThroughput.measure(
            threads: threads,
            duration: .milliseconds(50),
            setUp: { () -> ThreadState in
                made.add()
                return ThreadState(alive: alive)
            },
            operation: { (state: ThreadState) in
                operations.add()
                if pthread_equal(state.maker, pthread_self()) == 0 { usedElsewhere.add() }
            }
        ) { run in
            // Every thread is set up before the measured run starts, and nothing ran yet.
            #expect(made.value == threads)
            #expect(operations.value == 0)
            let count = try await run()
            return (count, alive.value)
        }
        #expect(count.operations == operations.value)
        #expect(count.operations >= threads)  // each thread runs at least one batch
        #expect(usedElsewhere.value == 0)
        #expect(aliveAfterRun == threads)  // held while around could still take its marks
        #expect(alive.value == 0)  // dropped once the measurement is over
    }

    @Test(.timeLimit(.minutes(2))) func aFailedSetUpIsThrownAndNothingIsMeasured() async {
        let operations = Counter()
        let aroundRan = Counter()
        let made = Counter()
        await #expect(throws: Broken.self) {
            _ = try await ThreadedThroughput.measure(
                threads: 2,
                duration: .seconds(3600),
                setUp: {
                    if made.add() == 2 { throw Broken() }
                },
                operation: { operations.add() }
            ) { run in
                aroundRan.add()
                return try await run()
            }
        }
        #expect(aroundRan.value == 0)
        #expect(operations.value == 0)
    }

    struct MarkFailed: Error {}

    @Test(.timeLimit(.minutes(2))) func aroundThrowingBeforeTheRunReleasesTheThreads() async {
        let operations = Counter()
        await #expect(throws: MarkFailed.self) {
            _ = try await ThreadedThroughput.measure(
                threads: 2,
                duration: .seconds(3600),
                setUp: {},
                operation: { operations.add() }
            ) { (_: () async throws -> ThreadedThroughput.Count) -> Int in throw MarkFailed() }
        }
        #expect(operations.value == 0)
    }
}

@Suite struct StoppingTests {
    struct Once: Error {}

    /// One loop failing stops the others: the run is an hour long, so returning at all shows
    /// that the failure ended it (a broken stop fails the time limit). It once asserted "within
    /// 30 s" on the wall clock, and a loaded machine took 36.8 s (issue 18).
    @Test(.timeLimit(.minutes(2))) func oneFailingLoopStopsTheOthers() async {
        let calls = Atomic<Int>(0)
        let load = ClosedLoopLoad(warmup: .zero, duration: .seconds(3600))
        await #expect(throws: Once.self) {
            _ = try await load.run(concurrency: 4) {
                if calls.add(1, ordering: .relaxed).newValue == 100 { throw Once() }
                await Task.yield()
            }
        }
        // Every loop has ended: no call comes after the run returned.
        let atReturn = calls.load(ordering: .relaxed)
        #expect(atReturn >= 100)
        for _ in 0..<100 { await Task.yield() }
        #expect(calls.load(ordering: .relaxed) == atReturn)
    }

    @Test(.timeLimit(.minutes(2))) func oneFailingThreadStopsTheOthers() async {
        let calls = Atomic<Int>(0)
        await #expect(throws: Once.self) {
            _ = try await ThreadedThroughput.measure(threads: 2, duration: .seconds(3600)) {
                if calls.add(1, ordering: .relaxed).newValue == 1_000 { throw Once() }
            }
        }
        let atReturn = calls.load(ordering: .relaxed)
        #expect(atReturn >= 1_000)
        for _ in 0..<100 { await Task.yield() }
        #expect(calls.load(ordering: .relaxed) == atReturn)
    }
}

@Suite struct RequestTemplateTests {
    let type = "auth.session.v1.IssueRequest"

    func decode(_ bytes: [UInt8]) throws -> DynamicMessage {
        try DynamicMessage(serializedBytes: bytes, type: type)
    }

    @Test func aTemplateWithoutPlaceholdersIsTheSameEveryTime() throws {
        let template = try RequestTemplate(json: #"{"user_id": "u", "amr": ["pwd"]}"#, type: type)
        #expect(try template.render(sequence: 0) == template.render(sequence: 7))
        #expect(try decode(template.render(sequence: 3)).fields["user_id"] == .string("u"))
    }

    @Test func fillsPlaceholdersInNestedAndRepeatedStrings() throws {
        let template = try RequestTemplate(
            json:
                #"{"user_id": "user-{{seq}}", "amr": ["pwd", "{{uuid}}"], "device": {"name": "{{email}}", "platform": "{{phone}}"}}"#,
            type: type
        )
        let first = try decode(template.render(sequence: 41))
        let second = try decode(template.render(sequence: 42))
        #expect(first.fields["user_id"] == .string("user-41"))
        #expect(second.fields["user_id"] == .string("user-42"))
        guard case .list(let amr) = first.fields["amr"], case .string(let uuid) = amr.last,
            case .message(let device) = first.fields["device"], case .string(let email) = device.fields["name"],
            case .string(let phone) = device.fields["platform"],
            case .message(let otherDevice) = second.fields["device"]
        else {
            Issue.record("unexpected shape: \(first)")
            return
        }
        #expect(amr.first == .string("pwd"))
        #expect(UUID(uuidString: uuid) != nil && uuid == uuid.lowercased())
        #expect(email.hasPrefix("bench-41-") && email.hasSuffix("@example.com"))
        #expect(otherDevice.fields["name"] != device.fields["name"])
        #expect(phone.wholeMatch(of: /\+91[6-9][0-9]{9}/) != nil, "\(phone)")
    }

    @Test func takesValuesFromTheSetupResponse() throws {
        let tokens = ProtobufSchema.shared.message("auth.session.v1.TokenPair")!
        let response = DynamicMessage(
            schema: ProtobufSchema.shared.message("auth.session.v1.IssueResponse")!,
            fields: [
                "tokens": .message(
                    DynamicMessage(
                        schema: tokens,
                        fields: ["refresh_token": .string("r-1"), "access_token_expires_in": .uint(900)]
                    )
                )
            ]
        )
        let template = try RequestTemplate(
            json:
                #"{"refresh_token": "{{setup.tokens.refresh_token}}", "client_ip": "{{setup.tokens.access_token_expires_in}}"}"#,
            type: "auth.session.v1.RefreshRequest"
        )
        #expect(
            template.setupPaths == ["tokens.refresh_token", "tokens.access_token_expires_in"]
                || template.setupPaths == ["tokens.access_token_expires_in", "tokens.refresh_token"]
        )
        let rendered = try DynamicMessage(
            serializedBytes: template.render(sequence: 0, setup: response),
            type: "auth.session.v1.RefreshRequest"
        )
        #expect(rendered.fields["refresh_token"] == .string("r-1"))
        #expect(rendered.fields["client_ip"] == .string("900"))
        #expect(throws: RequestTemplate.TemplateError.self) {
            try RequestTemplate.lookup("tokens.nope", in: response)
        }
        #expect(throws: RequestTemplate.TemplateError.self) { try template.render(sequence: 0) }
    }

    @Test func takesValuesFromEachCallsInput() throws {
        let template = try RequestTemplate(
            json: #"{"refresh_token": "{{input.tokens.refresh_token}}", "client_ip": "{{ipv4}}"}"#,
            type: "auth.session.v1.RefreshRequest"
        )
        #expect(template.inputPaths == ["tokens.refresh_token"])
        let input = try JSONValue.parse(Array(#"{"tokens": {"refresh_token": "r-7", "n": [3, 2.50, true]}}"#.utf8))
        let rendered = try DynamicMessage(
            serializedBytes: template.render(sequence: 0, input: input),
            type: "auth.session.v1.RefreshRequest"
        )
        #expect(rendered.fields["refresh_token"] == .string("r-7"))
        guard case .string(let ip) = rendered.fields["client_ip"] else {
            Issue.record("no client_ip in \(rendered)")
            return
        }
        #expect(ip.wholeMatch(of: /10\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}/) != nil, "\(ip)")
        #expect(try RequestTemplate.lookup("tokens.n[0]", inJSON: input) == "3")
        #expect(try RequestTemplate.lookup("tokens.n[1]", inJSON: input) == "2.5")
        #expect(try RequestTemplate.lookup("tokens.n[2]", inJSON: input) == "true")
        #expect(throws: RequestTemplate.TemplateError.self) { try RequestTemplate.lookup("tokens", inJSON: input) }
        #expect(throws: RequestTemplate.TemplateError.self) { try RequestTemplate.lookup("tokens.nope", inJSON: input) }
        #expect(throws: RequestTemplate.TemplateError.self) { try template.render(sequence: 0) }
    }

    @Test func refusesUnknownOrUnclosedPlaceholders() {
        #expect(throws: RequestTemplate.TemplateError.self) {
            try RequestTemplate(json: #"{"user_id": "{{nope}}"}"#, type: type)
        }
        #expect(throws: RequestTemplate.TemplateError.self) {
            try RequestTemplate(json: #"{"user_id": "{{seq"}"#, type: type)
        }
        #expect(throws: ProtobufCError.self) { try RequestTemplate(json: #"{"user": "{{seq}}"}"#, type: type) }
    }
}

@Suite struct LoadRunTests {
    /// With `total`, the run makes exactly that many measured calls (warm-up apart) and counts
    /// each by its status: OK, or the RPC error's code and reason.
    @Test func countsEveryCallByStatus() async throws {
        let run = LoadRun(plan: LoadPlan(concurrency: 4, total: 100, duration: .seconds(60), warmup: .zero, rate: nil))
        let made = Atomic<Int>(0)
        await run.drive { sequence in
            made.add(1, ordering: .relaxed)
            if sequence % 4 == 0 {
                throw RPCError(code: .resourceExhausted, message: "slow down", reason: "rate_limited")
            }
        }
        let report = run.report(method: "auth.test.v1.Test/Call", connections: 1)
        #expect(made.load(ordering: .relaxed) == 100)
        #expect(report.result.calls == 100)
        #expect(report.statuses == ["OK": 75, "RESOURCE_EXHAUSTED rate_limited": 25])
        #expect(report.perSecond.seconds.reduce(0) { $0 + $1.ok + $1.notOK } == 100)
        #expect(report.table.contains("| RESOURCE_EXHAUSTED rate_limited | 25 |"))
        #expect(!report.interrupted)
    }

    /// Open loop: calls are due at the rate whoever makes them, and latency counts from the
    /// due time, so a call that waits behind a slow one shows the wait.
    @Test func openLoopLatencyCountsFromTheDueTime() async throws {
        let run = LoadRun(plan: LoadPlan(concurrency: 1, total: 3, duration: .seconds(60), warmup: .zero, rate: 100))
        await run.drive { sequence in
            // The first call takes 200 ms: the next two were due 10 and 20 ms after it began.
            if sequence == 0 { try await Task.sleep(for: .milliseconds(200)) }
        }
        let report = run.report(method: "m", connections: 1)
        #expect(report.result.calls == 3)
        // The second call was due at 10 ms and made after the first ended (200 ms): measured
        // from its due time it took at least 190 ms (from its start, a closed loop's measure,
        // almost nothing), and so did the third; the median is one of them.
        #expect(report.result.histogram.valueAtPercentile(50) >= 180_000_000)
        #expect(report.json.contains("\"mode\" : \"open\""))
    }
}
