import ArgumentParser
import AuthConfiguration
import AuthProtobuf
import AuthRPC
import AuthRPCNIO
import AuthText
import BenchmarkHarness
import Dispatch
import Histogram
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

extension AuthCtl {
    struct Bench: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Load-tests one method: throughput, latency percentiles, and counts by status.",
            discussion: """
                Closed loop by default: --concurrency calls in flight, each sent when the previous \
                one answers. With --rate, open loop: calls are due at a fixed rate and latency counts \
                from when a call was due, so a server that falls behind shows it (no coordinated \
                omission); --concurrency then caps the calls in flight. Stops after --total calls or \
                --duration seconds, or at Ctrl-C, and prints what it measured. Placeholders in the \
                template's strings vary each request: {{seq}}, {{uuid}}, {{phone}}, {{email}}, \
                {{setup.PATH}} (docs/authctl.md).
                """
        )

        @Argument(
            help:
                "The server's address, host:port; several replicas comma-separated (calls spread over them, a dead one skipped)."
        )
        var address: String

        @Argument(help: "The method, e.g. auth.health.v1.Health/Check.")
        var method: String

        @Argument(help: "The request template as JSON; '-' reads it from standard input.")
        var template = "{}"

        @Option(help: "Calls in flight (closed loop), or at most in flight (with --rate), 1-10000.")
        var concurrency = 16

        @Option(help: "RPC connections, 1-64.")
        var connections = 1

        @Option(help: "Calls to make (after warm-up); default: run for --duration.")
        var total: Int?

        @Option(help: "Seconds to run (after warm-up) when --total is not given, up to 3600.")
        var duration: Double = 10

        @Option(help: "Calls per second, open loop (latency measured from each call's due time).")
        var rate: Double?

        @Option(help: "Seconds of warm-up, not measured, up to 600.")
        var warmup: Double = 1

        @Option(help: "A method called once before the run; its response fills {{setup.PATH}}.")
        var setupMethod: String?

        @Option(help: "The setup call's request as JSON.")
        var setupJson = "{}"

        @Option(
            help:
                "A file of JSON objects, one a line (e.g. written by --record): call k takes line k (cycling) for {{input.PATH}}. With --warmup 0 and --total the line count, each line is used exactly once."
        )
        var inputs: String?

        @Option(
            help:
                "Append each OK response to this file as one line of JSON (e.g. the sessions a run issued, to refresh them later)."
        )
        var record: String?

        @Flag(help: "Print the result as JSON instead of a table.")
        var json = false

        @Flag(
            help:
                "Print the progress line (calls, calls/s, not OK) once a second even when standard error is not a terminal, one line each."
        )
        var progress = false

        @OptionGroup var connection: ConnectionOptions

        func validate() throws {
            guard (1...10_000).contains(concurrency) else {
                throw ValidationError("--concurrency must be in 1...10000")
            }
            guard (1...64).contains(connections) else { throw ValidationError("--connections must be in 1...64") }
            if let total, !(1...1_000_000_000).contains(total) {
                throw ValidationError("--total must be in 1...1000000000")
            }
            guard duration > 0, duration <= 3600 else { throw ValidationError("--duration must be in (0, 3600]") }
            guard warmup >= 0, warmup <= 600 else { throw ValidationError("--warmup must be in [0, 600]") }
            if let rate, !(rate > 0 && rate <= 10_000_000) { throw ValidationError("--rate must be in (0, 10000000]") }
        }

        func run() async throws {
            guard let method = ProtobufSchema.shared.method(method) else {
                fail("no method '\(self.method)' in proto/ (see authctl list ADDRESS)")
            }
            let text = template == "-" ? String(decoding: try StandardStreams.readInput(), as: UTF8.self) : template
            let requests: RequestTemplate
            do {
                requests = try RequestTemplate(json: text, type: method.inputType)
            } catch {
                fail(error)
            }
            let (client, transport) = try connection.makeClient(target: address, connections: connections)
            defer { Task { await transport.shutdown() } }
            let descriptor = MethodDescriptor(service: method.service, method: method.name)

            var setup: DynamicMessage?
            if let setupMethod {
                guard let setupSchema = ProtobufSchema.shared.method(setupMethod) else {
                    fail("no method '\(setupMethod)' in proto/")
                }
                do {
                    let request = try DynamicMessage(json: setupJson, type: setupSchema.inputType)
                    let answer = try await client.unary(
                        MethodDescriptor(service: setupSchema.service, method: setupSchema.name),
                        payload: try request.serializedBytes()
                    )
                    setup = try DynamicMessage(serializedBytes: answer, type: setupSchema.outputType)
                } catch {
                    fail("the setup call failed: \(error)")
                }
            } else if !requests.setupPaths.isEmpty {
                fail("the template uses {{setup.\(requests.setupPaths[0])}} but no --setup-method is given")
            }
            let inputLines: InputLines?
            if let inputs {
                do {
                    inputLines = try InputLines(path: inputs)
                } catch {
                    fail("--inputs \(inputs): \(error)")
                }
            } else if !requests.inputPaths.isEmpty {
                fail("the template uses {{input.\(requests.inputPaths[0])}} but no --inputs is given")
            } else {
                inputLines = nil
            }
            // A template that cannot render (a setup path that is not there) fails here, not in the run.
            do { _ = try requests.render(sequence: 0, setup: setup, input: inputLines?.first) } catch { fail(error) }

            let plan = BenchPlan(
                concurrency: concurrency,
                total: total,
                duration: .milliseconds(Int64(duration * 1000)),
                warmup: .milliseconds(Int64(warmup * 1000)),
                rate: rate
            )
            let run = BenchRun(plan: plan)
            let interrupt = run.stopOnInterrupt()
            let until = total.map { "\($0) calls" } ?? "\(LoadOptions.format(duration)) s"
            StandardStreams.writeError(
                "authctl: calling \(method.path) for \(until) after \(LoadOptions.format(warmup)) s warm-up; Ctrl-C stops and reports\n"
            )
            let terminal = isatty(STDERR_FILENO) == 1
            let progressTask = terminal || progress ? run.showProgress(overwriting: terminal) : nil
            let setupResponse = setup
            let recorder: ResponseRecorder?
            do {
                recorder = try record.map { try ResponseRecorder(path: $0, type: method.outputType) }
            } catch {
                fail("cannot write --record \(record ?? ""): \(error)")
            }
            await run.drive { sequence in
                let payload = try requests.render(sequence: sequence, setup: setupResponse, input: inputLines?.next())
                let answer = try await client.unary(descriptor, payload: payload)
                recorder?.append(answer)
            }
            recorder?.close()
            progressTask?.cancel()
            interrupt.cancel()
            let report = run.report(method: method.path, connections: connections)
            print(json ? report.json : report.table)
        }
    }
}

/// What a bench run is asked to do.
struct BenchPlan: Sendable {
    var concurrency: Int
    var total: Int?
    var duration: Duration
    var warmup: Duration
    var rate: Double?
}

/// Drives the calls of one bench run and collects what they measured.
final class BenchRun: Sendable {
    let plan: BenchPlan
    /// Calls taken (warm-up included): each call's sequence number.
    private let issued = Atomic<Int>(0)
    /// Calls taken after warm-up (with --total, the run stops at that many).
    private let measuredTaken = Atomic<Int>(0)
    private let measuredCalls = Atomic<Int>(0)
    private let failedCalls = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)
    private let results = Mutex<Results>(Results())
    private let clock = ContinuousClock()
    private let started: ContinuousClock.Instant
    private let measuring = Mutex<(start: ContinuousClock.Instant, end: ContinuousClock.Instant?)?>(nil)

    struct Results {
        var histogram = LoadResult.emptyHistogram()
        /// Calls by "CODE reason".
        var statuses: [String: Int] = [:]
        /// Answered calls by the second (since the end of warm-up) they were answered in.
        var perSecond = PerSecondCounts()
    }

    init(plan: BenchPlan) {
        self.plan = plan
        self.started = ContinuousClock.now
    }

    /// Runs `call` until the plan is done or the run is stopped.
    func drive(_ call: @escaping @Sendable (Int) async throws -> Void) async {
        let warmupEnd = started + plan.warmup
        let measuredEnd = warmupEnd + plan.duration
        // Open loop: call n is due at started + n / rate, whoever makes it.
        let interval = plan.rate.map { Duration.nanoseconds(Int64(1e9 / $0)) }
        let clock = self.clock
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<plan.concurrency {
                group.addTask {
                    var local = LoadResult.emptyHistogram()
                    var statuses: [String: Int] = [:]
                    var okCalls = 0
                    var perSecond = PerSecondCounts()
                    var marked = false
                    while !self.stopped.load(ordering: .relaxed) {
                        let sequence = self.issued.add(1, ordering: .relaxed).oldValue
                        var due = clock.now
                        if let interval {
                            due = self.started + interval * sequence
                            if due > clock.now { try? await clock.sleep(until: due) }
                        }
                        let inWarmup = due < warmupEnd
                        if !inWarmup {
                            if !marked {
                                self.markMeasuring(at: due)
                                marked = true
                            }
                            if let total = self.plan.total {
                                if self.measuredTaken.add(1, ordering: .relaxed).oldValue >= total { break }
                            } else if due >= measuredEnd {
                                break
                            }
                        }
                        var failure: String?
                        do {
                            try await call(sequence)
                        } catch let error as RPCError {
                            failure = error.reason.isEmpty ? "\(error.code)" : "\(error.code) \(error.reason)"
                        } catch {
                            failure = "ERROR \(error)"
                        }
                        guard !inWarmup else { continue }
                        let answered = clock.now
                        _ = local.record((answered - due).nanoseconds)
                        perSecond.count(second: Int((answered - warmupEnd).seconds), ok: failure == nil)
                        self.measuredCalls.add(1, ordering: .relaxed)
                        if let failure {
                            statuses[failure, default: 0] += 1
                            self.failedCalls.add(1, ordering: .relaxed)
                        } else {
                            okCalls += 1
                        }
                    }
                    if okCalls > 0 { statuses["OK", default: 0] += okCalls }
                    self.results.withLock {
                        $0.histogram.add(local)
                        $0.statuses.merge(statuses, uniquingKeysWith: +)
                        $0.perSecond.add(perSecond)
                    }
                }
            }
        }
        measuring.withLock { if let start = $0?.start { $0 = (start, clock.now) } }
    }

    private func markMeasuring(at instant: ContinuousClock.Instant) {
        measuring.withLock { if $0 == nil { $0 = (instant, nil) } }
    }

    /// Stops the run at SIGINT; it then reports what it measured so far.
    func stopOnInterrupt() -> any DispatchSourceSignal {
        signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT)
        source.setEventHandler { [self] in stopped.store(true, ordering: .relaxed) }
        source.resume()
        return source
    }

    /// A progress line on standard error once a second: rewritten in place on a terminal,
    /// one line each otherwise.
    func showProgress(overwriting: Bool) -> Task<Void, Never> {
        Task.detached { [self] in
            var last = 0
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                let calls = measuredCalls.load(ordering: .relaxed)
                let text =
                    "\(LoadResult.formatCount(Double(calls))) calls, \(LoadResult.formatCount(Double(calls - last)))/s, \(failedCalls.load(ordering: .relaxed)) not OK"
                let line = overwriting ? "\r\(text)   " : "authctl: \(text)\n"
                StandardStreams.writeError(line)
                last = calls
            }
            if overwriting { StandardStreams.writeError("\r\u{1B}[K") }
        }
    }

    func report(method: String, connections: Int) -> BenchReport {
        let (histogram, statuses, perSecond) = results.withLock { ($0.histogram, $0.statuses, $0.perSecond) }
        let window = measuring.withLock { $0 }
        let elapsed = window.map { ($0.end ?? clock.now) - $0.start } ?? .zero
        return BenchReport(
            method: method,
            plan: plan,
            connections: connections,
            interrupted: stopped.load(ordering: .relaxed),
            result: LoadResult(calls: Int(histogram.totalCount), elapsed: elapsed, histogram: histogram),
            statuses: statuses,
            perSecond: perSecond
        )
    }
}

/// What `authctl bench` prints.
struct BenchReport {
    let method: String
    let plan: BenchPlan
    let connections: Int
    let interrupted: Bool
    let result: LoadResult
    let statuses: [String: Int]
    let perSecond: PerSecondCounts

    private var mode: String {
        plan.rate.map { "open loop at \(LoadResult.formatCount($0)) calls/s, at most \(plan.concurrency) in flight" }
            ?? "closed loop, \(plan.concurrency) in flight"
    }

    private var sortedStatuses: [(String, Int)] {
        statuses.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }
    }

    var table: String {
        var lines = [
            "\(method): \(mode), \(connections) connection(s)\(interrupted ? ", interrupted" : "")",
            "",
            "| calls | seconds | calls/s | p50 | p90 | p99 | p99.9 | max |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
            "| \(LoadResult.formatCount(Double(result.calls))) | \(FixedPoint.format(result.elapsed.seconds, fractionDigits: 2)) | "
                + "\(LoadResult.formatCount(result.callsPerSecond)) | \(result.p50) | \(result.p90) | \(result.p99) | "
                + "\(result.p999) | \(result.max) |",
            "",
            "| status | calls |",
            "|---|---:|",
        ]
        for (status, count) in sortedStatuses {
            lines.append("| \(status) | \(LoadResult.formatCount(Double(count))) |")
        }
        return lines.joined(separator: "\n")
    }

    var json: String {
        func micros(_ percentile: Double) -> Double {
            Double(result.histogram.valueAtPercentile(percentile)) / 1000
        }
        let report = JSONReport(
            method: method,
            mode: plan.rate == nil ? "closed" : "open",
            concurrency: plan.concurrency,
            connections: connections,
            interrupted: interrupted,
            calls: result.calls,
            seconds: result.elapsed.seconds,
            callsPerSecond: result.callsPerSecond,
            latencyMicroseconds: .init(
                p50: micros(50),
                p90: micros(90),
                p99: micros(99),
                p99_9: micros(99.9),
                max: Double(result.histogram.max) / 1000
            ),
            statuses: sortedStatuses.map { status, count in
                let parts = status.split(separator: " ", maxSplits: 1)
                return .init(code: String(parts[0]), reason: parts.count > 1 ? String(parts[1]) : "", calls: count)
            },
            rate: plan.rate,
            perSecond: perSecond.seconds.map { .init(ok: $0.ok, notOK: $0.notOK) }
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data = (try? encoder.encode(report)) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    /// `--json`'s document (docs/authctl.md lists its members).
    private struct JSONReport: Encodable {
        struct Latency: Encodable {
            var p50, p90, p99, p99_9, max: Double
        }
        struct Status: Encodable {
            var code, reason: String
            var calls: Int
        }
        struct Second: Encodable {
            var ok, notOK: Int
            enum CodingKeys: String, CodingKey {
                case ok
                case notOK = "not_ok"
            }
        }
        var method, mode: String
        var concurrency, connections: Int
        var interrupted: Bool
        var calls: Int
        var seconds, callsPerSecond: Double
        var latencyMicroseconds: Latency
        var statuses: [Status]
        var rate: Double?
        var perSecond: [Second]
        enum CodingKeys: String, CodingKey {
            case method, mode, concurrency, connections, interrupted, calls, seconds, statuses, rate
            case callsPerSecond = "calls_per_second"
            case latencyMicroseconds = "latency_us"
            case perSecond = "per_second"
        }
    }
}

/// Answered calls per second of a run, OK and not: shows throughput falling and coming back
/// (a replica killed in the middle).
struct PerSecondCounts: Sendable {
    private(set) var seconds: [(ok: Int, notOK: Int)] = []

    mutating func count(second: Int, ok: Bool) {
        guard second >= 0 else { return }
        while seconds.count <= second { seconds.append((0, 0)) }
        if ok { seconds[second].ok += 1 } else { seconds[second].notOK += 1 }
    }

    mutating func add(_ other: PerSecondCounts) {
        for (second, counts) in other.seconds.enumerated() {
            while seconds.count <= second { seconds.append((0, 0)) }
            seconds[second].ok += counts.ok
            seconds[second].notOK += counts.notOK
        }
    }
}

/// `--record`: each OK response as one line of JSON, appended by whichever call answered.
final class ResponseRecorder: Sendable {
    private let type: String
    /// The file's descriptor; -1 once closed.
    private let descriptor: Mutex<Int32>

    init(path: String, type: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw RequestTemplate.TemplateError(description: "cannot write \(path) (errno \(errno))")
        }
        self.type = type
        self.descriptor = Mutex(descriptor)
    }

    func append(_ answer: [UInt8]) {
        // A response that does not decode was answered OK all the same: it is recorded as `{}`.
        let line =
            ((try? DynamicMessage(serializedBytes: answer, type: type))?.jsonString(pretty: false) ?? "{}") + "\n"
        descriptor.withLock { descriptor in
            guard descriptor >= 0 else { return }
            // One write per line (O_APPEND): lines of concurrent calls never interleave.
            _ = Array(line.utf8).withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        }
    }

    func close() {
        descriptor.withLock { descriptor in
            if descriptor >= 0 { _ = Glibc.close(descriptor) }
            descriptor = -1
        }
    }
}

/// `--inputs`: JSON objects, one a line; each call takes the next (cycling).
final class InputLines: Sendable {
    private let lines: [String]
    private let taken = Atomic<Int>(0)

    init(path: String) throws {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        lines = text.split(separator: "\n").map(String.init).filter { !$0.trimmingWhitespace().isEmpty }
        guard !lines.isEmpty else { throw RequestTemplate.TemplateError(description: "no line in the file") }
        for (number, line) in lines.enumerated() where Self.parse(line) == nil {
            throw RequestTemplate.TemplateError(description: "line \(number + 1) is not a JSON object")
        }
    }

    /// The first line, for checking the template before the run.
    var first: JSONValue? { Self.parse(lines[0]) }

    /// The next call's line.
    func next() -> JSONValue? {
        Self.parse(lines[taken.add(1, ordering: .relaxed).oldValue % lines.count])
    }

    private static func parse(_ line: String) -> JSONValue? {
        guard let value = try? JSONValue.parse(Array(line.utf8)), case .object = value else { return nil }
        return value
    }
}
