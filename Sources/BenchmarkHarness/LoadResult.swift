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
    /// The slowest call of the measured time (a closed-loop load records it): when it started,
    /// so that an outlier can be matched with the server's and PostgreSQL's logs.
    public var slowestCall: SlowestCall?

    public struct SlowestCall: Sendable {
        public var nanoseconds: UInt64
        /// Wall-clock time the call started.
        public var startedAt: Date
        /// How far into the measured time it started.
        public var startedAfter: Duration

        /// `3.86 s, started 21:05:33.123 UTC (1.204 s into the row)`.
        public var description: String {
            let seconds = Int(startedAt.timeIntervalSince1970)
            let milliseconds = Int((startedAt.timeIntervalSince1970 - Double(seconds)) * 1000)
            let time = RFC3339.string(unixSeconds: Int64(seconds)).dropFirst(11).prefix(8)
            let offset = FixedPoint.format(Double(startedAfter.nanoseconds) / 1e9, fractionDigits: 3)
            let millisecondDigits = String(1000 + milliseconds).dropFirst()
            return "\(LoadResult.formatNanoseconds(nanoseconds)), started \(time).\(millisecondDigits) UTC "
                + "(\(offset) s into the row)"
        }
    }

    public init(
        calls: Int,
        elapsed: Duration,
        histogram: Histogram<UInt64>,
        cpuSeconds: Double? = nil,
        slowestCall: SlowestCall? = nil
    ) {
        self.calls = calls
        self.elapsed = elapsed
        self.histogram = histogram
        self.cpuSeconds = cpuSeconds
        self.slowestCall = slowestCall
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
