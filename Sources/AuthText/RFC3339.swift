#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// RFC 3339 timestamps in UTC, whole seconds (`2026-06-01T00:00:00Z`), as the gateway's JSON and
/// the webhook's payload carry them: the civil date from the day count by arithmetic (Howard
/// Hinnant's `civil_from_days`), without a calendar or a format style per call.
public enum RFC3339 {
    /// `unixSeconds` (years 1–9999) as `YYYY-MM-DDTHH:MM:SSZ`.
    public static func string(unixSeconds: Int64) -> String {
        let days = unixSeconds >= 0 ? unixSeconds / 86_400 : (unixSeconds - 86_399) / 86_400
        let secondOfDay = unixSeconds - days * 86_400
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(20)
        func digits(_ value: Int64, _ count: Int) {
            var divisor: Int64 = 1
            for _ in 1..<count { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                bytes.append(UInt8(ascii: "0") + UInt8(rest / divisor % 10))
                rest %= divisor
                divisor /= 10
            }
        }
        digits(year, 4)
        bytes.append(UInt8(ascii: "-"))
        digits(month, 2)
        bytes.append(UInt8(ascii: "-"))
        digits(day, 2)
        bytes.append(UInt8(ascii: "T"))
        digits(secondOfDay / 3_600, 2)
        bytes.append(UInt8(ascii: ":"))
        digits(secondOfDay / 60 % 60, 2)
        bytes.append(UInt8(ascii: ":"))
        digits(secondOfDay % 60, 2)
        bytes.append(UInt8(ascii: "Z"))
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `date`, its fraction of a second dropped.
    public static func string(_ date: Date) -> String {
        string(unixSeconds: Int64(date.timeIntervalSince1970.rounded(.down)))
    }
}
