import AuthText
import Foundation
import Testing

/// `JSONStreamEncoder` writes the JSON `JSONEncoder` writes (the same values; members in the
/// order `encode(to:)` gives them, where `JSONEncoder` writes an object's in hash order), and
/// refuses what it does not write.
@Suite struct JSONStreamEncoderTests {
    struct Inner: Encodable, Equatable {
        var name: String
        var tags: [String]
    }

    /// Synthesized `encode(to:)`: optionals left out when nil (`encodeIfPresent`).
    struct Synthesized: Encodable {
        var text: String
        var flag: Bool
        var small: Int8
        var int: Int
        var large: Int64
        var unsigned: UInt64
        var optionalText: String?
        var inner: Inner
        var inners: [Inner]
        var empty: [Int]
        var nested: [[Int]]
        var map: [String: String]
        var optionalInner: Inner?
    }

    /// Written by hand: optionals written as null (`encode`), a constant member, a doubly optional.
    struct HandWritten: Encodable {
        var id: String
        var missing: String?
        var present: Int?
        var maybe: String??

        enum CodingKeys: String, CodingKey {
            case id, missing, present, constant, maybe
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(missing, forKey: .missing)
            try container.encode(present, forKey: .present)
            try container.encode("bearer", forKey: .constant)
            if let maybe { try container.encode(maybe, forKey: .maybe) }
        }
    }

    static func parsed(_ json: String) throws -> JSONValue {
        try JSONValue.parse(Array(json.utf8))
    }

    static func foundation(_ value: some Encodable) throws -> JSONValue {
        try JSONValue.parse(Array(JSONEncoder().encode(value)))
    }

    static let strings = [
        "", "plain / slash", "quote \" backslash \\", "zoë ✓ 🙂 e\u{301} \u{2028}\u{7F}",
        "\r\n\t\u{08}\u{0C}\u{00}\u{1F}",
    ]

    @Test(arguments: strings)
    func synthesizedValuesAreFoundations(text: String) throws {
        let value = Synthesized(
            text: text,
            flag: true,
            small: -128,
            int: -42,
            large: .min,
            unsigned: .max,
            optionalText: nil,
            inner: Inner(name: text, tags: [text, "b"]),
            inners: [Inner(name: "x", tags: []), Inner(name: "y", tags: ["z"])],
            empty: [],
            nested: [[1, 2], [], [3]],
            map: ["k/": text, "other": "v"],
            optionalInner: Inner(name: "o", tags: ["p"])
        )
        let json = try JSONStreamEncoder.encode(value)
        #expect(try Self.parsed(json) == (try Self.foundation(value)))
        // Declaration order, not hash order.
        #expect(json.hasPrefix(#"{"text":"#))
        #expect(json.hasSuffix(#","optionalInner":{"name":"o","tags":["p"]}}"#))
        #expect(!json.contains("optionalText"))
    }

    @Test func handWrittenMembersInTheirOrderWithNulls() throws {
        let doubleNil = HandWritten(id: "a/b", missing: nil, present: 7, maybe: .some(nil))
        #expect(
            try JSONStreamEncoder.encode(doubleNil)
                == #"{"id":"a/b","missing":null,"present":7,"constant":"bearer","maybe":null}"#
        )
        #expect(try Self.parsed(JSONStreamEncoder.encode(doubleNil)) == (try Self.foundation(doubleNil)))
        let left = HandWritten(id: "", missing: "m", present: nil, maybe: nil)
        #expect(try JSONStreamEncoder.encode(left) == #"{"id":"","missing":"m","present":null,"constant":"bearer"}"#)
        let given = HandWritten(id: "i", missing: nil, present: nil, maybe: "v")
        #expect(try JSONStreamEncoder.encode(given).hasSuffix(#""maybe":"v"}"#))
    }

    @Test(arguments: strings)
    func stringsAsJSONText(text: String) throws {
        var expected = ""
        JSONText.appendString(text, to: &expected)
        #expect(try JSONStreamEncoder.encode(text) == expected)
        #expect(try JSONStreamEncoder.encode([text]) == "[\(expected)]")
        var key = ""
        JSONText.appendString("key" + text, to: &key)
        #expect(try JSONStreamEncoder.encode(["key" + text: 1]) == "{\(key):1}")
    }

    @Test func topLevelScalarsAndArrays() throws {
        #expect(try JSONStreamEncoder.encode(true) == "true")
        #expect(try JSONStreamEncoder.encode(-7) == "-7")
        #expect(try JSONStreamEncoder.encode(UInt8(255)) == "255")
        #expect(try JSONStreamEncoder.encode([Int]()) == "[]")
        #expect(try JSONStreamEncoder.encode([String?.none, "x"]) == #"[null,"x"]"#)
        #expect(try JSONStreamEncoder.encode(String?.none) == "null")
        #expect(try JSONStreamEncoder.encode([[String: Int]()]) == "[{}]")
    }

    @Test(arguments: [0.5, -1.25, 1e-5, 1e300, 2.0, 123456789.125])
    func doublesRoundTrip(number: Double) throws {
        let json = try JSONStreamEncoder.encode(["n": number])
        let parsed = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Double]
        #expect(parsed?["n"] == number)
    }

    @Test func floatsAsTheirShortestText() throws {
        // Float's own shortest form, not that of the Double it widens to (0.10000000149011612).
        #expect(try JSONStreamEncoder.encode([Float(0.5), Float(0.1)]) == "[0.5,0.1]")
        #expect(try JSONStreamEncoder.encode(["f": Float(0.1)]) == #"{"f":0.1}"#)
    }

    struct NestedKeyed: Encodable {
        enum Keys: String, CodingKey { case outer, inner }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            var nested = container.nestedContainer(keyedBy: Keys.self, forKey: .outer)
            try nested.encode(1, forKey: .inner)
        }
    }

    struct NestedUnkeyed: Encodable {
        func encode(to encoder: any Encoder) throws {
            var container = encoder.unkeyedContainer()
            var nested = container.nestedUnkeyedContainer()
            try nested.encode(1)
        }
    }

    struct Silent: Encodable {
        func encode(to encoder: any Encoder) throws {}
    }

    struct TwoKinds: Encodable {
        enum Keys: String, CodingKey { case a }
        func encode(to encoder: any Encoder) throws {
            var object = encoder.container(keyedBy: Keys.self)
            try object.encode(1, forKey: .a)
            var array = encoder.unkeyedContainer()
            try array.encode(2)
        }
    }

    struct TwoScalars: Encodable {
        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(1)
            try container.encode(2)
        }
    }

    /// Two handles on one value's keyed container share its members (as a class hierarchy's
    /// `encode(to:)` may take them).
    struct TwoHandles: Encodable {
        enum Keys: String, CodingKey { case a, b }
        func encode(to encoder: any Encoder) throws {
            var first = encoder.container(keyedBy: Keys.self)
            try first.encode(1, forKey: .a)
            var second = encoder.container(keyedBy: Keys.self)
            try second.encode(2, forKey: .b)
        }
    }

    /// `encodeNil` called directly, on an object and on an array (an `Optional` member goes
    /// through its own single value container instead).
    struct ExplicitNulls: Encodable {
        enum Keys: String, CodingKey { case a, b }
        func encode(to encoder: any Encoder) throws {
            var object = encoder.container(keyedBy: Keys.self)
            try object.encodeNil(forKey: .a)
            try object.encode([ExplicitNullElements()], forKey: .b)
        }
    }

    struct ExplicitNullElements: Encodable {
        func encode(to encoder: any Encoder) throws {
            var array = encoder.unkeyedContainer()
            try array.encodeNil()
            try array.encode(false)
            try array.encodeNil()
            #expect(array.count == 3)
        }
    }

    @Test func explicitNulls() throws {
        #expect(try JSONStreamEncoder.encode(ExplicitNulls()) == #"{"a":null,"b":[[null,false,null]]}"#)
        #expect(try Self.parsed(JSONStreamEncoder.encode(ExplicitNulls())) == (try Self.foundation(ExplicitNulls())))
    }

    @Test func twoHandlesOnOneObject() throws {
        #expect(try JSONStreamEncoder.encode(TwoHandles()) == #"{"a":1,"b":2}"#)
    }

    @Test func refusesWhatItDoesNotWrite() {
        func reason(_ value: some Encodable) -> String? {
            do {
                _ = try JSONStreamEncoder.encode(value)
                return nil
            } catch let error as JSONStreamEncoder.Unsupported {
                return error.reason
            } catch {
                return "\(error)"
            }
        }
        #expect(reason(NestedKeyed()) == "nestedContainer(keyedBy:forKey:)")
        #expect(reason(NestedUnkeyed()) == "nestedUnkeyedContainer()")
        #expect(reason(Silent())?.hasSuffix("encoded no container") == true)
        #expect(reason([Silent()])?.hasSuffix("encoded no container") == true)
        #expect(reason(TwoKinds()) == "a value took a second container of another kind")
        #expect(reason(TwoScalars()) == "a single value container encoded twice")
        #expect(reason([Double.nan]) == "nan is not a JSON number")
        #expect(reason(["x": Double.infinity]) == "inf is not a JSON number")
    }
}
