import AuthText
import Foundation
import Testing

@Suite struct TextTests {
    @Test(arguments: ["", "  ", "\t\n", "a", " a ", "\ta b\n", "\u{2003}x\u{00A0}", "a  ", "  a"])
    func trimmingWhitespaceMatchesFoundation(_ text: String) {
        #expect(text.trimmingWhitespace() == text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    @Test func trimsSubstrings() {
        let part = " a , b ".split(separator: ",")[1]
        #expect(part.trimmingWhitespace() == "b")
    }

    @Test(arguments: [0.0, 1, 2.5, 0.125, 0.0005, 12.3456, -1.25, -0.0004, 1234567.891, 99.995, 1e-9, 3e12])
    func fixedPointMatchesPrintf(_ value: Double) {
        for digits in [0, 1, 2, 3, 6] {
            let expected = String(format: "%.\(digits)f", value)
            let actual = FixedPoint.format(value, fractionDigits: digits)
            // printf rounds the binary value half to even; the two agree except on exact ties.
            if expected != actual {
                let tie = (abs(value) * pow(10, Double(digits))).truncatingRemainder(dividingBy: 1) == 0.5
                #expect(tie, "\(value) with \(digits) digits: printf \(expected), FixedPoint \(actual)")
            }
        }
    }

    @Test func fixedPointLeavesHugeValuesToSwift() {
        #expect(FixedPoint.format(1e30, fractionDigits: 2) == String(1e30))
        #expect(FixedPoint.format(.infinity, fractionDigits: 2) == "inf")
    }
}
