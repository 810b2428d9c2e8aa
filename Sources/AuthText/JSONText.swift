/// JSON written by hand where `JSONEncoder` costs too much for what it writes (an access
/// token's claims, a JOSE header: on every sign-in and refresh).
public enum JSONText {
    /// Appends `string` as a JSON string as `JSONEncoder` writes it: quoted, `"` and `\` escaped,
    /// `\n`, `\r`, `\t`, `\b`, `\f`, other control characters as `\u00XX`, everything else (`/`
    /// and non-ASCII included) as it is.
    public static func appendString(_ string: String, to json: inout String) {
        json += "\""
        // Runs of bytes that need no escape are appended whole: every byte escaped is ASCII, so
        // each run starts and ends on a character boundary.
        let utf8 = string.utf8
        var runStart = utf8.startIndex
        var index = runStart
        while index != utf8.endIndex {
            let byte = utf8[index]
            if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                json += string[runStart..<index]
                appendEscape(of: byte, to: &json)
                index = utf8.index(after: index)
                runStart = index
            } else {
                index = utf8.index(after: index)
            }
        }
        json += string[runStart..<utf8.endIndex]
        json += "\""
    }

    private static func appendEscape(of byte: UInt8, to json: inout String) {
        switch byte {
        case UInt8(ascii: "\""): json += #"\""#
        case UInt8(ascii: "\\"): json += #"\\"#
        case UInt8(ascii: "\n"): json += #"\n"#
        case UInt8(ascii: "\r"): json += #"\r"#
        case UInt8(ascii: "\t"): json += #"\t"#
        case 0x08: json += #"\b"#
        case 0x0C: json += #"\f"#
        default:
            json += #"\u00"#
            json.unicodeScalars.append(hexDigits[Int(byte >> 4)])
            json.unicodeScalars.append(hexDigits[Int(byte & 0xF)])
        }
    }

    private static let hexDigits = Array("0123456789abcdef".unicodeScalars)
}
