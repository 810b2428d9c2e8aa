import Foundation

/// The wall-clock time the session service reads for everything it dates: token claims
/// (`iat`, `exp`), expiry checks, the refresh grace window, key publication and the key cache.
///
/// The service never sleeps on it; tests pass a clock they move by hand to step through
/// windows and lifetimes without waiting.
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
    /// `now()` truncated to whole microseconds, the precision of `timestamptz`: a time the
    /// service stores and reads back (a key's `created_at`, say) compares equal to the instant
    /// it was taken at, never a rounding step after it.
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
    /// Whole seconds since 1970 (rounded down), as JWT `iat`/`exp` carry them.
    var unixSeconds: Int64 { Int64(self.timeIntervalSince1970.rounded(.down)) }
}
