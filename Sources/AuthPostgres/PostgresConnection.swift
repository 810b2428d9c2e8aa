import AuthText
import CLibPQ
import Logging
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// One libpq connection (`PGconn`), owned by this object and closed in `deinit`.
///
/// A connection is **not** thread-safe: use it from one thread at a time. All its calls block the
/// calling thread on network I/O, so never call them on a NIO event loop or in Swift's
/// cooperative pool; ``PostgresPool/withConnection(_:)`` runs your code on a dedicated thread.
///
/// Statements are prepared once per connection (`PQprepare`) and cached by SQL text and
/// parameter types; later executions only bind parameters (`PQexecPrepared`). Behind a
/// transaction pooler (``PostgresPooler/transaction``) nothing is prepared: each statement is
/// sent unnamed with its parameters (`PQexecParams`). Results are requested in binary format and
/// copied into a ``PostgresRows``.
public final class PostgresConnection {
    private var handle: OpaquePointer?
    private let logger: Logger
    private let maxPreparedStatements: Int
    /// False behind a transaction pooler: statements run unnamed, nothing is cached.
    private let preparesStatements: Bool
    private var preparedStatements: [StatementKey: String] = [:]
    private var nextStatementNumber = 0
    private var broken = false
    /// Where ``transaction(isolation:_:)``'s body stands.
    private var transactionBody = TransactionBody.none
    /// Statements of the body waiting to travel with the next one (``executeWithNext(_:_:)``).
    private var queued: [PipelinedStatement] = []
    /// Round trips to the server so far (tests count them).
    private(set) var roundTrips = 0
    /// While set, each statement's text is appended (the pool's trace span lists them).
    var statementLog: PostgresStatementLog?
    let cancelHandle: PostgresCancelHandle

    private enum TransactionBody {
        /// Not inside a transaction's body.
        case none
        /// No statement ran yet: this `BEGIN` goes with the first one, in one round trip.
        case beginPending(String)
        /// The `BEGIN` was sent.
        case open
        /// ``executeAndCommit(_:_:)`` ended the transaction.
        case committed
    }

    private struct StatementKey: Hashable {
        var sql: String
        var types: [UInt32]
    }

    /// One statement of a pipeline (``executePipelined(_:handle:)``).
    private struct PipelinedStatement {
        var sql: String
        /// Its prepared statement's name; nil: sent unnamed with its text.
        var preparedName: String?
        var parameters: EncodedParameters
        /// Its rows are the pipeline's answer (the statement a caller executes, not one that
        /// travels with it).
        var answers = false
        /// A `COMMIT`: its command tag says whether the transaction committed.
        var isCommit = false

        /// A statement without parameters (`BEGIN`, `COMMIT`), sent unnamed.
        static func text(_ sql: String, isCommit: Bool = false) -> PipelinedStatement {
            PipelinedStatement(sql: sql, preparedName: nil, parameters: EncodedParameters(), isCommit: isCommit)
        }
    }

    private init(handle: OpaquePointer, logger: Logger, maxPreparedStatements: Int, preparesStatements: Bool) {
        self.handle = handle
        self.logger = logger
        self.maxPreparedStatements = max(1, maxPreparedStatements)
        self.preparesStatements = preparesStatements
        self.cancelHandle = PostgresCancelHandle(connection: handle)
    }

    deinit {
        if let handle { PQfinish(handle) }
    }

    /// Opens a connection (blocking) and applies the configuration's session settings
    /// (`statement_timeout`, `search_path`), except behind a transaction pooler, where a session
    /// setting would stay on whichever server connection ran it.
    ///
    /// - Throws: ``PostgresError/Code/unavailable`` when the server cannot be reached or refuses
    ///   the connection.
    public static func connect(
        configuration: PostgresConfiguration,
        logger: Logger
    ) throws(PostgresError) -> PostgresConnection {
        let connectTimeoutSeconds = max(2, Int((configuration.connectTimeout.seconds).rounded(.up)))
        // The connection string comes first (expand_dbname = 1) so that the settings below,
        // which the configuration owns, override it.
        var parameters: [(String, String)] = [
            ("dbname", configuration.connectionString),
            ("connect_timeout", String(connectTimeoutSeconds)),
            ("client_encoding", "UTF8"),
            // A peer that vanishes without closing the socket is noticed in ~20 s, not never.
            ("keepalives", "1"),
            ("keepalives_idle", "10"),
            ("keepalives_interval", "3"),
            ("keepalives_count", "3"),
        ]
        if let name = configuration.applicationName {
            parameters.append(("application_name", name))
        }
        let pointer = withCStringArray(parameters.map(\.0)) { keywords in
            withCStringArray(parameters.map(\.1)) { values in
                PQconnectdbParams(keywords, values, 1)
            }
        }
        guard let pointer else {
            throw PostgresError(code: .unavailable, message: "libpq could not allocate a connection")
        }
        guard PQstatus(pointer) == CONNECTION_OK else {
            let message = errorMessage(of: pointer) ?? "connection failed"
            PQfinish(pointer)
            throw PostgresError(code: .unavailable, message: message)
        }
        let pooled = configuration.pooler == .transaction
        let connection = PostgresConnection(
            handle: pointer,
            logger: logger,
            maxPreparedStatements: configuration.maxPreparedStatements,
            preparesStatements: !pooled
        )
        connection.installNoticeReceiver()

        var setup: [String] = []
        if pooled {
            // Nothing to set: see PostgresPooler.transaction.
        } else {
            if let timeout = configuration.statementTimeout {
                setup.append("SET statement_timeout = \(timeout.wholeMillisecondsRoundedUp)")
            }
            if !configuration.searchPath.isEmpty {
                setup.append(
                    "SET search_path TO "
                        + configuration.searchPath.map(PostgresStatement.quotedIdentifier).joined(separator: ", ")
                )
            }
        }
        if !setup.isEmpty {
            do {
                try connection.executeScript(setup.joined(separator: "; "))
            } catch {
                connection.close()
                throw error.code == .connectionLost ? PostgresError(code: .unavailable, message: error.message) : error
            }
        }
        logger.debug(
            "connected to PostgreSQL",
            metadata: ["postgres.backend_pid": "\(connection.backendPID)"]
        )
        return connection
    }

    // MARK: State

    /// Whether the connection is known to be unusable (closed, or broken by a connection-level
    /// failure). A broken connection is never repaired: open a new one.
    public var isBroken: Bool {
        guard let handle else { return true }
        return self.broken || PQstatus(handle) != CONNECTION_OK
    }

    /// Marks the connection unusable so that the pool closes it instead of reusing it (the
    /// server then drops whatever session state it held: advisory locks, settings).
    func discard() {
        self.broken = true
    }

    /// The server process id serving this connection (`pg_backend_pid()`), 0 when closed.
    public var backendPID: Int32 {
        self.handle.map(PQbackendPID) ?? 0
    }

    /// The number of statements prepared and cached on this connection.
    public var preparedStatementCount: Int { self.preparedStatements.count }

    /// The connection's transaction state as last reported by the server.
    public var transactionStatus: PostgresTransactionStatus {
        guard let handle else { return .unknown }
        switch PQtransactionStatus(handle) {
        case PQTRANS_IDLE: return .idle
        case PQTRANS_ACTIVE: return .active
        case PQTRANS_INTRANS: return .inTransaction
        case PQTRANS_INERROR: return .failedTransaction
        default: return .unknown
        }
    }

    /// Closes the connection now. Later calls throw ``PostgresError/Code/closed``.
    public func close() {
        guard let handle else { return }
        self.handle = nil
        self.preparedStatements.removeAll()
        PQfinish(handle)
    }

    // MARK: Executing

    /// Executes a statement built with string interpolation (values become bound parameters).
    @discardableResult
    public func execute(_ statement: PostgresStatement) throws(PostgresError) -> PostgresRows {
        try self.execute(statement.sql, statement.parameters)
    }

    /// Executes `sql` with `$1`, `$2`, … bound to `parameters`, preparing it on first use.
    ///
    /// - Throws: ``PostgresError``; a connection-level failure marks the connection broken.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [PostgresValue]) throws(PostgresError) -> PostgresRows {
        let handle = try self.usableHandle()
        self.statementLog?.append(sql)
        if case .committed = self.transactionBody { throw Self.statementAfterCommit }
        let encoded = try EncodedParameters(parameters)
        let name = try self.statementName(sql: sql, types: encoded.types, handle: handle)
        let waiting = self.takeWaitingStatements()
        if !waiting.isEmpty {
            let statement = PipelinedStatement(sql: sql, preparedName: name, parameters: encoded, answers: true)
            return try self.executePipelined(waiting + [statement], handle: handle)
        }
        guard let name else { return try self.executeUnnamed(sql: sql, encoded, handle: handle) }
        do {
            return try self.executePrepared(name: name, encoded, handle: handle)
        } catch let error where error.sqlState == "0A000" {
            // "cached plan must not change result type": the table changed under a cached
            // statement. Prepare it afresh, once, when not inside a transaction.
            guard self.transactionStatus == .idle else {
                throw self.staleStatement(error, sql: sql, types: encoded.types)
            }
            self.forgetPreparedStatement(sql: sql, types: encoded.types, name: name)
            let name = try self.preparedStatementName(sql: sql, types: encoded.types, handle: handle)
            return try self.executePrepared(name: name, encoded, handle: handle)
        }
    }

    /// ``executeWithNext(_:_:)`` for a statement built with string interpolation.
    public func executeWithNext(_ statement: PostgresStatement) throws(PostgresError) {
        try self.executeWithNext(statement.sql, statement.parameters)
    }

    /// Sends `sql` with the transaction's next statement, in that statement's round trip
    /// (libpq's pipeline mode), instead of in a round trip of its own: for a statement whose
    /// answer is only success or failure and that the next one must follow, such as taking an
    /// advisory lock before reading what it guards. The server runs it first, as a statement of
    /// its own: the next statement still takes its snapshot after it has finished. Its rows are
    /// dropped. Its error is thrown by the call that sends it: the body's next ``execute(_:_:)``,
    /// ``executeAndCommit(_:_:)`` or ``executeScript(_:)``, or, when the body runs no statement
    /// after it, ``transaction(isolation:_:)`` at the `COMMIT`.
    ///
    /// - Throws: ``PostgresError/Code/invalidArgument`` outside a transaction's body (there every
    ///   statement commits on its own, so none can wait for the next).
    public func executeWithNext(_ sql: String, _ parameters: [PostgresValue]) throws(PostgresError) {
        let handle = try self.usableHandle()
        switch self.transactionBody {
        case .beginPending, .open: break
        case .committed: throw Self.statementAfterCommit
        case .none:
            throw PostgresError.invalidArgument("executeWithNext runs only inside a transaction's body")
        }
        self.statementLog?.append(sql)
        let encoded = try EncodedParameters(parameters)
        // Preparing it may clear the cache (DEALLOCATE ALL), which sends what waits first.
        let name = try self.statementName(sql: sql, types: encoded.types, handle: handle)
        self.queued.append(PipelinedStatement(sql: sql, preparedName: name, parameters: encoded))
    }

    /// A prepared statement failed inside a transaction with "cached plan must not change
    /// result type" (SQLSTATE 0A000: a table changed under it, e.g. a column's type in a
    /// migration a newer replica applied). The failed transaction cannot prepare it again, so
    /// the connection forgets it, for its next use to prepare it afresh, and the error becomes
    /// ``PostgresError/Code/staleStatement``, on which ``PostgresPool/transaction(isolation:maxAttempts:_:)``
    /// runs the transaction again. The server keeps the old statement until the cache is cleared
    /// or the connection closes: the failed transaction cannot run a `DEALLOCATE`.
    private func staleStatement(_ error: PostgresError, sql: String, types: [UInt32]) -> PostgresError {
        self.preparedStatements[StatementKey(sql: sql, types: types)] = nil
        var stale = error
        stale.code = .staleStatement
        return stale
    }

    /// Runs one or more `;`-separated statements without parameters over the simple query
    /// protocol (`PQexec`): for migrations, `SET`, `BEGIN`/`COMMIT` and similar. Never build its
    /// text from values; use ``execute(_:_:)`` with parameters instead.
    ///
    /// - Returns: The command tag of the last statement.
    @discardableResult
    public func executeScript(_ sql: String) throws(PostgresError) -> String {
        let handle = try self.usableHandle()
        self.statementLog?.append(sql)
        // The simple query protocol cannot share a round trip: a pending BEGIN and the
        // statements waiting for the next one go first.
        let waiting = self.takeWaitingStatements()
        if !waiting.isEmpty { try self.executePipelined(waiting, handle: handle) }
        self.roundTrips += 1
        let result = PQexec(handle, sql)
        return try self.check(result, handle: handle) { result in
            String(cString: PQcmdStatus(result))
        }
    }

    /// Runs `body` in a transaction: `BEGIN`, then `COMMIT` when `body` returns, `ROLLBACK` when
    /// it throws. No retries here: ``PostgresPool/transaction(isolation:maxAttempts:_:)`` retries
    /// serialization failures and deadlocks.
    ///
    /// The `BEGIN` travels with the body's first statement, in one round trip (libpq's pipeline
    /// mode: `BEGIN`, the statement, a sync), so a transaction of n statements takes n + 1
    /// round trips, not n + 2. A body that runs no statement sends nothing. A statement given
    /// to ``executeWithNext(_:_:)`` travels the same way, with the body's next one.
    ///
    /// - Throws: the body's error, or ``PostgresError/Code/queryFailed`` when the transaction
    ///   was rolled back at `COMMIT` because a statement inside it had failed.
    public func transaction<R>(
        isolation: PostgresIsolationLevel = .readCommitted,
        _ body: () throws -> R
    ) throws -> R {
        _ = try self.usableHandle()
        self.transactionBody = .beginPending("BEGIN ISOLATION LEVEL \(isolation.sql)")
        defer { self.transactionBody = .none }
        do {
            let result = try body()
            switch self.transactionBody {
            case .beginPending where self.queued.isEmpty, .committed, .none:
                // The last statement carried the COMMIT, or no statement ran: nothing was opened.
                return result
            case .beginPending, .open:
                // A statement waiting for the next one goes with the COMMIT.
                if try self.executeScript("COMMIT") == "ROLLBACK" { throw Self.rolledBackAtCommit }
                return result
            }
        } catch {
            // Statements still waiting for the next one are dropped, not sent before the ROLLBACK.
            self.queued.removeAll()
            if case .beginPending = self.transactionBody {} else { self.rollbackIfInTransaction() }
            throw error
        }
    }

    /// ``executeAndCommit(_:_:)`` for a statement built with string interpolation.
    @discardableResult
    public func executeAndCommit(_ statement: PostgresStatement) throws(PostgresError) -> PostgresRows {
        try self.executeAndCommit(statement.sql, statement.parameters)
    }

    /// Executes the transaction's last statement and its `COMMIT` in one round trip (with the
    /// `BEGIN` too when it is the first statement: the whole transaction in one). Only as the
    /// last statement of a ``transaction(isolation:_:)`` body: the transaction is over when this
    /// returns, and a statement after it throws. A `COMMIT` that fails (a serialization failure,
    /// which ``PostgresPool/transaction(isolation:maxAttempts:_:)`` retries) throws its error.
    ///
    /// - Throws: ``PostgresError``; ``PostgresError/Code/invalidArgument`` outside a transaction's body.
    @discardableResult
    public func executeAndCommit(
        _ sql: String,
        _ parameters: [PostgresValue]
    ) throws(PostgresError) -> PostgresRows {
        let handle = try self.usableHandle()
        self.statementLog?.append(sql)
        switch self.transactionBody {
        case .beginPending, .open: break
        case .none, .committed:
            throw PostgresError.invalidArgument(
                "executeAndCommit runs only as the last statement of a transaction's body"
            )
        }
        let encoded = try EncodedParameters(parameters)
        let name = try self.statementName(sql: sql, types: encoded.types, handle: handle)
        let waiting = self.takeWaitingStatements()
        // Whatever happens now, no COMMIT follows: a failed statement leaves the transaction
        // failed for transaction()'s ROLLBACK; a failed COMMIT has ended it.
        self.transactionBody = .committed
        return try self.executePipelined(
            waiting + [
                PipelinedStatement(sql: sql, preparedName: name, parameters: encoded, answers: true),
                .text("COMMIT", isCommit: true),
            ],
            handle: handle
        )
    }

    static let statementAfterCommit = PostgresError.invalidArgument(
        "a statement after executeAndCommit: the transaction is over"
    )

    /// What has to go before the body's next statement: the pending `BEGIN`, if the body has run
    /// no statement yet (the transaction counts as open from here on), and the statements
    /// waiting for the next one.
    private func takeWaitingStatements() -> [PipelinedStatement] {
        var waiting: [PipelinedStatement] = []
        if case .beginPending(let begin) = self.transactionBody {
            self.transactionBody = .open
            waiting.append(.text(begin))
        }
        if !self.queued.isEmpty {
            waiting += self.queued
            self.queued.removeAll(keepingCapacity: true)
        }
        return waiting
    }

    /// `statements` in one round trip: libpq's pipeline mode sends them and a sync, then reads
    /// each one's result and the sync's. Returns the rows of the statement marked `answers`
    /// (none when no statement is). A failed statement makes the server skip the rest, so the
    /// first failure is thrown: a failed `BEGIN` throws its error, and a failed statement leaves
    /// the transaction failed, for the caller's `ROLLBACK`, as without the pipeline; a `COMMIT`
    /// that failed (a serialization failure) throws its error with the transaction over.
    @discardableResult
    private func executePipelined(
        _ statements: [PipelinedStatement],
        handle: OpaquePointer
    ) throws(PostgresError) -> PostgresRows {
        guard PQenterPipelineMode(handle) == 1 else { throw self.failure(result: nil, handle: handle) }
        var sent = true
        for statement in statements where sent { sent = Self.send(statement, handle: handle) }
        if sent { sent = PQpipelineSync(handle) == 1 }
        self.roundTrips += 1
        guard sent else {
            // Part of the pipeline may be on its way: the connection's state is unknown.
            let error = self.failure(result: nil, handle: handle)
            self.broken = true
            throw error
        }
        // Each query's results end with a NULL; the sync's result comes last.
        func nextQueryResult() -> PostgresResultHandle? {
            guard let result = PQgetResult(handle) else { return nil }
            while let extra = PQgetResult(handle) { PQclear(extra) }
            return PostgresResultHandle(result)
        }
        var results: [PostgresResultHandle] = []
        results.reserveCapacity(statements.count)
        for _ in statements {
            guard let result = nextQueryResult() else { break }
            results.append(result)
        }
        let syncResult = PQgetResult(handle).map(PostgresResultHandle.init)
        guard let syncResult, PQresultStatus(syncResult.pointer) == PGRES_PIPELINE_SYNC,
            PQexitPipelineMode(handle) == 1, results.count == statements.count
        else {
            let error = self.failure(result: nil, handle: handle)
            self.broken = true
            throw error
        }
        var rows = PostgresRows.empty
        for (statement, result) in zip(statements, results) {
            if statement.isCommit {
                guard PQresultStatus(result.pointer) == PGRES_COMMAND_OK else {
                    throw self.failure(result: result.pointer, handle: handle)
                }
                if String(cString: PQcmdStatus(result.pointer)) == "ROLLBACK" { throw Self.rolledBackAtCommit }
                continue
            }
            do {
                if statement.answers {
                    rows = try self.check(owned: result, handle: handle) { result in copyRows(from: result) }
                } else {
                    try self.check(owned: result, handle: handle) { _ in () }
                }
            } catch let error where statement.preparedName != nil && error.sqlState == "0A000" {
                // Always inside a transaction: this pipeline's BEGIN went first, or an earlier one's.
                throw self.staleStatement(error, sql: statement.sql, types: statement.parameters.types)
            }
        }
        return rows
    }

    /// Queues `statement` on the connection's pipeline; false when libpq refused it.
    private static func send(_ statement: PipelinedStatement, handle: OpaquePointer) -> Bool {
        let parameters = statement.parameters
        return parameters.types.withUnsafeBufferPointer { types in
            parameters.withPointers { values, lengths, formats in
                if let name = statement.preparedName {
                    PQsendQueryPrepared(handle, name, Int32(types.count), values, lengths, formats, 1) == 1
                } else {
                    PQsendQueryParams(
                        handle,
                        statement.sql,
                        Int32(types.count),
                        types.baseAddress,
                        values,
                        lengths,
                        formats,
                        1
                    ) == 1
                }
            }
        }
    }

    static let rolledBackAtCommit = PostgresError(
        code: .queryFailed,
        message: "the transaction was rolled back because a statement in it had failed"
    )

    /// Sends `ROLLBACK` when a transaction is open; marks the connection broken when that fails.
    func rollbackIfInTransaction() {
        switch self.transactionStatus {
        case .inTransaction, .failedTransaction:
            do {
                try self.executeScript("ROLLBACK")
            } catch {
                self.broken = true
            }
        case .active, .unknown:
            self.broken = true
        case .idle:
            break
        }
    }

    /// A cheap, non-blocking check before handing an idle pooled connection out: reads what the
    /// server may have sent meanwhile (a shutdown notice, end of stream) without waiting.
    func isHealthyWhenIdle() -> Bool {
        guard let handle, !self.isBroken else { return false }
        // Twice: a server that shuts down first sends a FATAL message, then closes the socket;
        // the first call may read only the message, the second then sees the end of stream.
        for _ in 0..<2 {
            if PQconsumeInput(handle) == 0 || self.broken {
                self.broken = true
                return false
            }
        }
        // Notifications of a LISTEN someone issued on a pooled connection: drop them.
        while let notification = PQnotifies(handle) {
            PQfreemem(notification)
        }
        return PQstatus(handle) == CONNECTION_OK && PQtransactionStatus(handle) == PQTRANS_IDLE
    }

    // MARK: Notifications (used by PostgresListener)

    /// The connection's socket, or -1 when closed.
    var socket: Int32 {
        self.handle.map(PQsocket) ?? -1
    }

    /// Reads whatever the server sent, without blocking. Returns false (and marks the connection
    /// broken) when the connection failed.
    func consumeInput() -> Bool {
        guard let handle, !self.isBroken else { return false }
        if PQconsumeInput(handle) == 0 || PQstatus(handle) != CONNECTION_OK {
            self.broken = true
            return false
        }
        return true
    }

    /// The notifications received so far.
    func takeNotifications() -> [PostgresNotification] {
        guard let handle else { return [] }
        var notifications: [PostgresNotification] = []
        while let notify = PQnotifies(handle) {
            let channel = notify.pointee.relname.map { String(cString: $0) } ?? ""
            let payload = notify.pointee.extra.map { String(cString: $0) } ?? ""
            notifications.append(
                PostgresNotification(channel: channel, payload: payload, backendPID: notify.pointee.be_pid)
            )
            PQfreemem(notify)
        }
        return notifications
    }

    // MARK: Internals

    private func usableHandle() throws(PostgresError) -> OpaquePointer {
        guard let handle else {
            throw PostgresError(code: .closed, message: "the connection is closed")
        }
        if self.isBroken {
            throw PostgresError(code: .connectionLost, message: "the connection to the server was lost")
        }
        return handle
    }

    /// The prepared statement to execute `sql` by, prepared on first use; nil behind a
    /// transaction pooler, where every statement is sent unnamed.
    private func statementName(sql: String, types: [UInt32], handle: OpaquePointer) throws(PostgresError) -> String? {
        guard self.preparesStatements else { return nil }
        return try self.preparedStatementName(sql: sql, types: types, handle: handle)
    }

    private func preparedStatementName(
        sql: String,
        types: [UInt32],
        handle: OpaquePointer
    ) throws(PostgresError) -> String {
        let key = StatementKey(sql: sql, types: types)
        if let name = self.preparedStatements[key] { return name }
        if self.preparedStatements.count >= self.maxPreparedStatements {
            try self.executeScript("DEALLOCATE ALL")
            self.preparedStatements.removeAll()
        }
        let name = "auth_s\(self.nextStatementNumber)"
        self.nextStatementNumber += 1
        self.roundTrips += 1
        let result = types.withUnsafeBufferPointer { types in
            PQprepare(handle, name, sql, Int32(types.count), types.baseAddress)
        }
        try self.check(result, handle: handle) { _ in () }
        self.preparedStatements[key] = name
        self.logger.trace("prepared statement", metadata: ["postgres.statement": "\(name)"])
        return name
    }

    private func forgetPreparedStatement(sql: String, types: [UInt32], name: String) {
        self.preparedStatements[StatementKey(sql: sql, types: types)] = nil
        _ = try? self.executeScript("DEALLOCATE \(name)")
    }

    private func executePrepared(
        name: String,
        _ parameters: EncodedParameters,
        handle: OpaquePointer
    ) throws(PostgresError) -> PostgresRows {
        self.roundTrips += 1
        let result = parameters.withPointers { values, lengths, formats in
            PQexecPrepared(handle, name, Int32(parameters.types.count), values, lengths, formats, 1)
        }
        return try self.check(result, handle: handle) { result in copyRows(from: result) }
    }

    /// One round trip with an unnamed statement (Parse, Bind, Execute): what a transaction pooler
    /// can carry, since nothing outlives the statement.
    private func executeUnnamed(
        sql: String,
        _ parameters: EncodedParameters,
        handle: OpaquePointer
    ) throws(PostgresError) -> PostgresRows {
        self.roundTrips += 1
        let result = parameters.types.withUnsafeBufferPointer { types in
            parameters.withPointers { values, lengths, formats in
                PQexecParams(handle, sql, Int32(types.count), types.baseAddress, values, lengths, formats, 1)
            }
        }
        return try self.check(result, handle: handle) { result in copyRows(from: result) }
    }

    /// Takes ownership of `result`, turns an error status into a ``PostgresError`` and otherwise
    /// hands the result to `read` before freeing it.
    private func check<T>(
        _ result: OpaquePointer?,
        handle: OpaquePointer,
        read: (OpaquePointer) -> T
    ) throws(PostgresError) -> T {
        guard let result else {
            throw self.failure(result: nil, handle: handle)
        }
        return try self.check(owned: PostgresResultHandle(result), handle: handle, read: read)
    }

    /// ``check(_:handle:read:)`` for a result already owned by a handle.
    private func check<T>(
        owned: PostgresResultHandle,
        handle: OpaquePointer,
        read: (OpaquePointer) -> T
    ) throws(PostgresError) -> T {
        switch PQresultStatus(owned.pointer) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return read(owned.pointer)
        default:
            throw self.failure(result: owned.pointer, handle: handle)
        }
    }

    private func failure(result: OpaquePointer?, handle: OpaquePointer) -> PostgresError {
        func field(_ code: Character) -> String? {
            guard let result, let pointer = PQresultErrorField(result, Int32(code.asciiValue!)) else { return nil }
            return String(cString: pointer)
        }
        let sqlState = field("C")
        let primary =
            field("M")
            ?? result.flatMap { String(validatingCString: PQresultErrorMessage($0)) }.map(trimmed)
            ?? errorMessage(of: handle)
            ?? "unknown error"
        var code = sqlState.map(PostgresError.code(forSQLState:)) ?? .queryFailed
        if PQstatus(handle) != CONNECTION_OK || code == .connectionLost {
            code = .connectionLost
            self.broken = true
        } else if code == .timeout && self.cancelHandle.cancelWasRequested {
            code = .cancelled
        }
        let message: String
        if code == .invalidData {
            message = "the server rejected a value (its message is withheld because it may quote the value)"
        } else if code == .connectionLost && sqlState == nil {
            message = "the connection to the server was lost: \(primary)"
        } else {
            message = primary
        }
        let error = PostgresError(
            code: code,
            message: message,
            sqlState: sqlState,
            serverMessage: primary,
            constraint: field("n"),
            schema: field("s"),
            table: field("t"),
            column: field("c")
        )
        if code == .connectionLost {
            self.logger.warning("PostgreSQL connection lost", metadata: ["postgres.error": "\(error)"])
        }
        return error
    }

    private func installNoticeReceiver() {
        guard let handle else { return }
        // The receiver cannot capture: the connection travels as the unretained context pointer.
        // It stays valid because the PGconn is finished before (or in) this object's deinit.
        PQsetNoticeReceiver(
            handle,
            { context, result in
                guard let context, let result else { return }
                let connection = Unmanaged<PostgresConnection>.fromOpaque(context).takeUnretainedValue()
                connection.noticeReceived(result)
            },
            Unmanaged.passUnretained(self).toOpaque()
        )
    }

    private func noticeReceived(_ result: OpaquePointer) {
        // Only severity and SQLSTATE: a notice's text can quote data.
        func field(_ code: Character) -> String {
            PQresultErrorField(result, Int32(code.asciiValue!)).map { String(cString: $0) } ?? "?"
        }
        // A FATAL message outside a query (e.g. 57P01 when the server shuts down) arrives here:
        // the server is about to close the connection.
        let severity = field("V")
        if severity == "FATAL" || severity == "PANIC" {
            self.broken = true
        }
        self.logger.debug(
            "PostgreSQL notice",
            metadata: ["postgres.severity": "\(field("V"))", "postgres.sqlstate": "\(field("C"))"]
        )
    }
}

@available(*, unavailable)
extension PostgresConnection: Sendable {}

/// The transaction state of a ``PostgresConnection``.
public enum PostgresTransactionStatus: Sendable, Hashable {
    /// Not in a transaction.
    case idle
    /// A command is in progress.
    case active
    /// Inside a transaction block.
    case inTransaction
    /// Inside a failed transaction block: only `ROLLBACK` helps.
    case failedTransaction
    /// Closed or broken.
    case unknown
}

/// A transaction isolation level.
public enum PostgresIsolationLevel: Sendable, Hashable {
    /// PostgreSQL's default.
    case readCommitted
    /// Snapshot isolation: conflicting concurrent updates fail with a serialization failure.
    case repeatableRead
    /// Full serializability: anomalies fail with a serialization failure.
    case serializable

    var sql: String {
        switch self {
        case .readCommitted: "READ COMMITTED"
        case .repeatableRead: "REPEATABLE READ"
        case .serializable: "SERIALIZABLE"
        }
    }
}

// MARK: - C resources

/// Owns one `PGresult`.
final class PostgresResultHandle {
    let pointer: OpaquePointer

    init(_ pointer: OpaquePointer) { self.pointer = pointer }

    deinit { PQclear(self.pointer) }
}

/// Owns one `PGcancel` (`PQgetCancel`): lets another thread cancel the statement running on the
/// connection, but only while a pooled caller has armed it.
final class PostgresCancelHandle: @unchecked Sendable {
    // @unchecked Sendable: `pointer` is immutable after init and only passed to PQcancel, which
    // libpq documents as safe to call from any thread while the connection is in use; PQcancel
    // calls are serialized by `state`'s lock, and PQfreeCancel runs in deinit, when no other
    // reference exists. All mutable state is inside the Mutex.
    private let pointer: OpaquePointer?
    private let state = Mutex(State())

    private struct State {
        var generation: UInt64 = 0
        var armed = false
        var requested = false
    }

    init(connection: OpaquePointer) {
        self.pointer = PQgetCancel(connection)
    }

    deinit {
        if let pointer { PQfreeCancel(pointer) }
    }

    /// Allows ``cancelIfArmed(generation:)`` to cancel the statement(s) about to run. Returns the
    /// generation that a cancel request must name, so that a late request from an earlier user
    /// of the connection cannot cancel a later user's statement.
    func arm() -> UInt64 {
        self.state.withLock { state in
            state.generation &+= 1
            state.armed = true
            state.requested = false
            return state.generation
        }
    }

    /// Stops cancelling: after this, the connection may go to another caller.
    func disarm() {
        self.state.withLock { state in
            state.armed = false
            state.requested = false
        }
    }

    /// Whether a cancel request was sent while armed.
    var cancelWasRequested: Bool {
        self.state.withLock { $0.requested }
    }

    /// Sends a cancel request when armed for `generation`. Blocks for a round trip to the server;
    /// the lock is held meanwhile so that `disarm()` cannot hand the connection on with a cancel
    /// still in flight.
    func cancelIfArmed(generation: UInt64) {
        guard let pointer else { return }
        self.state.withLock { state in
            guard state.armed, state.generation == generation, !state.requested else { return }
            state.requested = true
            var buffer = [CChar](repeating: 0, count: 256)
            _ = PQcancel(pointer, &buffer, Int32(buffer.count))
        }
    }
}

// MARK: - Helpers

private func copyRows(from result: OpaquePointer) -> PostgresRows {
    let columnCount = Int(PQnfields(result))
    let rowCount = Int(PQntuples(result))
    var columns: [PostgresColumn] = []
    columns.reserveCapacity(columnCount)
    for column in 0..<columnCount {
        let name = PQfname(result, Int32(column)).map { String(cString: $0) } ?? ""
        columns.append(PostgresColumn(name: name, dataType: PostgresDataType(rawValue: PQftype(result, Int32(column)))))
    }
    var total = 0
    for row in 0..<rowCount {
        for column in 0..<columnCount {
            total += Int(PQgetlength(result, Int32(row), Int32(column)))
        }
    }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(total)
    var offsets: [Int] = []
    var lengths: [Int] = []
    offsets.reserveCapacity(rowCount * columnCount)
    lengths.reserveCapacity(rowCount * columnCount)
    for row in 0..<rowCount {
        for column in 0..<columnCount {
            if PQgetisnull(result, Int32(row), Int32(column)) != 0 {
                offsets.append(-1)
                lengths.append(0)
                continue
            }
            let length = Int(PQgetlength(result, Int32(row), Int32(column)))
            offsets.append(bytes.count)
            lengths.append(length)
            if length > 0, let value = PQgetvalue(result, Int32(row), Int32(column)) {
                UnsafeRawPointer(value).withMemoryRebound(to: UInt8.self, capacity: length) { pointer in
                    bytes.append(contentsOf: UnsafeBufferPointer(start: pointer, count: length))
                }
            }
        }
    }
    let commandTag = PQcmdStatus(result).map { String(cString: $0) } ?? ""
    let affected = PQcmdTuples(result).flatMap { Int(String(cString: $0)) }
    let storage = PostgresRows.Storage(
        columns: columns,
        rowCount: rowCount,
        offsets: offsets,
        lengths: lengths,
        bytes: bytes
    )
    return PostgresRows(storage: storage, commandTag: commandTag, affectedRows: affected)
}

private func errorMessage(of connection: OpaquePointer) -> String? {
    guard let pointer = PQerrorMessage(connection) else { return nil }
    let message = trimmed(String(cString: pointer))
    return message.isEmpty ? nil : message
}

private func trimmed(_ message: String) -> String {
    message.trimmingWhitespace()
}

/// Calls `body` with a NULL-terminated array of C strings that live for the call.
private func withCStringArray<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let copies: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    let pointers: [UnsafePointer<CChar>?] = copies.map { $0.map { UnsafePointer($0) } } + [nil]
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
