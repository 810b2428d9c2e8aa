import ArgumentParser
import AuthText

/// The options every benchmark shares: how many calls in flight per row, and how long each row
/// warms up and is measured. Include with `@OptionGroup var load: LoadOptions`.
public struct LoadOptions: ParsableArguments, Sendable {
    @Option(
        name: .customLong("concurrency"),
        help: "Calls in flight, comma-separated (default: the benchmark's own list)."
    )
    public var concurrencyList: String?

    @Option(help: "Seconds measured per row (after warm-up), in (0, 120].")
    public var seconds: Double = 5

    @Option(help: "Seconds of warm-up per row, in [0, 60].")
    public var warmup: Double = 1

    public init() {}

    public func validate() throws {
        guard seconds > 0, seconds <= 120 else { throw ValidationError("--seconds must be in (0, 120]") }
        guard warmup >= 0, warmup <= 60 else { throw ValidationError("--warmup must be in [0, 60]") }
    }

    /// The levels of `--concurrency`, or `defaults` when it is not given; each in `1...limit`.
    public func levels(default defaults: [Int], limit: Int = 4096) throws -> [Int] {
        guard let concurrencyList else { return defaults }
        let parts = concurrencyList.split(separator: ",", omittingEmptySubsequences: false).map {
            $0.trimmingWhitespace()
        }
        let levels = parts.compactMap { Int($0) }
        guard !levels.isEmpty, levels.count == parts.count, levels.allSatisfy({ (1...limit).contains($0) }) else {
            throw ValidationError("--concurrency must list whole numbers between 1 and \(limit), e.g. 16,64")
        }
        return levels
    }

    /// The measurements a `--calls` list names (comma-separated, white space ignored): at least
    /// one, each one of `known`.
    public static func selection(_ list: String, of known: [String]) throws -> Set<String> {
        let selected = Set(list.split(separator: ",").map { String($0.trimmingWhitespace()) })
        guard !selected.isEmpty, selected.isSubset(of: known) else {
            throw ValidationError("--calls takes " + known.joined(separator: ", "))
        }
        return selected
    }

    /// A closed-loop load with this warm-up and measured time.
    public var closedLoop: ClosedLoopLoad {
        ClosedLoopLoad(
            warmup: .milliseconds(Int64((warmup * 1000).rounded())),
            duration: .milliseconds(Int64((seconds * 1000).rounded()))
        )
    }

    /// One line saying how rows were measured, for the top of a report.
    public var description: String {
        "\(Self.format(seconds)) s per row after \(Self.format(warmup)) s warm-up"
    }

    /// A number of seconds as typed: `5`, `0.5`.
    public static func format(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }
}
