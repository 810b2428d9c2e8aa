/// Makes text a peer sent safe to put in a log line: every character outside printable ASCII
/// is escaped (`\n`, `\u{1B}`, `\u{202E}`, …), as are `"` and `\`, so a peer cannot forge
/// log lines, hide text with terminal escapes or reorder it with bidi controls; and the result
/// is cut to `limit` characters of the input (then `...(N bytes)` gives the full length), so a
/// peer cannot make one line megabytes long.
public enum PeerText {
    /// How many characters of peer text a log line keeps by default.
    public static let defaultLimit = 128

    public static func loggable(_ text: some StringProtocol, limit: Int = defaultLimit) -> String {
        var result = ""
        var kept = 0
        for scalar in text.unicodeScalars {
            if kept == limit {
                result += "...(\(text.utf8.count) bytes)"
                return result
            }
            kept += 1
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case " "..."~": result.unicodeScalars.append(scalar)
            default: result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            }
        }
        return result
    }
}
