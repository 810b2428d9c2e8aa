import AuthBackoff

extension PostgresPool {
    /// The pool's bookkeeping, free of I/O: who holds a slot, which connections are idle, who
    /// waits. `PostgresPool` calls it under its lock and performs the returned actions after
    /// releasing the lock.
    ///
    /// A *slot* is the right to hold one connection; there are `maxConnections` of them. A lease
    /// is a slot plus either an idle connection or the duty to open a new one. Invariant:
    /// `idle.count + leased <= maxConnections`, and callers wait only when every slot is leased
    /// (so there is then no idle connection).
    ///
    /// Waiters give up at their deadline through one timer for the whole pool, not one per
    /// waiter: the machine says when to arm it (for the earliest deadline, only when none is
    /// armed for an earlier or equal one) and ``expireWaiters(timerDeadline:now:)`` says, when it
    /// fires, who timed out and when to arm it next. The pool computes every deadline as the
    /// clock read under its lock plus one fixed timeout, so deadlines never decrease along the
    /// queue and the first waiter's is the earliest.
    struct StateMachine<Connection, Waiter> {
        enum Lease {
            case existing(Connection)
            /// A free slot without a connection: the holder opens one.
            case new
        }

        enum AcquireAction {
            case lease(Lease)
            /// Queued; arm the pool's timer for `armTimer` when it is given.
            case wait(armTimer: ContinuousClock.Instant?)
            case fail(PostgresError)
        }

        struct ExpireAction {
            /// Waiters whose deadline has passed, removed from the queue, first come first.
            var expired: [Waiter] = []
            /// Arm the timer again for this deadline (the next waiter's).
            var armTimer: ContinuousClock.Instant?
        }

        struct ReleaseAction {
            /// A waiter to resume with the released slot.
            var resume: (waiter: Waiter, lease: Lease)?
            /// A connection to close (the pool is closed).
            var close: Connection?
            /// The pool is closed and the last lease came back.
            var drained = false
        }

        struct CloseAction {
            var waiters: [Waiter] = []
            var connections: [Connection] = []
            var drained: Bool
        }

        let maxConnections: Int
        private(set) var idle: [Connection] = []
        private(set) var leased = 0
        private var waiters: [(id: Int, waiter: Waiter, deadline: ContinuousClock.Instant)] = []
        /// The deadline the pool's timer is armed for, if it is armed.
        private(set) var timerDeadline: ContinuousClock.Instant?
        private(set) var isClosed = false

        init(maxConnections: Int) {
            precondition(maxConnections > 0, "a pool needs at least one connection")
            self.maxConnections = maxConnections
        }

        var waiting: Int { self.waiters.count }

        /// A caller wants a connection. When it must wait it is queued (first come, first served)
        /// until `deadline`.
        mutating func acquire(id: Int, waiter: Waiter, deadline: ContinuousClock.Instant) -> AcquireAction {
            if self.isClosed { return .fail(PostgresError.poolClosed) }
            if self.leased < self.maxConnections {
                self.leased += 1
                // Most recently used first: keeps a warm set and lets surplus idle ones age.
                if let connection = self.idle.popLast() { return .lease(.existing(connection)) }
                return .lease(.new)
            }
            self.waiters.append((id, waiter, deadline))
            if let armed = self.timerDeadline, armed <= deadline { return .wait(armTimer: nil) }
            self.timerDeadline = deadline
            return .wait(armTimer: deadline)
        }

        /// The timer armed for `fired` went off at `now`: the waiters whose deadline has passed
        /// leave the queue, and the timer is armed again for the next waiter's deadline (unless
        /// a timer for an earlier or equal one is still armed).
        mutating func expireWaiters(
            timerDeadline fired: ContinuousClock.Instant,
            now: ContinuousClock.Instant
        ) -> ExpireAction {
            if self.timerDeadline == fired { self.timerDeadline = nil }
            var action = ExpireAction()
            let due = self.waiters.prefix { $0.deadline <= now }.count
            if due > 0 {
                action.expired = self.waiters[..<due].map(\.waiter)
                self.waiters.removeFirst(due)
            }
            guard !self.isClosed, let next = self.waiters.first?.deadline else { return action }
            if let armed = self.timerDeadline, armed <= next { return action }
            self.timerDeadline = next
            action.armTimer = next
            return action
        }

        /// A lease ends, with its connection when that is still usable (`nil` when it was broken
        /// and closed, or never opened).
        mutating func release(_ connection: Connection?) -> ReleaseAction {
            precondition(self.leased > 0, "release without a lease")
            if self.isClosed {
                self.leased -= 1
                return ReleaseAction(close: connection, drained: self.leased == 0)
            }
            if !self.waiters.isEmpty {
                // The slot goes straight to the first waiter; `leased` does not change.
                let waiter = self.waiters.removeFirst().waiter
                return ReleaseAction(resume: (waiter, connection.map(Lease.existing) ?? .new))
            }
            self.leased -= 1
            if let connection { self.idle.append(connection) }
            return ReleaseAction()
        }

        /// Leases the free slots needed for `minimum` open connections (idle or leased) when
        /// nobody waits, each with the duty to open a connection and release it. Returns how many.
        mutating func leaseSlotsToOpen(minimum: Int) -> Int {
            guard !self.isClosed, self.waiters.isEmpty else { return 0 }
            let missing = Swift.min(minimum, self.maxConnections) - (self.idle.count + self.leased)
            guard missing > 0 else { return 0 }
            self.leased += missing
            return missing
        }

        /// Leases every idle connection, to be checked and released again (healthy) or with
        /// `nil` (closed): one the server closed while it sat idle would otherwise count toward
        /// the minimum until a call found it.
        mutating func leaseIdleToCheck() -> [Connection] {
            guard !self.isClosed else { return [] }
            let connections = self.idle
            self.idle.removeAll()
            self.leased += connections.count
            return connections
        }

        /// A waiter gave up (timeout, cancellation). Returns it when it was still waiting.
        mutating func removeWaiter(id: Int) -> Waiter? {
            guard let index = self.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return self.waiters.remove(at: index).waiter
        }

        /// Closes the pool: waiters fail, idle connections close, leases close theirs on return.
        mutating func close() -> CloseAction {
            self.isClosed = true
            let action = CloseAction(
                waiters: self.waiters.map(\.waiter),
                connections: self.idle,
                drained: self.leased == 0
            )
            self.waiters.removeAll()
            self.idle.removeAll()
            self.timerDeadline = nil
            return action
        }
    }

    /// When the next connection attempt may be made after failures: exponential backoff with
    /// jitter, reset by a success.
    struct ReconnectBackoff {
        private(set) var failures = 0
        private(set) var notBefore: ContinuousClock.Instant?

        /// How long until an attempt is allowed, or `nil` when it is allowed now.
        func remaining(now: ContinuousClock.Instant) -> Duration? {
            guard let notBefore, now < notBefore else { return nil }
            return notBefore - now
        }

        mutating func recordFailure(now: ContinuousClock.Instant, backoff: ExponentialBackoff) {
            self.failures += 1
            self.notBefore = now + backoff.delay(afterFailures: self.failures)
        }

        mutating func recordSuccess() {
            self.failures = 0
            self.notBefore = nil
        }
    }
}
