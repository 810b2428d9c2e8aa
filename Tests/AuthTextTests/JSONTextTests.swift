import AuthText
import Foundation
import Testing

/// `JSONText.appendString` writes what `JSONEncoder` (`.withoutEscapingSlashes`) writes for a
/// string: the access token's claims, the JOSE header and otp-dispatch's webhook body rely on it.
@Suite struct JSONTextTests {
    static func encodedByFoundation(_ string: String) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return String(decoding: try encoder.encode(string), as: UTF8.self)
    }

    static func written(_ string: String) -> String {
        var json = ""
        JSONText.appendString(string, to: &json)
        return json
    }

    @Test(arguments: [
        "",
        "plain ASCII with / slashes / and spaces",
        "\"",
        "\\",
        "a\"b\\c\"",
        "\"leading and trailing\\",
        "zoë ✓ 🙂 e\u{301} \u{2028}\u{2029} \u{7F} \u{FEFF}",
        "Olá \"Zoë\"\r\n\ttab\u{08}\u{0C}",
        String((0..<0x20).map { Character(Unicode.Scalar(UInt8($0))) }),
        "🙂\"🙂\\🙂\n🙂",
    ])
    func sameAsJSONEncoder(string: String) throws {
        #expect(Self.written(string) == (try Self.encodedByFoundation(string)))
    }

    @Test func appendsToWhatIsThere() {
        var json = #"{"a":"#
        JSONText.appendString("b\"", to: &json)
        #expect(json == #"{"a":"b\"""#)
    }
}
