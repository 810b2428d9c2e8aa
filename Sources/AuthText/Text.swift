/// Text helpers that full Foundation has and FoundationEssentials (all the services link) lacks.
/// Full Foundation would bring ICU, 40 MB of the container image, for these few functions
/// (docs/deployment.md, "Image size").

extension StringProtocol {
    /// The text without leading and trailing whitespace (`Character.isWhitespace`: spaces, tabs,
    /// line breaks and the other Unicode white space).
    public func trimmingWhitespace() -> String {
        guard let first = self.firstIndex(where: { !$0.isWhitespace }) else { return "" }
        let last = self.lastIndex(where: { !$0.isWhitespace })!
        return String(self[first...last])
    }
}

/// Decimal text of numbers with a fixed number of fraction digits, as printf's `%.Nf` writes
/// them for the values this project shows (durations, rates): no locale, `-` for negatives
/// (`-0.00` for a negative value that rounds to zero, as printf).
public enum FixedPoint {
    /// `value` rounded to `fractionDigits` (0–9) digits after the point, e.g. `format(2.5, 2)`
    /// is `"2.50"`. Values too large for that precision, infinities and NaN come out as Swift
    /// prints them.
    public static func format(_ value: Double, fractionDigits: Int) -> String {
        precondition((0...9).contains(fractionDigits), "fractionDigits must be in 0...9")
        var scale: Int64 = 1
        for _ in 0..<fractionDigits { scale *= 10 }
        let scaled = (abs(value) * Double(scale)).rounded()
        guard scaled.isFinite, scaled < 9.0e18 else { return String(value) }
        let units = Int64(scaled)
        var text = value.sign == .minus ? "-" : ""
        text += String(units / scale)
        if fractionDigits > 0 {
            let fraction = String(units % scale)
            text += "." + String(repeating: "0", count: fractionDigits - fraction.count) + fraction
        }
        return text
    }
}
