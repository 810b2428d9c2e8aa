import AuthRPC
import AuthText

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Collects the broken rules of one request's fields, each a ``RPCError/FieldViolation``
/// (field, reason, the text to show under it), so that a caller learns every broken field at
/// once. The rules every service shares are here; a service adds its own in an extension and
/// turns the violations into its error type with ``check(_:)``.
public struct FieldValidator: Sendable {
    public private(set) var violations: [RPCError.FieldViolation] = []

    public init() {}

    /// Whether no rule broke so far.
    public var isValid: Bool { violations.isEmpty }

    public mutating func fail(_ field: String, _ reason: String, _ description: String) {
        violations.append(RPCError.FieldViolation(field: field, reason: reason, description: description))
    }

    /// Throws `error(violations)` when a rule broke.
    public func check<Failure: Error>(_ error: ([RPCError.FieldViolation]) -> Failure) throws(Failure) {
        guard violations.isEmpty else { throw error(violations) }
    }

    /// The end user's IP a request names: its `client_ip` field, which must be an IPv4 or IPv6
    /// address (`invalid_value` otherwise), else the `end_user_ip` the gateway put in the call's
    /// metadata, dropped silently when it is not an address; empty when neither gives one.
    public mutating func clientIP(_ value: String, context: ServerContext?, field: String = "client_ip") -> String {
        if !value.isEmpty {
            guard IPAddress.isAddress(value) else {
                fail(field, "invalid_value", "An IPv4 or IPv6 address is expected.")
                return ""
            }
            return value
        }
        let fromMetadata = context?.metadata.endUserIP ?? ""
        return IPAddress.isAddress(fromMetadata) ? fromMetadata : ""
    }

    /// A UUID field in its 36-character form, named `name` in the descriptions ("a user id"):
    /// `required` when empty (unless optional, then nil), `invalid_value` when not a UUID.
    public mutating func uuid(_ value: String, field: String, name: String, required: Bool = true) -> UUID? {
        if value.isEmpty {
            if required { fail(field, "required", "\(name.prefix(1).uppercased() + name.dropFirst()) is required.") }
            return nil
        }
        guard value.utf8.count == 36, let id = UUID(uuidString: value) else {
            fail(field, "invalid_value", "\(name.prefix(1).uppercased() + name.dropFirst()) is a UUID.")
            return nil
        }
        return id
    }

    /// A locale (``LanguageTag``); empty means `en`.
    public mutating func locale(_ value: String, field: String = "locale") -> String {
        if value.isEmpty { return "en" }
        guard LanguageTag.isValid(value) else {
            fail(field, "invalid_value", "A BCP 47 language tag such as en or hi-IN.")
            return "en"
        }
        return value
    }
}
