#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// SQL text with its bound parameters.
///
/// Write it as a string literal with interpolations: every interpolated value becomes a bound
/// parameter (`$1`, `$2`, …), never SQL text, so values cannot inject SQL:
///
/// ```swift
/// let rows = try connection.execute("SELECT id FROM users WHERE email = \(email) AND active = \(true)")
/// ```
///
/// The only text interpolation is ``StringInterpolation/appendInterpolation(identifier:)``, which
/// double-quotes an identifier (for schema or table names chosen at run time). Do not mix
/// interpolated values with hand-written `$n` placeholders in one statement.
public struct PostgresStatement: Sendable, Hashable, ExpressibleByStringInterpolation {
    /// The SQL text, with `$1`, `$2`, … for the parameters.
    public var sql: String
    /// The parameters, in placeholder order.
    public var parameters: [PostgresValue]

    /// Creates a statement from SQL text with `$n` placeholders and its parameters.
    public init(_ sql: String, _ parameters: [PostgresValue] = []) {
        self.sql = sql
        self.parameters = parameters
    }

    public init(stringLiteral value: String) {
        self.init(value)
    }

    public init(stringInterpolation: StringInterpolation) {
        self.init(stringInterpolation.sql, stringInterpolation.parameters)
    }

    /// Builds a ``PostgresStatement`` from an interpolated string literal.
    public struct StringInterpolation: StringInterpolationProtocol {
        var sql = ""
        var parameters: [PostgresValue] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            self.sql.reserveCapacity(literalCapacity + interpolationCount * 3)
            self.parameters.reserveCapacity(interpolationCount)
        }

        public mutating func appendLiteral(_ literal: String) {
            self.sql += literal
        }

        /// Binds `value` as the next parameter.
        public mutating func appendInterpolation(_ value: some PostgresEncodable) {
            self.parameters.append(value.postgresValue)
            self.sql += "$\(self.parameters.count)"
        }

        /// Binds `value` as the next parameter, NULL when it is `nil`.
        public mutating func appendInterpolation(_ value: (some PostgresEncodable)?) {
            self.parameters.append(value?.postgresValue ?? .null)
            self.sql += "$\(self.parameters.count)"
        }

        /// Inserts `name` as a double-quoted SQL identifier (a schema, table or column name),
        /// doubling any double quote inside it. Use only for names, never for values.
        public mutating func appendInterpolation(identifier name: String) {
            self.sql += PostgresStatement.quotedIdentifier(name)
        }
    }
}

extension PostgresStatement {
    /// `name` (a schema, table, column or channel) as a double-quoted SQL identifier, any
    /// double quote inside it doubled: the one place the services' SQL quotes a name. Never
    /// for values (they are parameters).
    public static func quotedIdentifier(_ name: String) -> String {
        "\"" + name.replacing("\"", with: "\"\"") + "\""
    }
}

/// Whether `name` is a plain identifier: ASCII letters, digits and underscores, not starting
/// with a digit, at most 63 bytes (PostgreSQL's NAMEDATALEN - 1).
func isPlainIdentifier(_ name: String) -> Bool {
    let bytes = Array(name.utf8)
    guard let first = bytes.first, bytes.count <= 63 else { return false }
    func isLetter(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) || byte == UInt8(ascii: "_")
    }
    func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
    return isLetter(first) && bytes.allSatisfy { isLetter($0) || isDigit($0) }
}
