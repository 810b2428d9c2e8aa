/// RFC 8259 JSON read in one pass into a ``JSONValue``: what ``JSONValue/parse(_:maxDepth:)``
/// runs. Stricter than Foundation's parser, which lets a trailing comma through (`{"a": 1,}`);
/// otherwise the values are the ones Foundation's `JSONDecoder` gives ``JSONValue``: a number
/// that is exactly a 64-bit integer (`1.0`, `1e2` included) is `.integer` in its decimal
/// form, other finite numbers are `.number` (Swift's shortest text of the `Double`), whole ones
/// beyond 64 bits stay integers; a member named twice keeps its first value; a lone UTF-16
/// surrogate in a `\u` escape, invalid UTF-8, a number beyond `Double`'s range and nesting
/// deeper than `maxDepth` are errors.
///
/// The gateway reads every request body with it: one pass over the bytes and a few
/// allocations per member, where checking the syntax and then decoding with `JSONDecoder` took
/// about a third of the gateway's allocations per sign-in (docs/benchmarks.md).
struct JSONParser {
    struct Invalid: Error, Equatable {
        /// Where in the bytes the parser stopped.
        var offset: Int
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private let maxDepth: Int
    private let refusesRepeatedMembers: Bool
    private var index = 0

    private init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int, refusesRepeatedMembers: Bool) {
        self.bytes = bytes
        self.maxDepth = maxDepth
        self.refusesRepeatedMembers = refusesRepeatedMembers
    }

    /// With `refusesRepeatedMembers`, an object naming a member twice (after its escapes are
    /// undone: `"alg"` and `"al\u0067"` are one name) is an error instead of keeping the first.
    static func parse(
        _ bytes: UnsafeBufferPointer<UInt8>,
        maxDepth: Int,
        refusesRepeatedMembers: Bool = false
    ) throws(Invalid) -> JSONValue {
        var parser = JSONParser(bytes: bytes, maxDepth: maxDepth, refusesRepeatedMembers: refusesRepeatedMembers)
        parser.skipWhitespace()
        let value = try parser.value(depth: 0)
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw parser.invalid() }
        return value
    }

    private func invalid() -> Invalid { Invalid(offset: index) }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func value(depth: Int) throws(Invalid) -> JSONValue {
        guard index < bytes.count, depth <= maxDepth else { throw invalid() }
        switch bytes[index] {
        case UInt8(ascii: "{"): return .object(try object(depth: depth))
        case UInt8(ascii: "["): return .array(try array(depth: depth))
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        default: return try number()
        }
    }

    private mutating func literal(_ word: StaticString) throws(Invalid) {
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count else { throw invalid() }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { throw invalid() }
        index += count
    }

    private mutating func object(depth: Int) throws(Invalid) -> [String: JSONValue] {
        index += 1  // {
        var members: [String: JSONValue] = [:]
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return members
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw invalid() }
            let name = try string()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw invalid() }
            index += 1
            skipWhitespace()
            let start = index
            let member = try value(depth: depth + 1)
            if members[name] == nil {
                members[name] = member
            } else if refusesRepeatedMembers {
                throw Invalid(offset: start)
            }  // else the first of a repeated name stays, as Foundation's
            skipWhitespace()
            guard index < bytes.count else { throw invalid() }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return members
            }
            guard bytes[index] == UInt8(ascii: ",") else { throw invalid() }
            index += 1
        }
    }

    private mutating func array(depth: Int) throws(Invalid) -> [JSONValue] {
        index += 1  // [
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return elements
        }
        while true {
            skipWhitespace()
            elements.append(try value(depth: depth + 1))
            skipWhitespace()
            guard index < bytes.count else { throw invalid() }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return elements
            }
            guard bytes[index] == UInt8(ascii: ",") else { throw invalid() }
            index += 1
        }
    }

    /// A string from its opening quote: its text with the escapes undone.
    private mutating func string() throws(Invalid) -> String {
        index += 1  // "
        let start = index
        // The common case: no escape, so the text is the bytes themselves.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text = String(validating: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                guard let text else { throw invalid() }
                index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            guard byte >= 0x20 else { throw invalid() }
            index += 1
        }
        var utf8 = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(validating: utf8, as: UTF8.self) else { throw invalid() }
                return text
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { throw invalid() }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escape)
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"): utf8.append(contentsOf: try unicodeEscape())
                default: throw invalid()
                }
            case 0..<0x20:
                throw invalid()
            default:
                utf8.append(byte)
            }
        }
        throw invalid()
    }

    /// The scalar of `\uXXXX` (after its `\u`), a surrogate pair's two escapes together, as UTF-8.
    private mutating func unicodeEscape() throws(Invalid) -> [UInt8] {
        let first = try hex4()
        var scalarValue = UInt32(first)
        if (0xD800...0xDBFF).contains(first) {
            guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
            else { throw invalid() }
            index += 2
            let second = try hex4()
            guard (0xDC00...0xDFFF).contains(second) else { throw invalid() }
            scalarValue = 0x10000 + ((UInt32(first) - 0xD800) << 10) + (UInt32(second) - 0xDC00)
        } else if (0xDC00...0xDFFF).contains(first) {
            throw invalid()
        }
        guard let scalar = Unicode.Scalar(scalarValue) else { throw invalid() }
        return Array(String(Character(scalar)).utf8)
    }

    private mutating func hex4() throws(Invalid) -> UInt16 {
        guard bytes.count - index >= 4 else { throw invalid() }
        var value: UInt16 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw invalid()
            }
            value = value << 4 | UInt16(digit)
            index += 1
        }
        return value
    }

    private func isDigit(_ offset: Int) -> Bool {
        offset < bytes.count && bytes[offset] >= UInt8(ascii: "0") && bytes[offset] <= UInt8(ascii: "9")
    }

    private mutating func number() throws(Invalid) -> JSONValue {
        let start = index
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard isDigit(index) else { throw invalid() }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while isDigit(index) { index += 1 }
        }
        var whole = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            whole = false
            index += 1
            guard isDigit(index) else { throw invalid() }
            while isDigit(index) { index += 1 }
        }
        if index < bytes.count, bytes[index] | 0x20 == UInt8(ascii: "e") {
            whole = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard isDigit(index) else { throw invalid() }
            while isDigit(index) { index += 1 }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if whole {
            if let integer = Int64(text) { return .integer(String(integer)) }
            if let integer = UInt64(text) { return .integer(String(integer)) }
        }
        guard let number = Double(text), number.isFinite else { throw Invalid(offset: start) }
        return JSONValue(finite: number)
    }
}
