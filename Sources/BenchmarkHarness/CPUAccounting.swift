#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// CPU time (user + system) of this process and of the PostgreSQL backends serving it, so a
/// benchmark can report CPU per call: a figure that holds when other work shares the cores,
/// where calls/s by wall clock does not.
public struct CPUAccounting: Sendable {
    private let backendPIDs: @Sendable () async throws -> [Int32]

    /// Counts this process and whatever processes `backendPIDs` names when a row starts (a
    /// benchmark passes its pool's `backendPIDs(applicationName:)`).
    public init(backendPIDs: @escaping @Sendable () async throws -> [Int32] = { [] }) {
        self.backendPIDs = backendPIDs
    }

    /// Starts counting: reads the processes and their CPU time now.
    public func start() async throws -> Mark {
        let backends = try await backendPIDs()
        return Mark(backends: backends, seconds: Self.seconds(backends: backends))
    }

    /// A starting point of ``CPUAccounting``.
    public struct Mark: Sendable {
        let backends: [Int32]
        let seconds: Double

        /// CPU seconds used by the same processes since the mark.
        public func secondsSince() async throws -> Double {
            CPUAccounting.seconds(backends: backends) - seconds
        }
    }

    /// User + system seconds of this process and of `backends`, from getrusage and /proc (a
    /// process that cannot be read, e.g. PostgreSQL on another machine, counts 0).
    public static func seconds(backends: [Int32]) -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        var total = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        total += Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        for pid in backends {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            // After "(comm)" come the state (field 3) … utime and stime (fields 14 and 15).
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { continue }
            total += (user + system) / ticks
        }
        return total
    }
}
