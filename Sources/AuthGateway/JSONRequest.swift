import Foundation
import HTTPTypes
import Hummingbird

/// A JSON value as sent: the request reader checks types itself, so that `1` is not taken for
/// `true`, and every refusal names the member.
enum JSONValue: Decodable, Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode([String: JSONValue].self) {
            self = .object(value)
        } else {
            self = .array(try container.decode([JSONValue].self))
        }
    }

    var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// A request's JSON object body, read under the API's rules: at most 16 KiB (413),
/// `Content-Type: application/json` with any parameters (415), an object with only the listed
/// members, each of its type (400 `invalid_request` naming the member).
struct JSONRequest: Sendable {
    /// The largest body accepted.
    static let maxBodyBytes = 16 * 1024

    let members: [String: JSONValue]

    /// Reads the body of `request`. With `optional`, an empty body is an empty object.
    static func read(_ request: Request, allowed: Set<String>, optional: Bool = false) async throws -> JSONRequest {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > maxBodyBytes {
            throw APIError.payloadTooLarge
        }
        let body = request.body
        let buffer: ByteBuffer
        do {
            buffer = try await body.collect(upTo: maxBodyBytes)
        } catch {
            throw APIError.payloadTooLarge
        }
        if buffer.readableBytes == 0, optional, request.headers[.contentType] == nil {
            return JSONRequest(members: [:])
        }
        guard let contentType = request.headers[.contentType], isJSON(contentType) else {
            throw APIError.unsupportedMediaType
        }
        if buffer.readableBytes == 0, optional {
            return JSONRequest(members: [:])
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
        return mediaType.trimmingCharacters(in: .whitespaces).lowercased() == "application/json"
    }

    /// The string member `name`, nil when absent; any other type, or a string holding U+0000
    /// (which the services' protocol cannot carry), is a 400.
    func string(_ name: String) throws(APIError) -> String? {
        switch members[name] {
        case nil: return nil
        case .string(let value):
            guard !value.utf8.contains(0) else { throw APIError.invalidRequest("`\(name)` must not contain NUL (U+0000).") }
            return value
        case let other?: throw APIError.invalidRequest("`\(name)` must be a string, not \(other.typeName).")
        }
    }

    /// The string member `name`; absent is a 400.
    func requiredString(_ name: String) throws(APIError) -> String {
        guard let value = try string(name) else { throw APIError.invalidRequest("`\(name)` is required.") }
        return value
    }

    /// The boolean member `name`, nil when absent.
    func bool(_ name: String) throws(APIError) -> Bool? {
        switch members[name] {
        case nil: return nil
        case .bool(let value): return value
        case let other?: throw APIError.invalidRequest("`\(name)` must be a boolean, not \(other.typeName).")
        }
    }

    /// A member that may be absent (nil), null (`.some(nil)`) or a string.
    func nullableString(_ name: String) throws(APIError) -> String?? {
        switch members[name] {
        case nil: return nil
        case .null: return .some(nil)
        case .string: return .some(try string(name))
        case let other?: throw APIError.invalidRequest("`\(name)` must be a string or null, not \(other.typeName).")
        }
    }

    /// The enum member `name` (`purpose`, `scope`, `provider`): `fallback` when absent, a 400
    /// naming the allowed values otherwise.
    func choice<Value: RawRepresentable & CaseIterable>(_ name: String, default fallback: Value?) throws(APIError) -> Value
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
