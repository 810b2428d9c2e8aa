#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A parsed JSON value, numbers kept as their text so 64-bit integers lose nothing. Also the
/// gateway's reading of request bodies, which checks each member's type itself.
public enum JSONValue: Decodable, Sendable, Equatable {
    case null
    case bool(Bool)
    /// A number written without fraction or exponent.
    case integer(String)
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let flag = try? container.decode(Bool.self) {
            self = .bool(flag)
        } else if let number = try? container.decode(Int64.self) {
            self = .integer(String(number))
        } else if let number = try? container.decode(UInt64.self) {
            self = .integer(String(number))
        } else if let number = try? container.decode(Double.self) {
            self = Self(finite: number)
        } else if let text = try? container.decode(String.self) {
            self = .string(text)
        } else if let elements = try? container.decode([JSONValue].self) {
            self = .array(elements)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// A finite number that is not written as a 64-bit integer (`1.0`, `1e2`, `2e19`, `0.5`): whole
    /// numbers in 64-bit range are `.integer`, whole numbers beyond it too, with their exact
    /// digits (they then fail every range check), others `.number` with Swift's shortest text.
    init(finite number: Double) {
        if let integer = Int64(exactly: number) {
            self = .integer(String(integer))
        } else if let integer = UInt64(exactly: number) {
            self = .integer(String(integer))
        } else if number == number.rounded() && abs(number) >= 9.2e18 {
            self = .integer(Self.wholeNumberText(number))
        } else {
            self = .number(String(number))
        }
    }

    /// The exact decimal digits of a whole, finite `number` (what printf's `%.0f` writes).
    public static func wholeNumberText(_ number: Double) -> String {
        if let exact = Int64(exactly: number) { return String(exact) }
        if let exact = UInt64(exactly: number) { return number < 0 ? "-\(exact)" : String(exact) }
        // |number| = significand × 2^shift with shift > 0 here: double a base-10^9 number shift times.
        var limbs: [UInt64] = [number.significandBitPattern | (1 << 52)]
        limbs = [limbs[0] % 1_000_000_000, limbs[0] / 1_000_000_000]
        for _ in 0..<(Int(number.exponent) - 52) {
            var carry: UInt64 = 0
            for index in limbs.indices {
                let doubled = limbs[index] * 2 + carry
                limbs[index] = doubled % 1_000_000_000
                carry = doubled / 1_000_000_000
            }
            if carry > 0 { limbs.append(carry) }
        }
        while limbs.count > 1, limbs.last == 0 { limbs.removeLast() }
        var text = number < 0 ? "-" : ""
        text += String(limbs.removeLast())
        for limb in limbs.reversed() {
            let digits = String(limb)
            text += String(repeating: "0", count: 9 - digits.count) + digits
        }
        return text
    }

    /// The text of a string, else nil.
    public var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// The texts of an array that holds only strings (`[]` included), else nil.
    public var stringArrayValue: [String]? {
        guard case .array(let elements) = self else { return nil }
        var texts: [String] = []
        texts.reserveCapacity(elements.count)
        for element in elements {
            guard case .string(let text) = element else { return nil }
            texts.append(text)
        }
        return texts
    }

    /// A number's value as a finite `Double`, else nil (booleans are not numbers).
    public var numberValue: Double? {
        switch self {
        case .integer(let text), .number(let text): Double(text).flatMap { $0.isFinite ? $0 : nil }
        default: nil
        }
    }

    /// Reads a JSON document (RFC 8259, any value at the top), e.g. a JWT's claims.
    /// Strict (``JSONParser``: no trailing comma); nesting deeper than `maxDepth` is refused.
    public static func parse(_ bytes: [UInt8], maxDepth: Int = 512) throws -> JSONValue {
        try bytes.withUnsafeBufferPointer { buffer in try JSONParser.parse(buffer, maxDepth: maxDepth) }
    }

    /// ``parse(_:maxDepth:)`` refusing any object that names a member twice (a JOSE header,
    /// RFC 7515 §4).
    public static func parseRefusingRepeatedMembers(_ bytes: [UInt8], maxDepth: Int) throws -> JSONValue {
        try bytes.withUnsafeBufferPointer { buffer in
            try JSONParser.parse(buffer, maxDepth: maxDepth, refusesRepeatedMembers: true)
        }
    }

    /// ``parse(_:maxDepth:)`` over bytes in place (a request body's buffer).
    public static func parse(_ bytes: UnsafeRawBufferPointer, maxDepth: Int = 512) throws -> JSONValue {
        try JSONParser.parse(bytes.assumingMemoryBound(to: UInt8.self), maxDepth: maxDepth)
    }

    /// "a string", "a number", …: for messages naming what was sent.
    public var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .integer, .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

extension Optional where Wrapped == JSONValue {
    /// An optional member read as the value it holds: nil when the member is absent or `null`.
    public var presentValue: JSONValue? {
        if case .null? = self { return nil }
        return self
    }
}
