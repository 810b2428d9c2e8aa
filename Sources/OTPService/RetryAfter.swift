#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Whole seconds from `now` until `date`, rounded up, at least 1 (for `retry_after_seconds`).
func secondsUntil(_ date: Date, from now: Date) -> UInt32 {
    UInt32(clamping: max(1, Int64(date.timeIntervalSince(now).rounded(.up))))
}
