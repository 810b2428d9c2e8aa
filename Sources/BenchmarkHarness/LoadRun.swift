import AuthConfiguration
import AuthProtobuf
import AuthRPC
import AuthText
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

/// What a load run (`authctl bench`) is asked to do: closed loop with `concurrency` calls in
/// flight, or open loop at `rate` calls per second with at most `concurrency` in flight; for
/// `total` calls after warm-up or for `duration`.
public struct LoadPlan: Sendable {
    public var concurrency: Int
    public var total: Int?
    public var duration: Duration
    public var warmup: Duration
    public var rate: Double?

    public init(concurrency: Int, total: Int?, duration: Duration, warmup: Duration, rate: Double?) {
        self.concurrency = concurrency
        self.total = total
        self.duration = duration
        self.warmup = warmup
        self.rate = rate
    }
}

/// Drives the calls of one load run and collects what they measured: a latency histogram
/// (from each call's due time, so an open loop shows a server falling behind), calls by status
/// (`RPCError` code and reason) and answered calls per second. Bounded: it stops after the
/// plan's calls or time, or at ``stopOnInterrupt()``'s Ctrl-C.
public final class LoadRun: Sendable {
    public let plan: LoadPlan
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

    public init(plan: LoadPlan) {
        self.plan = plan
        self.started = ContinuousClock.now
    }

    /// Runs `call` until the plan is done or the run is stopped.
    public func drive(_ call: @escaping @Sendable (Int) async throws -> Void) async {
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
    public func stopOnInterrupt() -> any DispatchSourceSignal {
        signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT)
        source.setEventHandler { [self] in stopped.store(true, ordering: .relaxed) }
        source.resume()
        return source
    }

    /// A progress line on standard error once a second: rewritten in place on a terminal,
    /// one line each otherwise.
    public func showProgress(overwriting: Bool, linePrefix: String = "") -> Task<Void, Never> {
        Task.detached { [self] in
            var last = 0
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                let calls = measuredCalls.load(ordering: .relaxed)
                let text =
                    "\(LoadResult.formatCount(Double(calls))) calls, \(LoadResult.formatCount(Double(calls - last)))/s, \(failedCalls.load(ordering: .relaxed)) not OK"
                let line = overwriting ? "\r\(text)   " : "\(linePrefix)\(text)\n"
                StandardStreams.writeError(line)
                last = calls
            }
            if overwriting { StandardStreams.writeError("\r\u{1B}[K") }
        }
    }

    public func report(method: String, connections: Int) -> LoadReport {
        let (histogram, statuses, perSecond) = results.withLock { ($0.histogram, $0.statuses, $0.perSecond) }
        let window = measuring.withLock { $0 }
        let elapsed = window.map { ($0.end ?? clock.now) - $0.start } ?? .zero
        return LoadReport(
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

/// What a load run measured, as `authctl bench` prints it: a Markdown table or JSON.
public struct LoadReport: Sendable {
    public let method: String
    public let plan: LoadPlan
    public let connections: Int
    public let interrupted: Bool
    public let result: LoadResult
    /// Calls by status: `OK`, or the `RPCError`'s code and reason.
    public let statuses: [String: Int]
    public let perSecond: PerSecondCounts

    private var mode: String {
        plan.rate.map { "open loop at \(LoadResult.formatCount($0)) calls/s, at most \(plan.concurrency) in flight" }
            ?? "closed loop, \(plan.concurrency) in flight"
    }

    private var sortedStatuses: [(String, Int)] {
        statuses.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }
    }

    public var table: String {
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

    public var json: String {
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
public struct PerSecondCounts: Sendable {
    public private(set) var seconds: [(ok: Int, notOK: Int)] = []

    public init() {}

    public mutating func count(second: Int, ok: Bool) {
        guard second >= 0 else { return }
        while seconds.count <= second { seconds.append((0, 0)) }
        if ok { seconds[second].ok += 1 } else { seconds[second].notOK += 1 }
    }

    public mutating func add(_ other: PerSecondCounts) {
        for (second, counts) in other.seconds.enumerated() {
            while seconds.count <= second { seconds.append((0, 0)) }
            seconds[second].ok += counts.ok
            seconds[second].notOK += counts.notOK
        }
    }
}

/// `--record`: each OK response as one line of JSON, appended by whichever call answered.
public final class ResponseRecorder: Sendable {
    private let type: String
    /// The file's descriptor; -1 once closed.
    private let descriptor: Mutex<Int32>

    public init(path: String, type: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw RequestTemplate.TemplateError(description: "cannot write \(path) (errno \(errno))")
        }
        self.type = type
        self.descriptor = Mutex(descriptor)
    }

    public func append(_ answer: [UInt8]) {
        // A response that does not decode was answered OK all the same: it is recorded as `{}`.
        let line =
            ((try? DynamicMessage(serializedBytes: answer, type: type))?.jsonString(pretty: false) ?? "{}") + "\n"
        descriptor.withLock { descriptor in
            guard descriptor >= 0 else { return }
            // One write per line (O_APPEND): lines of concurrent calls never interleave.
            _ = Array(line.utf8).withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        }
    }

    public func close() {
        descriptor.withLock { descriptor in
            if descriptor >= 0 { _ = Glibc.close(descriptor) }
            descriptor = -1
        }
    }
}

/// `--inputs`: JSON objects, one a line; each call takes the next (cycling).
public final class InputLines: Sendable {
    private let lines: [String]
    private let taken = Atomic<Int>(0)

    public init(path: String) throws {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        lines = text.split(separator: "\n").map(String.init).filter { !$0.trimmingWhitespace().isEmpty }
        guard !lines.isEmpty else { throw RequestTemplate.TemplateError(description: "no line in the file") }
        for (number, line) in lines.enumerated() where Self.parse(line) == nil {
            throw RequestTemplate.TemplateError(description: "line \(number + 1) is not a JSON object")
        }
    }

    /// The first line, for checking the template before the run.
    public var first: JSONValue? { Self.parse(lines[0]) }

    /// The next call's line.
    public func next() -> JSONValue? {
        Self.parse(lines[taken.add(1, ordering: .relaxed).oldValue % lines.count])
    }

    private static func parse(_ line: String) -> JSONValue? {
        guard let value = try? JSONValue.parse(Array(line.utf8)), case .object = value else { return nil }
        return value
    }
}
