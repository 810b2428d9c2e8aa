/// The one error type of ``AuthPostgres``.
///
/// A `PostgresError` never contains parameter values: ``description`` (what ends up in logs) holds
/// the code, the SQLSTATE, the names of the constraint/table/column involved and a message that
/// is either ours or the server's primary message. Server messages of SQLSTATE class 22 (data
/// exceptions) may quote the offending input, so for those ``description`` shows a generic text
/// and the raw text is only in ``serverMessage``, which must not be logged.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, in a form to switch on. Extensible: new codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Wrapped: String, Hashable, Sendable {
            case unavailable, connectionLost, queryFailed, serializationFailure, deadlock
            case uniqueViolation, foreignKeyViolation, checkViolation, notNullViolation
            case invalidData, decodingFailed, invalidArgument, timeout, cancelled, poolTimeout
            case closed, migrationFailed, staleStatement
        }

        private let wrapped: Wrapped
        private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

        public var description: String { self.wrapped.rawValue }

        /// The database could not be reached: connecting failed, the server is starting up or
        /// shutting down, or too many connections (SQLSTATE classes 08 and 53, 57P03). Safe to
        /// retry later; map it to UNAVAILABLE.
        public static let unavailable = Code(.unavailable)
        /// An established connection broke while in use (server restart, 57P01 admin_shutdown,
        /// socket error). The statement in flight may or may not have been committed.
        public static let connectionLost = Code(.connectionLost)
        /// The server rejected the statement for a reason without a more specific code.
        public static let queryFailed = Code(.queryFailed)
        /// SQLSTATE 40001: the transaction must be retried as a whole.
        public static let serializationFailure = Code(.serializationFailure)
        /// SQLSTATE 40P01: the transaction must be retried as a whole.
        public static let deadlock = Code(.deadlock)
        /// SQLSTATE 23505. ``PostgresError/constraint`` names the violated constraint.
        public static let uniqueViolation = Code(.uniqueViolation)
        /// SQLSTATE 23503.
        public static let foreignKeyViolation = Code(.foreignKeyViolation)
        /// SQLSTATE 23514.
        public static let checkViolation = Code(.checkViolation)
        /// SQLSTATE 23502.
        public static let notNullViolation = Code(.notNullViolation)
        /// A value the server refused (SQLSTATE class 22) or that cannot be sent (a text with a
        /// NUL character).
        public static let invalidData = Code(.invalidData)
        /// A column could not be read as the requested Swift type (type mismatch, unexpected
        /// NULL, unknown column name).
        public static let decodingFailed = Code(.decodingFailed)
        /// An argument that cannot be used, e.g. a channel or schema name that is not an identifier.
        public static let invalidArgument = Code(.invalidArgument)
        /// SQLSTATE 57014: the statement ran longer than the statement timeout.
        public static let timeout = Code(.timeout)
        /// The statement was cancelled because the calling task was cancelled.
        public static let cancelled = Code(.cancelled)
        /// No pooled connection became free within the pool's acquire timeout.
        public static let poolTimeout = Code(.poolTimeout)
        /// The pool was closed.
        public static let closed = Code(.closed)
        /// A migration could not be applied, or an applied migration was edited afterwards.
        public static let migrationFailed = Code(.migrationFailed)
        /// A statement this connection had prepared failed inside a transaction because a table
        /// changed under it (SQLSTATE 0A000, "cached plan must not change result type", e.g. a
        /// column's type changed by a newer replica's migration). The connection prepares the
        /// statement again at its next use; the transaction can be run again, and
        /// ``PostgresPool/transaction(isolation:maxAttempts:_:)`` does so (``PostgresError/isRetryable``).
        public static let staleStatement = Code(.staleStatement)
    }

    /// What went wrong.
    public var code: Code
    /// A message safe to log: ours, or the server's primary message (except for SQLSTATE class 22).
    public var message: String
    /// The five-character SQLSTATE, when the server reported one.
    public var sqlState: String?
    /// The server's primary message, verbatim. It may quote an input value: do not log it.
    public var serverMessage: String?
    /// The constraint involved (for integrity violations), as reported by the server.
    public var constraint: String?
    /// The schema of the object involved, as reported by the server.
    public var schema: String?
    /// The table involved, as reported by the server.
    public var table: String?
    /// The column involved, as reported by the server.
    public var column: String?

    /// Creates an error.
    public init(
        code: Code,
        message: String,
        sqlState: String? = nil,
        serverMessage: String? = nil,
        constraint: String? = nil,
        schema: String? = nil,
        table: String? = nil,
        column: String? = nil
    ) {
        self.code = code
        self.message = message
        self.sqlState = sqlState
        self.serverMessage = serverMessage
        self.constraint = constraint
        self.schema = schema
        self.table = table
        self.column = column
    }

    /// True when the whole transaction can safely be run again: serialization failure,
    /// deadlock, or a statement prepared before its table changed (``Code/staleStatement``).
    /// ``PostgresPool/transaction(isolation:maxAttempts:_:)`` retries these itself.
    public var isRetryable: Bool {
        self.code == .serializationFailure || self.code == .deadlock || self.code == .staleStatement
    }

    /// True when the database is (momentarily) unreachable: ``Code/unavailable`` or
    /// ``Code/connectionLost``. The RPC layer maps these to UNAVAILABLE.
    public var isUnavailable: Bool {
        self.code == .unavailable || self.code == .connectionLost
    }

    public var description: String {
        var parts = ["code: \(self.code)"]
        if let sqlState { parts.append("sqlState: \(sqlState)") }
        if let schema { parts.append("schema: \(schema)") }
        if let table { parts.append("table: \(table)") }
        if let column { parts.append("column: \(column)") }
        if let constraint { parts.append("constraint: \(constraint)") }
        return "PostgresError(\(parts.joined(separator: ", "))): \(self.message)"
    }
}

extension PostgresError {
    /// The code for a SQLSTATE reported by the server on an established connection.
    static func code(forSQLState sqlState: String) -> Code {
        switch sqlState {
        case "40001": return .serializationFailure
        case "40P01": return .deadlock
        case "23505": return .uniqueViolation
        case "23503": return .foreignKeyViolation
        case "23514": return .checkViolation
        case "23502": return .notNullViolation
        case "57014": return .timeout
        case "57P01", "57P02": return .connectionLost
        case "57P03": return .unavailable
        default: break
        }
        if sqlState.hasPrefix("08") { return .connectionLost }
        if sqlState.hasPrefix("53") { return .unavailable }
        if sqlState.hasPrefix("22") { return .invalidData }
        return .queryFailed
    }

    static func invalidArgument(_ message: String) -> PostgresError {
        PostgresError(code: .invalidArgument, message: message)
    }

    static func decodingFailed(_ message: String) -> PostgresError {
        PostgresError(code: .decodingFailed, message: message)
    }

    static let needsDirectConnection = PostgresError(
        code: .invalidArgument,
        message: "behind a transaction pooler, LISTEN and session-scoped work need directConnectionString "
            + "(a connection string that reaches PostgreSQL itself)"
    )

    static let poolClosed = PostgresError(code: .closed, message: "the connection pool is closed")
}
