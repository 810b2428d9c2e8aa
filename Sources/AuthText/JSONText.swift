/// JSON written by hand where `JSONEncoder` costs too much for what it writes (an access
/// token's claims, a JOSE header: on every sign-in and refresh).
public enum JSONText {
    /// Appends `string` as a JSON string as `JSONEncoder` writes it: quoted, `"` and `\` escaped,
    /// `\n`, `\r`, `\t`, `\b`, `\f`, other control characters as `\u00XX`, everything else (`/`
    /// and non-ASCII included) as it is.
    public static func appendString(_ string: String, to json: inout String) {
        json.unicodeScalars.append("\"")
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": json += #"\""#
            case "\\": json += #"\\"#
            case "\n": json += #"\n"#
            case "\r": json += #"\r"#
            case "\t": json += #"\t"#
            case "\u{08}": json += #"\b"#
            case "\u{0C}": json += #"\f"#
            case _ where scalar.value < 0x20:
                json += #"\u00"#
                json.unicodeScalars.append(hexDigits[Int(scalar.value >> 4)])
                json.unicodeScalars.append(hexDigits[Int(scalar.value & 0xF)])
            default: json.unicodeScalars.append(scalar)
            }
        }
        json.unicodeScalars.append("\"")
    }

    private static let hexDigits = Array("0123456789abcdef".unicodeScalars)
}
