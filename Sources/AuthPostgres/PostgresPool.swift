import Logging
import NIOPosix
import ServiceLifecycle
import Synchronization
import Tracing

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A bounded pool of ``PostgresConnection``s whose blocking libpq calls run on the pool's own
/// threads (an `NIOThreadPool` with one thread per connection), never on an event loop or in
/// Swift's cooperative pool.
///
/// - At most ``PostgresConfiguration/maxConnections`` connections exist; further callers wait,
///   first come first served, up to ``PostgresConfiguration/acquireTimeout`` (then
///   ``PostgresError/Code/poolTimeout``). A waiting caller whose task is cancelled stops waiting
///   with `CancellationError`; a cancelled caller whose statement is running sends the server a
///   cancel request and gets ``PostgresError/Code/cancelled``.
/// - Connections are opened lazily, and while the pool runs as a `Service` it keeps at least
///   ``PostgresConfiguration/minConnections`` open (see ``openMinimumConnections()``). An idle
///   connection is checked (without blocking) before reuse; a connection that failed at
///   connection level is discarded. A failed connection
///   attempt starts a backoff during which calls that need a new connection fail at once with
///   ``PostgresError/Code/unavailable``; once the database is back, calls succeed again on the
///   same pool.
/// - As a `Service` the pool closes itself on graceful shutdown; otherwise call ``close()``.
public final class PostgresPool: Service, Sendable {
    /// The pool's configuration.
    public let configuration: PostgresConfiguration
    let logger: Logger
    private let threadPool: NIOThreadPool
    /// Sends cancel requests (a blocking round trip each): a thread of its own, since the
    /// connection threads are busy with the very statements being cancelled.
    private let cancelThread: NIOThreadPool
    private let state: Mutex<State>
    /// Numbers the callers that ask for a connection (the state machine's waiter ids), outside
    /// the lock: `acquire` then takes the pool's lock once.
    private let nextWaiterID = Atomic<Int>(0)
    private let listener = Mutex<PostgresListener?>(nil)

    typealias Machine = StateMachine<PooledConnection, CheckedContinuation<PooledConnection?, any Error>>

    private struct State {
        var machine: Machine
        var backoff = ReconnectBackoff()
        /// The timer for waiting callers' deadlines, while armed (see ``StateMachine``).
        var timer: Task<Void, Never>?
        /// Callers that waited ``PostgresConfiguration/acquireTimeout`` for a connection in vain.
        var acquireTimeouts = 0
        var drainWaiters: [CheckedContinuation<Void, Never>] = []
    }

    /// Creates a pool. No connection is opened until the first call needs one or ``run()`` starts.
    public init(configuration: PostgresConfiguration, logger: Logger) {
        precondition(configuration.maxConnections > 0, "maxConnections must be at least 1")
        precondition(
            (0...configuration.maxConnections).contains(configuration.minConnections),
            "minConnections must be in 0...maxConnections"
        )
        self.configuration = configuration
        self.logger = logger
        self.threadPool = NIOThreadPool(numberOfThreads: configuration.maxConnections)
        self.threadPool.start()
        self.cancelThread = NIOThreadPool(numberOfThreads: 1)
        self.cancelThread.start()
        self.state = Mutex(State(machine: Machine(maxConnections: configuration.maxConnections)))
    }

    /// A snapshot of the pool's occupancy.
    public struct Statistics: Sendable, Hashable {
        /// Open connections not in use.
        public var idleConnections: Int
        /// Callers holding a connection (or opening one).
        public var leasedConnections: Int
        /// Callers waiting for a connection.
        public var waitingCallers: Int
        /// The most connections the pool opens (``PostgresConfiguration/maxConnections``).
        public var maxConnections: Int
        /// Callers, since the pool was made, that got ``PostgresError/Code/poolTimeout``.
        public var acquireTimeouts: Int
    }

    /// The pool's current occupancy.
    public var statistics: Statistics {
        self.state.withLock {
            Statistics(
                idleConnections: $0.machine.idle.count,
                leasedConnections: $0.machine.leased,
                waitingCallers: $0.machine.waiting,
                maxConnections: self.configuration.maxConnections,
                acquireTimeouts: $0.acquireTimeouts
            )
        }
    }

    // MARK: Using connections

    /// Runs `body` with a connection of its own, on one of the pool's threads.
    ///
    /// `body` may run several statements and may open a transaction with
    /// ``PostgresConnection/transaction(isolation:_:)``; a transaction it leaves open is rolled
    /// back. Do not keep the connection beyond `body`.
    ///
    /// - Throws: ``PostgresError`` (``PostgresError/Code/poolTimeout``, ``PostgresError/Code/unavailable``,
    ///   ``PostgresError/Code/closed``, …), `CancellationError`, or whatever `body` throws.
    ///
    /// With a tracer installed, it runs in a `client` span, `postgresql`, that lists the
    /// statements' text (never their values: those are bound parameters).
    @discardableResult
    public func withConnection<R: Sendable>(
        _ body: @Sendable (PostgresConnection) throws -> R
    ) async throws -> R {
        guard Self.isTracing else { return try await self.withLeasedConnection(statementLog: nil, body) }
        return try await withSpan("postgresql", ofKind: .client) { span in
            guard span.isRecording else { return try await self.withLeasedConnection(statementLog: nil, body) }
            let log = PostgresStatementLog()
            defer { log.annotate(span) }
            return try await self.withLeasedConnection(statementLog: log, body)
        }
    }

    /// Whether a tracer is installed, read at the first lease (the services install theirs at
    /// start, before the database is first used): without one, a lease skips the span
    /// machinery altogether.
    static let isTracing = !(InstrumentationSystem.tracer is NoOpTracer)

    private func withLeasedConnection<R: Sendable>(
        statementLog: PostgresStatementLog?,
        _ body: @Sendable (PostgresConnection) throws -> R
    ) async throws -> R {
        let leased = try await self.acquire()
        let canceller = QueryCanceller(thread: self.cancelThread)
        let outcome: Result<R, any Error>
        let kept: PooledConnection?
        do {
            (outcome, kept) = try await withTaskCancellationHandler {
                try await withoutActuallyEscaping(body) { body in
                    // The thread pool may release its work item only after resuming us, so the
                    // work item must not capture `body` itself: it gets it through a handoff
                    // that is emptied before `withoutActuallyEscaping` ends.
                    let handoff = BodyHandoff(body)
                    defer { handoff.clear() }
                    return try await self.threadPool.runIfActive {
                        guard let body = handoff.take() else { return (.failure(CancellationError()), leased) }
                        return self.runOnPoolThread(leased, canceller: canceller, statementLog: statementLog, body)
                    }
                }
            } onCancel: {
                canceller.cancel()
            }
        } catch {
            // The work never ran: the thread pool is shut down, or the task was cancelled while
            // the work was queued.
            self.release(leased)
            if error is NIOThreadPoolError.ThreadPoolInactive { throw PostgresError.poolClosed }
            throw error
        }
        self.release(kept)
        return try outcome.get()
    }

    /// Runs `body` on a connection that stays one server session throughout, for work whose state
    /// lives in the session (a session advisory lock, `SET`): a pooled connection, or behind a
    /// transaction pooler a new connection to ``PostgresConfiguration/directConnectionString``,
    /// opened on one of the pool's threads and closed when `body` ends.
    ///
    /// - Throws: ``PostgresError/Code/invalidArgument`` behind a transaction pooler without a
    ///   direct connection string; otherwise as ``withConnection(_:)``.
    @discardableResult
    public func withSessionConnection<R: Sendable>(
        _ body: @Sendable (PostgresConnection) throws -> R
    ) async throws -> R {
        guard self.configuration.pooler == .transaction else { return try await self.withConnection(body) }
        guard let session = self.configuration.sessionConfiguration else { throw PostgresError.needsDirectConnection }
        if self.state.withLock({ $0.machine.isClosed }) { throw PostgresError.poolClosed }
        let canceller = QueryCanceller(thread: self.cancelThread)
        let logger = self.logger
        do {
            return try await withTaskCancellationHandler {
                try await withoutActuallyEscaping(body) { body in
                    // As in withConnection: the work item gets the body through a handoff.
                    let handoff = BodyHandoff(body)
                    defer { handoff.clear() }
                    return try await self.threadPool.runIfActive {
                        guard let body = handoff.take() else { throw CancellationError() }
                        let connection = try PostgresConnection.connect(configuration: session, logger: logger)
                        defer { connection.close() }
                        guard canceller.attach(connection.cancelHandle) else { throw CancellationError() }
                        defer { canceller.detach() }
                        return try body(connection)
                    }
                }
            } onCancel: {
                canceller.cancel()
            }
        } catch is NIOThreadPoolError.ThreadPoolInactive {
            throw PostgresError.poolClosed
        }
    }

    /// The process ids of the PostgreSQL backends serving connections whose
    /// `application_name` is `applicationName` (a benchmark counts their CPU time).
    public func backendPIDs(applicationName: String) async throws -> [Int32] {
        try await query("SELECT pid FROM pg_stat_activity WHERE application_name = $1", [.text(applicationName)])
            .map { try $0[0].int32 }
    }

    /// Executes one statement on a pooled connection.
    @discardableResult
    public func query(_ sql: String, _ parameters: [PostgresValue]) async throws -> PostgresRows {
        try await self.withConnection { try $0.execute(sql, parameters) }
    }

    /// Executes one statement, built with string interpolation, on a pooled connection.
    @discardableResult
    public func query(_ statement: PostgresStatement) async throws -> PostgresRows {
        try await self.withConnection { try $0.execute(statement) }
    }

    // MARK: Lifecycle

    /// Runs until graceful shutdown (or cancellation), then closes the pool. Meanwhile it keeps
    /// ``PostgresConfiguration/minConnections`` open: at once, then every
    /// ``PostgresConfiguration/minimumConnectionsCheckInterval``.
    public func run() async throws {
        if self.configuration.minConnections > 0 {
            try? await cancelWhenGracefulShutdown {
                while !Task.isCancelled {
                    await self.discardBrokenIdleConnections()
                    await self.openMinimumConnections()
                    try await Task.sleep(for: self.configuration.minimumConnectionsCheckInterval)
                }
            }
        } else {
            try? await gracefulShutdown()
        }
        await self.close()
    }

    /// Opens connections on the pool's threads until ``PostgresConfiguration/minConnections``
    /// are open (idle or in use), and returns when they are: one first, then, if it opened, the
    /// rest all at once, so an unreachable database gets one attempt per pass, not one per slot
    /// (a failed attempt is logged and starts the reconnect backoff, as a call's would). Opens
    /// none while callers wait: they open what they need themselves. Returns how many it opened.
    @discardableResult
    public func openMinimumConnections() async -> Int {
        let slots = self.state.withLock { $0.machine.leaseSlotsToOpen(minimum: self.configuration.minConnections) }
        guard slots > 0 else { return 0 }
        guard await self.openLeasedSlot() else {
            // The other slots go back unopened (to a waiter, if one came meanwhile).
            for _ in 1..<slots { self.release(nil) }
            return 0
        }
        return await withTaskGroup(of: Bool.self) { group in
            for _ in 1..<slots { group.addTask { await self.openLeasedSlot() } }
            return await group.reduce(1) { $0 + ($1 ? 1 : 0) }
        }
    }

    /// Checks the idle connections, without blocking, on the pool's threads, and closes those
    /// whose server session has ended (a restart, an idle timeout, `pg_terminate_backend`), so
    /// that ``openMinimumConnections()`` replaces them before a call would find them. Returns
    /// how many it closed.
    @discardableResult
    public func discardBrokenIdleConnections() async -> Int {
        let connections = self.state.withLock { $0.machine.leaseIdleToCheck() }
        guard !connections.isEmpty else { return 0 }
        // A pool whose threads have stopped (it is closing) keeps none of them.
        let healthy =
            (try? await self.threadPool.runIfActive { connections.map(Self.keepIfHealthy) })
            ?? connections.map {
                $0.connection.close()
                return false
            }
        for (pooled, isHealthy) in zip(connections, healthy) { self.release(isHealthy ? pooled : nil) }
        let discarded = healthy.count { !$0 }
        if discarded > 0 {
            self.logger.info(
                "closed idle PostgreSQL connections the server had ended",
                metadata: ["count": "\(discarded)"]
            )
        }
        return discarded
    }

    /// Whether an idle connection is still usable; closes it when not.
    private static func keepIfHealthy(_ pooled: PooledConnection) -> Bool {
        guard pooled.connection.isHealthyWhenIdle() else {
            pooled.connection.close()
            return false
        }
        return true
    }

    /// Opens a connection for a slot ``openMinimumConnections()`` leased and releases it (a
    /// waiter that came meanwhile gets the connection or, without one, the slot).
    private func openLeasedSlot() async -> Bool {
        let opened = try? await self.threadPool.runIfActive { try self.usableConnection(nil) }
        self.release(opened)
        return opened != nil
    }

    /// Closes the pool: waiting callers fail with ``PostgresError/Code/closed``, idle connections
    /// close, and this returns once every running `body` has finished and its connection is closed.
    /// Notification streams from ``listen(channel:)`` finish.
    public func close() async {
        let (action, timer) = self.state.withLock { state in
            defer { state.timer = nil }
            return (state.machine.close(), state.timer)
        }
        timer?.cancel()
        for waiter in action.waiters {
            waiter.resume(throwing: PostgresError.poolClosed)
        }
        for pooled in action.connections {
            pooled.connection.close()
        }
        if !action.drained {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let drained = self.state.withLock { state in
                    if state.machine.leased == 0 { return true }
                    state.drainWaiters.append(continuation)
                    return false
                }
                if drained { continuation.resume() }
            }
        }
        let listener = self.listener.withLock { $0 }
        listener?.shutdown()
        try? await self.threadPool.shutdownGracefully()
        try? await self.cancelThread.shutdownGracefully()
        self.logger.debug("PostgreSQL pool closed")
    }

    // MARK: Notifications

    /// Subscribes to notifications on `channel` (`LISTEN`), over one dedicated connection that
    /// the pool opens on first use and that re-subscribes after reconnecting. Behind a transaction
    /// pooler it connects to ``PostgresConfiguration/directConnectionString``.
    ///
    /// Returns once the server has confirmed the `LISTEN`, so a `NOTIFY` sent afterwards is
    /// delivered. The stream ends when the pool closes; cancelling its iteration unsubscribes.
    /// Notifications sent while the listening connection is down are lost: use them as a hint
    /// to look at the database, and look again after a while anyway.
    ///
    /// - Parameter channel: An identifier (ASCII letters, digits, `_`; at most 63 bytes). It is
    ///   case-sensitive and matches `pg_notify`'s channel argument exactly.
    /// - Throws: ``PostgresError/Code/invalidArgument`` for a bad channel name or a transaction
    ///   pooler without a direct connection string, ``PostgresError/Code/unavailable`` when the
    ///   listening connection cannot be opened.
    public func listen(channel: String) async throws -> AsyncStream<PostgresNotification> {
        guard isPlainIdentifier(channel) else {
            throw PostgresError.invalidArgument("a channel name must be an identifier (letters, digits, _)")
        }
        let listener = try self.listener.withLock { listener throws(PostgresError) -> PostgresListener in
            if let listener { return listener }
            if self.state.withLock({ $0.machine.isClosed }) { throw PostgresError.poolClosed }
            // A LISTEN through a transaction pooler would register in whichever server session
            // ran it, and the notifications would go to whoever holds that session next.
            guard let session = self.configuration.sessionConfiguration else {
                throw PostgresError.needsDirectConnection
            }
            let created = try PostgresListener(configuration: session, logger: self.logger)
            listener = created
            return created
        }
        return try await listener.subscribe(channel: channel)
    }

    /// Sends a notification (`SELECT pg_notify($1, $2)`); listeners get it when the current
    /// transaction commits (at once here).
    ///
    /// - Throws: ``PostgresError/Code/invalidArgument`` for a bad channel name.
    public func notify(channel: String, payload: String = "") async throws {
        guard isPlainIdentifier(channel) else {
            throw PostgresError.invalidArgument("a channel name must be an identifier (letters, digits, _)")
        }
        try await self.query("SELECT pg_notify($1, $2)", [.text(channel), .text(payload)])
    }

    // MARK: Internals

    private func acquire() async throws -> PooledConnection? {
        let id = self.nextWaiterID.wrappingAdd(1, ordering: .relaxed).newValue
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<PooledConnection?, any Error>) in
                let action = self.state.withLock { state -> Machine.AcquireAction in
                    // Checked under the lock: a cancellation after this point finds the waiter.
                    if Task.isCancelled { return .fail(PostgresError(code: .cancelled, message: "cancelled")) }
                    // The clock is read under the lock, so deadlines never decrease along the
                    // queue (the state machine's one timer relies on it).
                    let deadline = ContinuousClock.now + self.configuration.acquireTimeout
                    let action = state.machine.acquire(id: id, waiter: continuation, deadline: deadline)
                    if case .wait(armTimer: let armed?) = action { state.timer = self.timer(for: armed) }
                    return action
                }
                switch action {
                case .lease(.existing(let pooled)):
                    continuation.resume(returning: pooled)
                case .lease(.new):
                    continuation.resume(returning: nil)
                case .fail(let error) where error.code == .cancelled:
                    continuation.resume(throwing: CancellationError())
                case .fail(let error):
                    continuation.resume(throwing: error)
                case .wait:
                    break
                }
            }
        } onCancel: {
            let waiter = self.state.withLock { $0.machine.removeWaiter(id: id) }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// The pool's one timer for waiting callers, armed for `deadline` (called under the lock;
    /// the task starts after it is released). One timer for all waiters, instead of a sleeping
    /// task per wait: a service with more calls in flight than connections waits often.
    private func timer(for deadline: ContinuousClock.Instant) -> Task<Void, Never> {
        Task { [weak self] in
            guard (try? await Task.sleep(until: deadline, clock: .continuous)) != nil, let self else { return }
            self.expireWaiters(timerDeadline: deadline)
        }
    }

    /// The timer went off: callers waiting past their deadline fail with
    /// ``PostgresError/Code/poolTimeout``.
    private func expireWaiters(timerDeadline: ContinuousClock.Instant) {
        let expired = self.state.withLock { state in
            let action = state.machine.expireWaiters(timerDeadline: timerDeadline, now: .now)
            state.acquireTimeouts += action.expired.count
            if let next = action.armTimer { state.timer = self.timer(for: next) }
            return action.expired
        }
        guard !expired.isEmpty else { return }
        let error = PostgresError(
            code: .poolTimeout,
            message: "no database connection became free within \(self.configuration.acquireTimeout)"
        )
        for waiter in expired { waiter.resume(throwing: error) }
    }

    private func release(_ pooled: PooledConnection?) {
        let (action, drainWaiters) = self.state.withLock { state in
            let action = state.machine.release(pooled)
            var drainWaiters: [CheckedContinuation<Void, Never>] = []
            if action.drained { swap(&drainWaiters, &state.drainWaiters) }
            return (action, drainWaiters)
        }
        if let (waiter, lease) = action.resume {
            switch lease {
            case .existing(let pooled): waiter.resume(returning: pooled)
            case .new: waiter.resume(returning: nil)
            }
        }
        action.close?.connection.close()
        drainWaiters.forEach { $0.resume() }
    }

    /// Runs on a pool thread: makes sure there is a usable connection, runs `body`, cleans up.
    /// Returns the body's outcome and the connection to keep (`nil` when there is none or it broke).
    private func runOnPoolThread<R>(
        _ leased: PooledConnection?,
        canceller: QueryCanceller,
        statementLog: PostgresStatementLog?,
        _ body: (PostgresConnection) throws -> R
    ) -> (Result<R, any Error>, PooledConnection?) {
        let pooled: PooledConnection
        do {
            pooled = try self.usableConnection(leased)
        } catch {
            return (.failure(error), nil)
        }
        let connection = pooled.connection
        guard canceller.attach(connection.cancelHandle) else {
            return (.failure(CancellationError()), pooled)
        }
        connection.statementLog = statementLog
        let outcome = Result { try body(connection) }
        connection.statementLog = nil
        canceller.detach()
        if connection.transactionStatus != .idle && !connection.isBroken {
            self.logger.warning("a withConnection body left a transaction open; rolling it back")
            connection.rollbackIfInTransaction()
        }
        if connection.isBroken {
            connection.close()
            return (outcome, nil)
        }
        return (outcome, pooled)
    }

    private func usableConnection(_ leased: PooledConnection?) throws(PostgresError) -> PooledConnection {
        if let leased {
            if leased.connection.isHealthyWhenIdle() { return leased }
            self.logger.debug("discarding a broken idle PostgreSQL connection")
            leased.connection.close()
        }
        let now = ContinuousClock.now
        if let remaining = self.state.withLock({ $0.backoff.remaining(now: now) }) {
            throw PostgresError(
                code: .unavailable,
                message: "the database is unavailable; next connection attempt in \(remaining)"
            )
        }
        do {
            let connection = try PostgresConnection.connect(configuration: self.configuration, logger: self.logger)
            self.state.withLock { $0.backoff.recordSuccess() }
            return PooledConnection(connection)
        } catch {
            let failures = self.state.withLock { state in
                state.backoff.recordFailure(now: .now, backoff: self.configuration.reconnectBackoffRule)
                return state.backoff.failures
            }
            self.logger.warning(
                "cannot connect to PostgreSQL",
                metadata: ["postgres.error": "\(error)", "postgres.failures": "\(failures)"]
            )
            throw error
        }
    }
}

/// Passes a caller's non-escaping body to a pool thread (see `withConnection`).
final class BodyHandoff<R>: Sendable {
    private let body: Mutex<(@Sendable (PostgresConnection) throws -> R)?>

    init(_ body: @escaping @Sendable (PostgresConnection) throws -> R) {
        self.body = Mutex(body)
    }

    /// The body, once; `nil` after `take()` or `clear()`.
    func take() -> (@Sendable (PostgresConnection) throws -> R)? {
        self.body.withLock { body in
            defer { body = nil }
            return body
        }
    }

    func clear() {
        _ = self.take()
    }
}

/// A pooled connection as it moves between the pool's lock, waiting callers and pool threads.
final class PooledConnection: @unchecked Sendable {
    // @unchecked Sendable: the pool hands a PooledConnection to exactly one lease at a time (the
    // state machine holds it either in `idle` or in one lease, never both), and a lease uses it
    // only inside one thread-pool work item, whose start and end are ordered with the handover by
    // the pool's Mutex and the continuation resumes. So the non-Sendable connection is only ever
    // touched by one thread at a time.
    let connection: PostgresConnection

    init(_ connection: PostgresConnection) { self.connection = connection }
}

/// Connects a caller's task cancellation with the statement running for it on a pool thread.
final class QueryCanceller: Sendable {
    private struct State {
        var cancelled = false
        var armed: (handle: PostgresCancelHandle, generation: UInt64)?
    }

    private let state = Mutex(State())
    /// The pool's cancel thread.
    private let thread: NIOThreadPool

    init(thread: NIOThreadPool) {
        self.thread = thread
    }

    /// Called on the pool thread before the body runs. Returns false when already cancelled.
    func attach(_ handle: PostgresCancelHandle) -> Bool {
        self.state.withLock { state in
            guard !state.cancelled else { return false }
            state.armed = (handle, handle.arm())
            return true
        }
    }

    /// Called on the pool thread after the body ran, before the connection is handed on.
    func detach() {
        let armed = self.state.withLock { state in
            defer { state.armed = nil }
            return state.armed
        }
        armed?.handle.disarm()
    }

    /// Called from the task's cancellation handler: sends a cancel request if a statement may be
    /// running. The request is a blocking round trip, so it goes to the pool's cancel thread (a
    /// pool already closed sends none: its statements are over).
    func cancel() {
        let armed = self.state.withLock { state in
            state.cancelled = true
            return state.armed
        }
        if let (handle, generation) = armed {
            thread.submit { state in
                if state == .active { handle.cancelIfArmed(generation: generation) }
            }
        }
    }
}
