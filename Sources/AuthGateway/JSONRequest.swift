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
    /// The deepest nesting of arrays and objects accepted.
    static let maxDepth = 64

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
        // Strict RFC 8259 (no trailing comma), nested at most maxDepth deep, in one pass.
        guard let value = buffer.withUnsafeReadableBytes({ try? JSONValue.parse($0, maxDepth: maxDepth) }) else {
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
