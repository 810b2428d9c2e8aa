import AuthProtobuf
import AuthText
import HTTPTypes
import Hummingbird

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A request's JSON object body, read under the API's rules: at most 16 KiB (413),
/// `Content-Type: application/json` with any parameters (415), an object with only the listed
/// members, each of its type (400 `invalid_request` naming the member).
struct JSONRequest: Sendable {
    /// The largest body accepted.
    static let maxBodyBytes = 16 * 1024

    let members: [String: JSONValue]

    /// Reads the body of `request`. With `optional`, an empty body is an empty object.
    /// The request's body, at most ``maxBodyBytes`` (413 `payload_too_large` otherwise, from its
    /// `Content-Length` before anything is read): both doors' bodies.
    static func body(of request: Request) async throws(APIError) -> ByteBuffer {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > maxBodyBytes {
            throw APIError.payloadTooLarge
        }
        do {
            return try await request.body.collect(upTo: maxBodyBytes)
        } catch {
            throw APIError.payloadTooLarge
        }
    }

    static func read(_ request: Request, allowed: Set<String>, optional: Bool = false) async throws -> JSONRequest {
        let buffer = try await body(of: request)
        if buffer.readableBytes == 0, optional, request.headers[.contentType] == nil {
            return JSONRequest(members: [:])
        }
        guard let contentType = request.headers[.contentType], isJSON(contentType) else {
            throw APIError.unsupportedMediaType
        }
        if buffer.readableBytes == 0, optional {
            return JSONRequest(members: [:])
        }
        // Foundation's parsers accept a trailing comma (`{"a": 1,}`): the syntax is checked first.
        guard StrictJSONSyntax.isValid(Array(buffer.readableBytesView)) else {
            throw APIError.invalidRequest("the body is not valid JSON.")
        }
        let value: JSONValue
        do {
            value = try JSONDecoder().decode(JSONValue.self, from: Data(buffer: buffer))
        } catch {
            throw APIError.invalidRequest("the body is not valid JSON.")
        }
        guard case .object(let members) = value else {
            throw APIError.invalidRequest("the body must be a JSON object.")
        }
        if let unknown = members.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw APIError.invalidRequest("unknown member `\(unknown.prefix(64))`.")
        }
        return JSONRequest(members: members)
    }

    /// `application/json`, case-insensitively, with or without parameters (`; charset=utf-8`).
    static func isJSON(_ contentType: String) -> Bool {
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first ?? ""
        return mediaType.trimmingWhitespace().lowercased() == "application/json"
    }

    /// The string member `name`, nil when absent; any other type, or a string holding U+0000
    /// (which the services' protocol cannot carry), is a 400.
    func string(_ name: String) throws(APIError) -> String? {
        switch members[name] {
        case nil: return nil
        case .string(let value):
            guard !value.utf8.contains(0) else {
                throw APIError.invalidRequest("`\(name)` must not contain NUL (U+0000).")
            }
            return value
        case let other?: throw APIError.invalidRequest("`\(name)` must be a string, not \(other.kindName).")
        }
    }

    /// The string member `name`; absent is a 400.
    func requiredString(_ name: String) throws(APIError) -> String {
        guard let value = try string(name) else { throw APIError.invalidRequest("`\(name)` is required.") }
        return value
    }

    /// The boolean member `name`, nil when absent.
    /// Whether the body has the member `name` (with any value, null included).
    func has(_ name: String) -> Bool { members[name] != nil }

    func bool(_ name: String) throws(APIError) -> Bool? {
        switch members[name] {
        case nil: return nil
        case .bool(let value): return value
        case let other?: throw APIError.invalidRequest("`\(name)` must be a boolean, not \(other.kindName).")
        }
    }

    /// A member that may be absent (nil), null (`.some(nil)`) or a string.
    func nullableString(_ name: String) throws(APIError) -> String?? {
        switch members[name] {
        case nil: return nil
        case .null: return .some(nil)
        case .string: return .some(try string(name))
        case let other?: throw APIError.invalidRequest("`\(name)` must be a string or null, not \(other.kindName).")
        }
    }

    /// The enum member `name` (`purpose`, `scope`, `provider`): `fallback` when absent, a 400
    /// naming the allowed values otherwise.
    func choice<Value: RawRepresentable & CaseIterable>(
        _ name: String,
        default fallback: Value?
    ) throws(APIError) -> Value
    where Value.RawValue == String {
        let allowed = Value.allCases.map(\.rawValue).joined(separator: ", ")
        guard let text = try string(name) else {
            guard let fallback else { throw APIError.invalidRequest("`\(name)` is required (one of \(allowed)).") }
            return fallback
        }
        guard let value = Value(rawValue: text) else {
            throw APIError.invalidRequest("`\(name)` must be one of \(allowed).")
        }
        return value
    }
}

/// RFC 8259's grammar, checked over the bytes: what Foundation's JSON parsers let through (a
/// trailing comma in an object or array) is refused. Nesting deeper than `maxDepth` is refused too.
enum StrictJSONSyntax {
    static let maxDepth = 64

    static func isValid(_ bytes: [UInt8]) -> Bool {
        var index = 0
        skipWhitespace(bytes, &index)
        guard value(bytes, &index, depth: 0) else { return false }
        skipWhitespace(bytes, &index)
        return index == bytes.count
    }

    private static func skipWhitespace(_ bytes: [UInt8], _ index: inout Int) {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    private static func literal(_ bytes: [UInt8], _ index: inout Int, _ word: String) -> Bool {
        let expected = Array(word.utf8)
        guard bytes.count - index >= expected.count, Array(bytes[index..<index + expected.count]) == expected else {
            return false
        }
        index += expected.count
        return true
    }

    private static func value(_ bytes: [UInt8], _ index: inout Int, depth: Int) -> Bool {
        guard index < bytes.count, depth <= maxDepth else { return false }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            index += 1
            skipWhitespace(bytes, &index)
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return true
            }
            while true {
                skipWhitespace(bytes, &index)
                guard string(bytes, &index) else { return false }
                skipWhitespace(bytes, &index)
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return false }
                index += 1
                skipWhitespace(bytes, &index)
                guard value(bytes, &index, depth: depth + 1) else { return false }
                skipWhitespace(bytes, &index)
                guard index < bytes.count else { return false }
                if bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    return true
                }
                guard bytes[index] == UInt8(ascii: ",") else { return false }
                index += 1
            }
        case UInt8(ascii: "["):
            index += 1
            skipWhitespace(bytes, &index)
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return true
            }
            while true {
                skipWhitespace(bytes, &index)
                guard value(bytes, &index, depth: depth + 1) else { return false }
                skipWhitespace(bytes, &index)
                guard index < bytes.count else { return false }
                if bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    return true
                }
                guard bytes[index] == UInt8(ascii: ",") else { return false }
                index += 1
            }
        case UInt8(ascii: "\""):
            return string(bytes, &index)
        case UInt8(ascii: "t"): return literal(bytes, &index, "true")
        case UInt8(ascii: "f"): return literal(bytes, &index, "false")
        case UInt8(ascii: "n"): return literal(bytes, &index, "null")
        default:
            return number(bytes, &index)
        }
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    private static func isHex(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "f"))
    }

    private static func string(_ bytes: [UInt8], _ index: inout Int) -> Bool {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return false }
        index += 1
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""): return true
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { return false }
                let escape = bytes[index]
                index += 1
                if escape == UInt8(ascii: "u") {
                    guard bytes.count - index >= 4, bytes[index..<index + 4].allSatisfy(isHex) else { return false }
                    index += 4
                } else {
                    guard Array("\"\\/bfnrt".utf8).contains(escape) else { return false }
                }
            case 0..<0x20: return false
            default: continue
            }
        }
        return false
    }

    private static func number(_ bytes: [UInt8], _ index: inout Int) -> Bool {
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { return false }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { return false }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] | 0x20 == UInt8(ascii: "e") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard index < bytes.count, isDigit(bytes[index]) else { return false }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        return true
    }
}
