import AuthBackoff
import Testing

@testable import AuthPostgres

/// The pool's bookkeeping without any database: connections and waiters are plain values.
@Suite("PostgresPool.StateMachine")
struct PostgresPoolStateMachineTests {
    typealias Machine = PostgresPool.StateMachine<String, String>
    /// A deadline none of the tests reaches.
    static let later = ContinuousClock.now + .seconds(3600)

    @Test func leasesUpToTheBoundThenQueues() {
        var machine = Machine(maxConnections: 2)
        guard case .lease(.new) = machine.acquire(id: 1, waiter: "a", deadline: Self.later) else {
            Issue.record("expected a new slot")
            return
        }
        guard case .lease(.new) = machine.acquire(id: 2, waiter: "b", deadline: Self.later) else {
            Issue.record("expected a new slot")
            return
        }
        guard case .wait = machine.acquire(id: 3, waiter: "c", deadline: Self.later) else {
            Issue.record("expected to wait")
            return
        }
        guard case .wait = machine.acquire(id: 4, waiter: "d", deadline: Self.later) else {
            Issue.record("expected to wait")
            return
        }
        #expect(machine.leased == 2)
        #expect(machine.waiting == 2)

        // A released connection goes straight to the first waiter.
        let first = machine.release("conn1")
        #expect(first.resume?.waiter == "c")
        if case .existing(let connection)? = first.resume?.lease {
            #expect(connection == "conn1")
        } else {
            Issue.record()
        }
        // A broken one is replaced by the duty to open a new one.
        let second = machine.release(nil)
        #expect(second.resume?.waiter == "d")
        if case .new? = second.resume?.lease {} else { Issue.record("expected a new slot") }
        #expect(machine.leased == 2)
        #expect(machine.waiting == 0)

        // With nobody waiting, connections become idle and are reused, most recent first.
        _ = machine.release("conn1")
        _ = machine.release("conn2")
        #expect(machine.idle == ["conn1", "conn2"])
        guard case .lease(.existing("conn2")) = machine.acquire(id: 5, waiter: "e", deadline: Self.later) else {
            Issue.record()
            return
        }
        #expect(machine.leased == 1)
        #expect(machine.idle.count + machine.leased <= machine.maxConnections)
    }

    @Test func waiterCanLeave() {
        var machine = Machine(maxConnections: 1)
        _ = machine.acquire(id: 1, waiter: "a", deadline: Self.later)
        _ = machine.acquire(id: 2, waiter: "b", deadline: Self.later)
        _ = machine.acquire(id: 3, waiter: "c", deadline: Self.later)
        #expect(machine.removeWaiter(id: 2) == "b")
        #expect(machine.removeWaiter(id: 2) == nil)
        #expect(machine.release("conn").resume?.waiter == "c")
    }

    @Test func oneTimerForAllWaitersArmedForTheEarliestDeadline() {
        var machine = Machine(maxConnections: 1)
        let start = ContinuousClock.now
        _ = machine.acquire(id: 1, waiter: "a", deadline: start + .seconds(1))
        // The first waiter arms the timer; later ones, with later deadlines, do not.
        guard
            case .wait(armTimer: start + .seconds(2)) = machine.acquire(
                id: 2,
                waiter: "b",
                deadline: start + .seconds(2)
            )
        else {
            Issue.record("the first waiter arms the timer")
            return
        }
        guard case .wait(armTimer: nil) = machine.acquire(id: 3, waiter: "c", deadline: start + .seconds(3)) else {
            Issue.record("a later deadline does not arm another timer")
            return
        }
        guard case .wait(armTimer: nil) = machine.acquire(id: 4, waiter: "d", deadline: start + .seconds(4)) else {
            Issue.record("a later deadline does not arm another timer")
            return
        }
        #expect(machine.timerDeadline == start + .seconds(2))
        // "b" got a connection before its deadline; the timer fires for nobody and moves on to "c".
        #expect(machine.release("conn").resume?.waiter == "b")
        let first = machine.expireWaiters(timerDeadline: start + .seconds(2), now: start + .seconds(2))
        #expect(first.expired.isEmpty)
        #expect(first.armTimer == start + .seconds(3))
        #expect(machine.timerDeadline == start + .seconds(3))
        // Fired late, past both remaining deadlines: both expire in queue order, no timer is left.
        let second = machine.expireWaiters(timerDeadline: start + .seconds(3), now: start + .seconds(5))
        #expect(second.expired == ["c", "d"])
        #expect(second.armTimer == nil)
        #expect(machine.timerDeadline == nil)
        #expect(machine.waiting == 0)
        // The next waiter arms it again.
        guard
            case .wait(armTimer: start + .seconds(6)) = machine.acquire(
                id: 5,
                waiter: "e",
                deadline: start + .seconds(6)
            )
        else {
            Issue.record("with no timer armed, a waiter arms one")
            return
        }
    }

    @Test func timerSkipsALeftWaiterAndStopsOnceClosed() {
        var machine = Machine(maxConnections: 1)
        let start = ContinuousClock.now
        _ = machine.acquire(id: 1, waiter: "a", deadline: start)
        _ = machine.acquire(id: 2, waiter: "b", deadline: start + .seconds(1))
        _ = machine.acquire(id: 3, waiter: "c", deadline: start + .seconds(2))
        #expect(machine.removeWaiter(id: 2) == "b")  // cancelled
        let fired = machine.expireWaiters(timerDeadline: start + .seconds(1), now: start + .seconds(1))
        #expect(fired.expired.isEmpty)
        #expect(fired.armTimer == start + .seconds(2))
        let close = machine.close()
        #expect(close.waiters == ["c"])
        #expect(machine.timerDeadline == nil)
        // A timer that fires after the close finds nobody and is not armed again.
        let late = machine.expireWaiters(timerDeadline: start + .seconds(2), now: start + .seconds(2))
        #expect(late.expired.isEmpty)
        #expect(late.armTimer == nil)
    }

    /// The idle check leases every idle connection; those that come back broken (`nil`) free
    /// their slots, which the minimum then opens again.
    @Test func idleConnectionsLeasedForTheCheckComeBackOrFreeTheirSlots() {
        var machine = Machine(maxConnections: 4)
        #expect(machine.leaseSlotsToOpen(minimum: 3) == 3)
        for connection in ["conn1", "conn2", "conn3"] { _ = machine.release(connection) }
        let checked = machine.leaseIdleToCheck()
        #expect(checked == ["conn1", "conn2", "conn3"])
        #expect(machine.idle.isEmpty)
        #expect(machine.leased == 3)
        // While they are checked they count as open.
        #expect(machine.leaseSlotsToOpen(minimum: 3) == 0)
        _ = machine.release("conn1")
        _ = machine.release(nil)
        _ = machine.release(nil)
        #expect(machine.idle == ["conn1"])
        #expect(machine.leased == 0)
        #expect(machine.leaseSlotsToOpen(minimum: 3) == 2)
        // A closed pool checks nothing.
        _ = machine.close()
        #expect(machine.leaseIdleToCheck().isEmpty)
    }

    @Test func slotsToOpenFillUpToTheMinimumCountingIdleAndLeased() {
        var machine = Machine(maxConnections: 4)
        #expect(machine.leaseSlotsToOpen(minimum: 3) == 3)
        #expect(machine.leased == 3)
        // Nothing more while those three are being opened.
        #expect(machine.leaseSlotsToOpen(minimum: 3) == 0)
        _ = machine.release("conn1")
        _ = machine.release("conn2")
        _ = machine.release(nil)  // one could not be opened
        #expect(machine.idle == ["conn1", "conn2"])
        #expect(machine.leased == 0)
        #expect(machine.leaseSlotsToOpen(minimum: 3) == 1)
        _ = machine.release("conn3")
        // A connection in use counts as open.
        guard case .lease(.existing("conn3")) = machine.acquire(id: 1, waiter: "a", deadline: Self.later) else {
            Issue.record("expected the most recent idle connection")
            return
        }
        #expect(machine.leaseSlotsToOpen(minimum: 3) == 0)
        // Never past the bound.
        #expect(machine.leaseSlotsToOpen(minimum: 9) == 1)
        #expect(machine.idle.count + machine.leased == machine.maxConnections)
    }

    @Test func noSlotsToOpenWhileCallersWaitOrOnceClosed() {
        var machine = Machine(maxConnections: 1)
        _ = machine.acquire(id: 1, waiter: "a", deadline: Self.later)
        guard case .wait = machine.acquire(id: 2, waiter: "b", deadline: Self.later) else {
            Issue.record("expected to wait")
            return
        }
        #expect(machine.leaseSlotsToOpen(minimum: 1) == 0)
        var closed = Machine(maxConnections: 2)
        _ = closed.close()
        #expect(closed.leaseSlotsToOpen(minimum: 2) == 0)
        #expect(closed.leased == 0)
    }

    @Test func closeFailsWaitersAndDrainsLeases() {
        var machine = Machine(maxConnections: 2)
        _ = machine.acquire(id: 1, waiter: "a", deadline: Self.later)
        _ = machine.release("idle")
        _ = machine.acquire(id: 2, waiter: "b", deadline: Self.later)  // takes "idle"
        _ = machine.acquire(id: 3, waiter: "c", deadline: Self.later)  // new
        _ = machine.acquire(id: 4, waiter: "d", deadline: Self.later)  // waits
        let close = machine.close()
        #expect(close.waiters == ["d"])
        #expect(close.connections.isEmpty)
        #expect(!close.drained)
        if case .fail(let error) = machine.acquire(id: 5, waiter: "e", deadline: Self.later) {
            #expect(error.code == .closed)
        } else {
            Issue.record("a closed pool must refuse")
        }
        let first = machine.release("idle")
        #expect(first.close == "idle")
        #expect(!first.drained)
        let last = machine.release(nil)
        #expect(last.drained)
    }

    @Test func backoffGrowsAndResets() {
        var backoff = PostgresPool.ReconnectBackoff()
        let rule = ExponentialBackoff(initial: .milliseconds(100), limit: .seconds(1))
        let now = ContinuousClock.now
        #expect(backoff.remaining(now: now) == nil)
        backoff.recordFailure(now: now, backoff: rule)
        #expect(backoff.remaining(now: now) == .milliseconds(100))
        backoff.recordFailure(now: now, backoff: rule)
        #expect(backoff.remaining(now: now) == .milliseconds(200))
        for _ in 0..<10 { backoff.recordFailure(now: now, backoff: rule) }
        #expect(backoff.remaining(now: now) == .seconds(1))
        #expect(backoff.remaining(now: now + .seconds(2)) == nil)
        backoff.recordSuccess()
        #expect(backoff.remaining(now: now) == nil)
        #expect(backoff.failures == 0)
    }
}
