import AuthPostgres

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A row of `security_events`: something a security team wants to see. docs/session.md lists
/// the kinds and what their `details` hold.
struct SecurityEvent: Sendable {
    /// What happened.
    struct Kind: RawRepresentable, Hashable, Sendable {
        let rawValue: String

        /// A used refresh token came back after the grace window; the session was revoked.
        static let refreshTokenReused = Kind(rawValue: "refresh_token_reused")
        /// A refresh token of a revoked session was presented.
        static let refreshOfRevokedSession = Kind(rawValue: "refresh_of_revoked_session")
        /// A refresh token of an expired session (or an expired current token) was presented.
        static let refreshOfExpiredSession = Kind(rawValue: "refresh_of_expired_session")
        /// RotateSigningKey added a signing key.
        static let signingKeyRotated = Kind(rawValue: "signing_key_rotated")
        /// RewrapSigningKeys moved the stored signing keys to the current master key.
        static let signingKeysRewrapped = Kind(rawValue: "signing_keys_rewrapped")
        /// A caller that may not call an operators' method tried to.
        static let callerNotAllowed = Kind(rawValue: "caller_not_allowed")
    }

    /// A value in `details`.
    enum Detail: Encodable, Sendable, Equatable {
        case int(Int64)
        case double(Double)
        case string(String)
        case strings([String])

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .int(let value): try container.encode(value)
            case .double(let value): try container.encode(value)
            case .string(let value): try container.encode(value)
            case .strings(let value): try container.encode(value)
            }
        }
    }

    var kind: Kind
    var sessionID: UUID?
    /// Nil for events about no user (key management, refused callers).
    var userID: String?
    var occurredAt: Date
    var clientIP: String = ""
    var details: [String: Detail] = [:]

    /// `details` as JSON text (keys sorted); caller-supplied strings are escaped by the encoder.
    var detailsJSON: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(details)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// The statement that inserts the event into `schema`'s `security_events`.
    func insertStatement(schema: PostgresSchema) -> PostgresStatement {
        """
        INSERT INTO \(schema).security_events (session_id, user_id, kind, occurred_at, client_ip, details)
        VALUES (\(sessionID), \(userID)::text, \(kind.rawValue)::text, \(occurredAt), \(clientIP)::text,
            \(detailsJSON)::jsonb)
        """
    }

    /// Inserts the event on `connection` (inside the caller's transaction, if any).
    func insert(schema: PostgresSchema, connection: PostgresConnection) throws {
        try connection.execute(self.insertStatement(schema: schema))
    }
}
