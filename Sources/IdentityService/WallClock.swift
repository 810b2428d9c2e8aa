import Foundation

/// The wall-clock time the identity service reads for everything it dates: rows, the sign-in
/// failure window, ID-token `exp`/`iat` checks and the JWKS refetch limit.
///
/// The service never sleeps on it; tests pass a clock they move by hand.
public protocol WallClock: Sendable {
    /// The current time.
    func now() -> Date
}

/// The system's real-time clock.
public struct SystemWallClock: WallClock {
    public init() {}

    public func now() -> Date { Date() }
}

extension WallClock {
    /// `now()` truncated to whole microseconds, the precision of `timestamptz`.
    func microsecondNow() -> Date {
        let micros = (now().timeIntervalSince1970 * 1_000_000).rounded(.down)
        return Date(timeIntervalSince1970: micros / 1_000_000)
    }
}

extension Duration {
    /// The duration in (fractional) seconds, for `Date` arithmetic.
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = self.components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}

extension Date {
    /// Whole seconds since 1970 (rounded down).
    var unixSeconds: Int64 { Int64(self.timeIntervalSince1970.rounded(.down)) }
}

/// A schema or table name as a quoted SQL identifier.
func quoted(_ identifier: String) -> String {
    "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
}
