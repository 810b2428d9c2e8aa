import AuthText
import Histogram

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What one row of load measured.
public struct LoadResult: Sendable {
    /// Calls completed in the measured time.
    public var calls: Int
    public var elapsed: Duration
    /// Latency of each call in nanoseconds.
    public var histogram: Histogram<UInt64>
    /// CPU seconds used in the measured time by what the ``CPUAccounting`` counts, if any.
    public var cpuSeconds: Double?

    public init(calls: Int, elapsed: Duration, histogram: Histogram<UInt64>, cpuSeconds: Double? = nil) {
        self.calls = calls
        self.elapsed = elapsed
        self.histogram = histogram
        self.cpuSeconds = cpuSeconds
    }

    /// A histogram for latencies from 1 ns to 60 s at 3 significant digits.
    public static func emptyHistogram() -> Histogram<UInt64> {
        Histogram<UInt64>(highestTrackableValue: 60_000_000_000, numberOfSignificantValueDigits: .three)
    }

    public var callsPerSecond: Double {
        let seconds = elapsed.seconds
        return seconds > 0 ? Double(calls) / seconds : 0
    }

    /// Latency at `percentile` (0–100), formatted.
    public func latency(_ percentile: Double) -> String {
        Self.formatNanoseconds(histogram.valueAtPercentile(percentile))
    }

    public var p50: String { latency(50) }
    public var p90: String { latency(90) }
    public var p99: String { latency(99) }
    public var p999: String { latency(99.9) }
    public var max: String { Self.formatNanoseconds(histogram.max) }

    /// CPU time per call, formatted ("–" without CPU accounting).
    public var cpuPerCall: String {
        guard let perCall = cpuSecondsPerCall else { return "–" }
        return FixedPoint.format(perCall * 1e6, fractionDigits: 0) + " µs"
    }

    /// Calls one fully used CPU sustains at this CPU cost per call ("–" without CPU accounting).
    public var callsPerCPUSecond: String {
        guard let perCall = cpuSecondsPerCall, perCall > 0 else { return "–" }
        return Self.formatCount(1 / perCall)
    }

    public var cpuSecondsPerCall: Double? {
        cpuSeconds.map { $0 / Double(Swift.max(calls, 1)) }
    }

    /// "812 µs" below a millisecond, "1.25 ms" from there.
    public static func formatNanoseconds(_ nanoseconds: UInt64) -> String {
        nanoseconds >= 1_000_000
            ? FixedPoint.format(Double(nanoseconds) / 1e6, fractionDigits: 2) + " ms"
            : FixedPoint.format(Double(nanoseconds) / 1e3, fractionDigits: 0) + " µs"
    }

    /// A whole number with thousands separators: "12,345".
    public static func formatCount(_ value: Double) -> String {
        let whole = Int(value.rounded())
        let digits = String(Swift.abs(whole))
        var grouped = ""
        for (index, character) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { grouped.append(",") }
            grouped.append(character)
        }
        return whole < 0 ? "-" + grouped : grouped
    }
}
