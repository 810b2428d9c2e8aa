#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The wall-clock time a service reads for everything it dates: token claims, expiry checks,
/// limit windows, resend spacing, lockouts, outbox claims and retries, cache lifetimes.
///
/// Services never sleep on it; tests pass a clock they move by hand to step through windows
/// and lifetimes without waiting (docs/testing.md).
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
    /// `now()` truncated to whole microseconds, the precision of `timestamptz`: a time a service
    /// stores and reads back (a key's `created_at`, say) compares equal to the instant it was
    /// taken at, never a rounding step after it.
    public func microsecondNow() -> Date {
        let micros = (now().timeIntervalSince1970 * 1_000_000).rounded(.down)
        return Date(timeIntervalSince1970: micros / 1_000_000)
    }
}

extension Duration {
    /// The duration in (fractional) seconds, for `Date` arithmetic.
    public var timeInterval: TimeInterval {
        let (seconds, attoseconds) = self.components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}

extension Date {
    /// Whole seconds since 1970 (rounded down), as JWT `iat`/`exp` carry them.
    public var unixSeconds: Int64 { Int64(self.timeIntervalSince1970.rounded(.down)) }
}
