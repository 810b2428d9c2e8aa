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
/// Three interpolations add SQL text instead: a ``PostgresSchema`` (the service's schema, quoted
/// once), ``StringInterpolation/appendInterpolation(identifier:)`` (a name chosen at run time,
/// double-quoted) and a parameter-free ``PostgresStatement`` fragment (a column list written
/// once and used by several statements). Do not mix interpolated values with hand-written `$n`
/// placeholders in one statement.
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
        public mutating func appendInterpolation<Value: PostgresEncodable>(_ value: Value?) {
            self.parameters.append(value?.postgresValue ?? .null)
            self.sql += "$\(self.parameters.count)"
        }

        /// Inserts `name` as a double-quoted SQL identifier (a schema, table or column name),
        /// doubling any double quote inside it. Use only for names, never for values.
        public mutating func appendInterpolation(identifier name: String) {
            self.sql += PostgresStatement.quotedIdentifier(name)
        }

        /// Inserts the schema's quoted name: `"\(schema).users"` names the table `users` in it.
        public mutating func appendInterpolation(_ schema: PostgresSchema) {
            self.sql += schema.quotedName
        }

        /// Inserts the SQL of `fragment` (itself built by interpolation) and binds its
        /// parameters after this statement's own, its placeholders renumbered to match.
        public mutating func appendInterpolation(_ fragment: PostgresStatement) {
            guard !fragment.parameters.isEmpty else {
                self.sql += fragment.sql
                return
            }
            self.sql += PostgresStatement.renumberingPlaceholders(of: fragment.sql, by: self.parameters.count)
            self.parameters += fragment.parameters
        }
    }
}

/// The schema a service's tables live in, quoted once: interpolate it into a
/// ``PostgresStatement`` to name a table (`"SELECT … FROM \(schema).users"`).
public struct PostgresSchema: Sendable, Hashable, CustomStringConvertible {
    /// The schema's name as configured (`identity`, `otp`, `session`, or a test's own).
    public let name: String
    /// `name` as a double-quoted identifier.
    public let quotedName: String

    public init(_ name: String) {
        self.name = name
        self.quotedName = PostgresStatement.quotedIdentifier(name)
    }

    public var description: String { self.name }
}

extension PostgresStatement {
    /// `sql` with each placeholder `$n` made `$(n + offset)`. A fragment's text comes from
    /// interpolation, so a `$` followed by a digit in it is a placeholder.
    static func renumberingPlaceholders(of sql: String, by offset: Int) -> String {
        var result = ""
        result.reserveCapacity(sql.utf8.count + 8)
        var digits = ""
        var afterDollar = false
        func flush() {
            if !digits.isEmpty { result += String(Int(digits)! + offset) }
            digits = ""
            afterDollar = false
        }
        for character in sql {
            if afterDollar, character.isASCII, character.isNumber {
                digits.append(character)
                continue
            }
            flush()
            result.append(character)
            afterDollar = character == "$"
        }
        flush()
        return result
    }

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
