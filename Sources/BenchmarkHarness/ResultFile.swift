#if canImport(Glibc)
import Glibc
#endif

/// `--result-file PATH` of the benchmarks: one tab-separated line per measured row beside the
/// Markdown they print, for scripts (scripts/bench/all.sh) rather than readers. The file is
/// made anew with a header line when the benchmark starts, then a line is appended as each row
/// finishes:
///
///     measurement  in_flight  calls  seconds  calls_per_s  p50_us  p99_us  p999_us  max_us  cpu_us_per_call
///
/// Latencies and CPU in microseconds with one decimal; an empty field where the row has no such
/// figure (no histogram, no CPU accounting).
public struct ResultFile: Sendable {
    public let path: String

    public static let header = [
        "measurement", "in_flight", "calls", "seconds", "calls_per_s", "p50_us", "p99_us", "p999_us", "max_us",
        "cpu_us_per_call",
    ].joined(separator: "\t")

    /// Nil without a path; else creates (or truncates) the file with its header line.
    public init?(path: String?) throws {
        guard let path, !path.isEmpty else { return nil }
        self.path = path
        try Self.write(Self.header + "\n", to: path, mode: "w")
    }

    /// One closed-loop row.
    public func append(_ measurement: String, inFlight: Int, _ result: LoadResult) throws {
        let micro = { (nanoseconds: UInt64) in Self.decimal(Double(nanoseconds) / 1e3) }
        try line(
            measurement,
            inFlight: inFlight,
            calls: result.calls,
            seconds: result.elapsed.seconds,
            latencies: [
                micro(result.histogram.valueAtPercentile(50)), micro(result.histogram.valueAtPercentile(99)),
                micro(result.histogram.valueAtPercentile(99.9)), micro(result.histogram.max),
            ],
            cpuSeconds: result.cpuSeconds
        )
    }

    /// A row without a latency histogram (e.g. messages drained in a time).
    public func append(_ measurement: String, inFlight: Int, calls: Int, seconds: Double, cpuSeconds: Double?) throws {
        try line(
            measurement,
            inFlight: inFlight,
            calls: calls,
            seconds: seconds,
            latencies: ["", "", "", ""],
            cpuSeconds: cpuSeconds
        )
    }

    private func line(
        _ measurement: String,
        inFlight: Int,
        calls: Int,
        seconds: Double,
        latencies: [String],
        cpuSeconds: Double?
    ) throws {
        let rate = seconds > 0 ? Double(calls) / seconds : 0
        let cpu = cpuSeconds.map { Self.decimal($0 / Double(max(calls, 1)) * 1e6) } ?? ""
        let name = measurement.replacing("\t", with: " ")
        let fields = [name, "\(inFlight)", "\(calls)", Self.decimal(seconds, digits: 3), Self.decimal(rate)]
        try Self.write((fields + latencies + [cpu]).joined(separator: "\t") + "\n", to: path, mode: "a")
    }

    /// A plain decimal ("1234.5"), no grouping, for any reader.
    static func decimal(_ value: Double, digits: Int = 1) -> String {
        guard value.isFinite else { return "" }
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let scaled = (value * scale).rounded()
        let whole = Int(scaled / scale)
        guard digits > 0 else { return "\(whole)" }
        let fraction = Int(abs(scaled - Double(whole) * scale))
        let fractionText = String(fraction)
        let padded = String(repeating: "0", count: max(0, digits - fractionText.count)) + fractionText
        return (scaled < 0 && whole == 0 ? "-" : "") + "\(whole).\(padded)"
    }

    struct WriteError: Error, CustomStringConvertible {
        var description: String
    }

    private static func write(_ text: String, to path: String, mode: String) throws {
        guard let file = fopen(path, mode) else {
            throw WriteError(description: "cannot open \(path) (errno \(errno))")
        }
        defer { fclose(file) }
        guard fputs(text, file) >= 0 else { throw WriteError(description: "cannot write \(path)") }
    }
}
