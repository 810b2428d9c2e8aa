import Foundation

/// The wall-clock time the otp-dispatch service dates everything with: code expiry, every
/// limit window, resend spacing, lockouts, claims and retries. Tests pass a clock they move by
/// hand, so no test sleeps through a window.
public protocol WallClock: Sendable {
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
    var unixSeconds: Int64 { Int64(self.timeIntervalSince1970.rounded(.down)) }
}

/// Whole seconds from `now` until `date`, rounded up, at least 1 (for `retry_after_seconds`).
func secondsUntil(_ date: Date, from now: Date) -> UInt32 {
    UInt32(clamping: max(1, Int64(date.timeIntervalSince(now).rounded(.up))))
}
