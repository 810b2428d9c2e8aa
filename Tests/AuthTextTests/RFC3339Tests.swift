import Foundation
import Testing

@testable import AuthText

@Suite struct RFC3339Tests {
    @Test func agreesWithFoundationsISO8601() {
        var seconds: [Int64] = [0, 1, 59, 86_399, 86_400, 951_782_400, 1_780_272_000, 253_402_300_799]
        // Every day of 1970–2100 at a moving time of day, leap days included.
        var day: Int64 = 0
        while day < 47_847 {
            seconds.append(day * 86_400 + (day * 7_919) % 86_400)
            day += 1
        }
        for value in seconds {
            let expected = Date(timeIntervalSince1970: TimeInterval(value)).formatted(.iso8601)
            #expect(RFC3339.string(unixSeconds: value) == expected, "\(value)")
        }
        #expect(RFC3339.string(unixSeconds: 1_780_272_000) == "2026-06-01T00:00:00Z")
        #expect(RFC3339.string(Date(timeIntervalSince1970: 1.9)) == "1970-01-01T00:00:01Z")
    }
}
