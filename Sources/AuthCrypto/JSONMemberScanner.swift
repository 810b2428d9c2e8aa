/// A strict, minimal JSON reader that returns the member names of a top-level object.
///
/// It exists for one check Foundation's `JSONDecoder` does not make: a JOSE header with the same
/// member twice (`{"alg":"ES256","alg":"none"}`). `JSONDecoder` silently keeps the first, other
/// parsers keep the last, and RFC 7515 §4 requires rejecting such headers or keeping the last.
/// AuthCrypto rejects them, so no two layers can read different values from one token.
enum JSONMemberScanner {
    /// The decoded names of the members of the top-level object in `json`, in order (duplicates
    /// included), or `nil` unless `json` is exactly one JSON object (RFC 8259; surrounding
    /// whitespace allowed, no byte-order mark, nesting at most 32 deep).
    static func topLevelMemberNames(_ json: [UInt8]) -> [String]? {
        var reader = Reader(bytes: json)
        reader.skipWhitespace()
        guard reader.peek() == UInt8(ascii: "{") else { return nil }
        var names: [String] = []
        guard reader.readObject(depth: 1, names: &names) else { return nil }
        reader.skipWhitespace()
        guard reader.isAtEnd else { return nil }
        return names
    }

    private struct Reader {
        let bytes: [UInt8]
        var index = 0

        static let maximumDepth = 32

        init(bytes: [UInt8]) {
            self.bytes = bytes
        }

        var isAtEnd: Bool { self.index >= self.bytes.count }

        func peek() -> UInt8? {
            self.index < self.bytes.count ? self.bytes[self.index] : nil
        }

        mutating func next() -> UInt8? {
            guard let byte = self.peek() else { return nil }
            self.index += 1
            return byte
        }

        mutating func skipWhitespace() {
            while let byte = self.peek(), byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D {
                self.index += 1
            }
        }

        mutating func expect(_ character: Unicode.Scalar) -> Bool {
            guard self.peek() == UInt8(ascii: character) else { return false }
            self.index += 1
            return true
        }

        mutating func readValue(depth: Int) -> Bool {
            self.skipWhitespace()
            guard let byte = self.peek() else { return false }
            switch byte {
            case UInt8(ascii: "{"):
                var ignored: [String] = []
                return self.readObject(depth: depth + 1, names: &ignored)
            case UInt8(ascii: "["):
                return self.readArray(depth: depth + 1)
            case UInt8(ascii: "\""):
                return self.readString() != nil
            case UInt8(ascii: "t"):
                return self.readLiteral("true")
            case UInt8(ascii: "f"):
                return self.readLiteral("false")
            case UInt8(ascii: "n"):
                return self.readLiteral("null")
            default:
                return self.readNumber()
            }
        }

        /// Reads `{ ... }` starting at `{`, appending the member names it finds at this level.
        mutating func readObject(depth: Int, names: inout [String]) -> Bool {
            guard depth <= Self.maximumDepth, self.expect("{") else { return false }
            self.skipWhitespace()
            if self.expect("}") { return true }
            while true {
                self.skipWhitespace()
                guard let name = self.readString() else { return false }
                names.append(name)
                self.skipWhitespace()
                guard self.expect(":"), self.readValue(depth: depth) else { return false }
                self.skipWhitespace()
                if self.expect("}") { return true }
                guard self.expect(",") else { return false }
            }
        }

        mutating func readArray(depth: Int) -> Bool {
            guard depth <= Self.maximumDepth, self.expect("[") else { return false }
            self.skipWhitespace()
            if self.expect("]") { return true }
            while true {
                guard self.readValue(depth: depth) else { return false }
                self.skipWhitespace()
                if self.expect("]") { return true }
                guard self.expect(",") else { return false }
            }
        }

        mutating func readLiteral(_ literal: String) -> Bool {
            let expected = literal.utf8
            guard self.index + expected.count <= self.bytes.count,
                self.bytes[self.index..<(self.index + expected.count)].elementsEqual(expected)
            else { return false }
            self.index += expected.count
            return true
        }

        /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
        mutating func readNumber() -> Bool {
            _ = self.expect("-")
            guard let first = self.next(), Self.isDigit(first) else { return false }
            if first != UInt8(ascii: "0") { self.skipDigits() }
            if self.expect(".") {
                guard let digit = self.peek(), Self.isDigit(digit) else { return false }
                self.skipDigits()
            }
            if self.expect("e") || self.expect("E") {
                if !self.expect("+") { _ = self.expect("-") }
                guard let digit = self.peek(), Self.isDigit(digit) else { return false }
                self.skipDigits()
            }
            return true
        }

        mutating func skipDigits() {
            while let byte = self.peek(), Self.isDigit(byte) { self.index += 1 }
        }

        static func isDigit(_ byte: UInt8) -> Bool {
            byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
        }

        /// Reads a string starting at `"` and returns it with escapes decoded; `nil` on raw
        /// control characters, bad escapes, unpaired surrogates or invalid UTF-8.
        mutating func readString() -> String? {
            guard self.expect("\"") else { return nil }
            var scalars = String.UnicodeScalarView()
            var raw: [UInt8] = []
            func flushRaw() -> Bool {
                guard !raw.isEmpty else { return true }
                guard let text = String(validating: raw, as: UTF8.self) else { return false }
                scalars.append(contentsOf: text.unicodeScalars)
                raw.removeAll(keepingCapacity: true)
                return true
            }
            while let byte = self.next() {
                switch byte {
                case UInt8(ascii: "\""):
                    return flushRaw() ? String(scalars) : nil
                case UInt8(ascii: "\\"):
                    guard flushRaw(), let escaped = self.next() else { return nil }
                    switch escaped {
                    case UInt8(ascii: "\""): scalars.append("\"")
                    case UInt8(ascii: "\\"): scalars.append("\\")
                    case UInt8(ascii: "/"): scalars.append("/")
                    case UInt8(ascii: "b"): scalars.append("\u{08}")
                    case UInt8(ascii: "f"): scalars.append("\u{0C}")
                    case UInt8(ascii: "n"): scalars.append("\n")
                    case UInt8(ascii: "r"): scalars.append("\r")
                    case UInt8(ascii: "t"): scalars.append("\t")
                    case UInt8(ascii: "u"):
                        guard let scalar = self.readUnicodeEscape() else { return nil }
                        scalars.append(scalar)
                    default:
                        return nil
                    }
                case 0x00..<0x20:
                    return nil
                default:
                    raw.append(byte)
                }
            }
            return nil
        }

        /// After `\u`: four hex digits, or a surrogate pair written as two escapes.
        mutating func readUnicodeEscape() -> Unicode.Scalar? {
            guard let high = self.readHex4() else { return nil }
            if (0xD800..<0xDC00).contains(high) {
                guard self.expect("\\"), self.expect("u"), let low = self.readHex4(), (0xDC00..<0xE000).contains(low)
                else {
                    return nil
                }
                return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
            }
            return Unicode.Scalar(high)  // nil for a lone low surrogate
        }

        mutating func readHex4() -> UInt32? {
            var value: UInt32 = 0
            for _ in 0..<4 {
                guard let byte = self.next() else { return nil }
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt32(digit)
            }
            return value
        }
    }
}
