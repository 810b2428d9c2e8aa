import AuthTime
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A wall clock a test moves by hand (the services take their time from a ``WallClock``, so
/// windows, expiries and lockouts are tested without sleeping). The one copy for every test
/// target.
public final class ManualClock: WallClock {
    private let current: Mutex<Date>
    /// With `realTime`, the clock also moves with the system's (for tests of a loop running on
    /// its own, such as otp-dispatch's dispatcher); `advance` still jumps.
    private let realStart: Date?

    /// Starts at a fixed, realistic time (2026-06-01T00:00:00Z).
    public init(_ start: Date = Date(timeIntervalSince1970: 1_780_272_000), realTime: Bool = false) {
        self.current = Mutex(start)
        self.realStart = realTime ? Date() : nil
    }

    public func now() -> Date {
        let base = current.withLock { $0 }
        guard let realStart else { return base }
        return base.addingTimeInterval(Date().timeIntervalSince(realStart))
    }

    public func advance(seconds: Double) {
        current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }

    public func advance(by duration: Duration) {
        let (seconds, attoseconds) = duration.components
        advance(seconds: Double(seconds) + Double(attoseconds) / 1e18)
    }
}
