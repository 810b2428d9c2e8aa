import Histogram

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// N loops, each making one call at a time (N calls in flight), for a warm-up and then for the
/// measured time: throughput and a latency histogram. Every run is bounded in time and ends by
/// itself; a call that throws ends the run (the other loops stop after their current call) with
/// its error.
public struct ClosedLoopLoad: Sendable {
    public var warmup: Duration
    public var duration: Duration

    public init(warmup: Duration, duration: Duration) {
        self.warmup = warmup
        self.duration = duration
    }

    /// Runs `concurrency` loops of `call`.
    public func run(
        concurrency: Int,
        cpu: CPUAccounting? = nil,
        call: @escaping @Sendable () async throws -> Void
    ) async throws -> LoadResult {
        try await run(concurrency: concurrency, cpu: cpu, setup: {}, step: { _ in try await call() })
    }

    /// Prepares each loop's state with `setup` (not measured), warms up, then measures: each loop
    /// calls `step` on its state and carries on with the state it returns (e.g. the refresh
    /// token a refresh returned) until the time is up.
    public func run<State: Sendable>(
        concurrency: Int,
        cpu: CPUAccounting? = nil,
        setup: @escaping @Sendable () async throws -> State,
        step: @escaping @Sendable (State) async throws -> State
    ) async throws -> LoadResult {
        precondition(concurrency > 0, "concurrency must be positive")
        var states = try await withThrowingTaskGroup(of: State.self) { group in
            for _ in 0..<concurrency { group.addTask { try await setup() } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        if warmup > .zero {
            states = try await Self.loops(states: states, duration: warmup, step: step).states
        }
        let cpuBefore = try await cpu?.start()
        let started = ContinuousClock.now
        let startedAt = Date()
        let measured = try await Self.loops(states: states, duration: duration, step: step)
        let elapsed = ContinuousClock.now - started
        var cpuSeconds: Double?
        if let cpuBefore { cpuSeconds = try await cpuBefore.secondsSince() }
        return LoadResult(
            calls: measured.calls,
            elapsed: elapsed,
            histogram: measured.histogram,
            cpuSeconds: cpuSeconds,
            slowestCall: measured.slowest.map { slowest in
                LoadResult.SlowestCall(
                    nanoseconds: slowest.nanoseconds,
                    startedAt: startedAt.addingTimeInterval((slowest.started - started).seconds),
                    startedAfter: slowest.started - started
                )
            }
        )
    }

    /// The slowest call of a loop: its latency and when it started.
    typealias Slowest = (nanoseconds: UInt64, started: ContinuousClock.Instant)

    static func loops<State: Sendable>(
        states: [State],
        duration: Duration,
        step: @escaping @Sendable (State) async throws -> State
    ) async throws -> (states: [State], calls: Int, histogram: Histogram<UInt64>, slowest: Slowest?) {
        let clock = ContinuousClock()
        let end = clock.now + duration
        return try await withThrowingTaskGroup(of: (State, Int, Histogram<UInt64>, Slowest?).self) { group in
            for initial in states {
                group.addTask {
                    var state = initial
                    var histogram = LoadResult.emptyHistogram()
                    var calls = 0
                    var slowest: Slowest?
                    // At least one call, even in a loop that starts late on a busy machine.
                    repeat {
                        let callStarted = clock.now
                        state = try await step(state)
                        let nanoseconds = (clock.now - callStarted).nanoseconds
                        _ = histogram.record(nanoseconds)
                        if nanoseconds > slowest?.nanoseconds ?? 0 { slowest = (nanoseconds, callStarted) }
                        calls += 1
                    } while clock.now < end && !Task.isCancelled
                    return (state, calls, histogram, slowest)
                }
            }
            var finalStates: [State] = []
            var total = 0
            var merged = LoadResult.emptyHistogram()
            var slowest: Slowest?
            for try await (state, calls, histogram, loopSlowest) in group {
                finalStates.append(state)
                total += calls
                merged.add(histogram)
                if let loopSlowest, loopSlowest.nanoseconds > slowest?.nanoseconds ?? 0 { slowest = loopSlowest }
            }
            return (finalStates, total, merged, slowest)
        }
    }
}

extension Duration {
    /// Whole nanoseconds (negative durations count 0).
    public var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
    }

    /// Seconds as a floating-point number.
    public var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
