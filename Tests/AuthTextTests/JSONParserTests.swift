import Foundation
import Testing

@testable import AuthText

/// `JSONValue.parse` (one pass, `JSONParser`) against Foundation's `JSONDecoder` decoding the
/// same bytes into `JSONValue` (its `Decodable` conformance, what `parse` ran before): the same
/// values for every valid document, and what Foundation let through that RFC 8259 does not
/// (a trailing comma) refused.
@Suite struct JSONParserTests {
    static func foundation(_ text: String) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
    }

    static func parsed(_ text: String, maxDepth: Int = 512) -> JSONValue? {
        try? JSONValue.parse(Array(text.utf8), maxDepth: maxDepth)
    }

    @Test(arguments: [
        // numbers: exact 64-bit integers however written, others as Double's text, whole ones beyond 64 bits
        "0", "-0", "-0.0", "1.0", "1e2", "1E2", "1.0e1", "100e-2", "1.5", "2.50", "0.1", "1e-2", "-12.75e3",
        "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
        "18446744073709551615", "18446744073709551616", "123456789012345678901234", "1e300", "-1e-300",
        // strings and their escapes
        #""""#, #""plain ascii""#, #""café ✓ 😀""#, #""\"\\\/\b\f\n\r\t""#, #""\u0041\u00e9\u2713""#,
        #""\ud83d\ude00""#, #""a\u0000b""#,
        // literals, containers, whitespace, nesting
        "true", "false", "null", "[]", "{}", " \t\r\n[ 1 , \"a\" , null ] \n",
        #"{"a": {"b": [1, {"c": [true, false, null]}]}, "d": "e"}"#,
        #"{"phone": "+919876543210", "purpose": "auto", "n": 3, "x": 2.5, "f": false}"#,
        #"{"a": 1, "a": 2}"#,  // a repeated member keeps its first value, as Foundation
        #"[[[[[[[[[[[[[[[[[[[["a"]]]]]]]]]]]]]]]]]]]]"#,
    ])
    func sameValuesAsFoundation(_ text: String) throws {
        let expected = try #require(Self.foundation(text), "Foundation refused \(text)")
        #expect(Self.parsed(text) == expected, "\(text)")
    }

    @Test(arguments: [
        // refused by both
        "", " ", "[", "{", "[1 2]", #"{"a" 1}"#, #"{a: 1}"#, "01", "1.", ".5", "-", "+1", "1e", "1e+", "0x10",
        "tru", "nul", "True", "NaN", "Infinity", "1E400", #""unterminated"#, "\"tab\there\"", #""\x41""#,
        #""\u12""#, #""\ud800""#, #""\udc00\ud800""#, #""\ud800\u0041""#, "[1] [2]", "{} x",
    ])
    func refusesWhatFoundationRefuses(_ text: String) {
        #expect(Self.foundation(text) == nil, "Foundation took \(text)")
        #expect(Self.parsed(text) == nil, "\(text)")
    }

    @Test(arguments: [#"{"a": 1,}"#, "[1, 2,]", #"{"a": [1,], "b": 2}"#])
    func refusesTrailingCommasFoundationTakes(_ text: String) {
        #expect(Self.foundation(text) != nil)
        #expect(Self.parsed(text) == nil, "\(text)")
    }

    @Test func refusingRepeatedMembers() throws {
        let once = #"{"alg":"ES256","jwk":{"x":1,"y":2},"a":[{"b":1},{"b":2}]}"#
        #expect(try JSONValue.parseRefusingRepeatedMembers(Array(once.utf8), maxDepth: 8) == Self.parsed(once))
        for twice in [
            #"{"alg":"ES256","alg":"none"}"#, #"{"alg":"ES256","al\u0067":"none"}"#,
            #"{"jwk":{"x":1,"x":1}}"#, #"[{"a":1,"a":2}]"#,
        ] {
            #expect(Self.parsed(twice) != nil, "\(twice)")
            #expect((try? JSONValue.parseRefusingRepeatedMembers(Array(twice.utf8), maxDepth: 8)) == nil, "\(twice)")
        }
    }

    @Test func refusesInvalidUTF8() {
        for bytes: [UInt8] in [
            [0x22, 0xFF, 0x22], [0x22, 0xC3, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22],
            [0x22, 0x5C, 0x6E, 0xC0, 0x80, 0x22],
        ] {
            #expect((try? JSONValue.parse(bytes)) == nil, "\(bytes)")
        }
    }

    @Test func nestingIsBoundedByMaxDepth() {
        let deep = { (levels: Int) in String(repeating: "[", count: levels) + String(repeating: "]", count: levels) }
        // The top value is depth 0: maxDepth 3 takes four nested arrays and refuses five.
        #expect(Self.parsed(deep(4), maxDepth: 3) != nil)
        #expect(Self.parsed(deep(5), maxDepth: 3) == nil)
        #expect(Self.parsed(#"{"a": {"b": {"c": {}}}}"#, maxDepth: 3) != nil)
        #expect(Self.parsed(#"{"a": {"b": {"c": {"d": 1}}}}"#, maxDepth: 3) == nil)
        // A hostile depth is refused, not a stack overflow.
        #expect(Self.parsed(deep(100_000)) == nil)
    }

    @Test("random documents: the same values as Foundation")
    func randomDocuments() throws {
        var generator = SystemRandomNumberGenerator()
        func document(_ depth: Int) -> String {
            let kind = Int.random(in: 0..<(depth > 3 ? 5 : 7), using: &generator)
            switch kind {
            case 0: return ["true", "false", "null"].randomElement(using: &generator)!
            case 1: return String(Int64.random(in: .min ... .max, using: &generator))
            case 2:
                let mantissa = Int.random(in: -99_999...99_999, using: &generator)
                return
                    "\(mantissa).\(Int.random(in: 0...999, using: &generator))e\(Int.random(in: -30...30, using: &generator))"
            case 3, 4:
                let pieces = [#"a"#, #"\n"#, #"\""#, #"\u00e9"#, "é", "😀", #"\ud83d\ude00"#, " ", #"\\"#, "z"]
                return "\""
                    + (0..<Int.random(in: 0...6, using: &generator)).map { _ in pieces.randomElement(using: &generator)!
                    }.joined() + "\""
            case 5:
                return "["
                    + (0..<Int.random(in: 0...4, using: &generator)).map { _ in document(depth + 1) }.joined(
                        separator: ", "
                    ) + "]"
            default:
                let members = (0..<Int.random(in: 0...4, using: &generator)).map { index in
                    "\"k\(index)\": " + document(depth + 1)
                }
                return "{" + members.joined(separator: ",") + "}"
            }
        }
        for _ in 0..<500 {
            let text = document(0)
            let expected = try #require(Self.foundation(text), "Foundation refused \(text)")
            #expect(Self.parsed(text) == expected, "\(text)")
        }
    }
}

/// The readers of members that JOSE headers, access-token claims and ID-token claims share.
@Suite struct JSONValueReaderTests {
    @Test func anArrayOfStringsOnly() throws {
        #expect(try JSONValue.parse(Array(#"["a", "b"]"#.utf8)).stringArrayValue == ["a", "b"])
        #expect(try JSONValue.parse(Array("[]".utf8)).stringArrayValue == [])
        #expect(try JSONValue.parse(Array(#"["a", 1]"#.utf8)).stringArrayValue == nil)
        #expect(try JSONValue.parse(Array(#"["a", null]"#.utf8)).stringArrayValue == nil)
        #expect(try JSONValue.parse(Array(#""a""#.utf8)).stringArrayValue == nil)
    }

    @Test func anOptionalMemberIsAbsentWhenNull() throws {
        guard case .object(let members) = try JSONValue.parse(Array(#"{"a": null, "b": "x", "c": 0}"#.utf8)) else {
            Issue.record("not an object")
            return
        }
        #expect(members["a"].presentValue == nil)
        #expect(members["missing"].presentValue == nil)
        #expect(members["b"].presentValue == .string("x"))
        #expect(members["c"].presentValue == .integer("0"))
    }
}
