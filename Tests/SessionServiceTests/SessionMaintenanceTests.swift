import AuthPostgres
import AuthTestSupport
import Foundation
import Synchronization
import Testing

@testable import SessionService

/// The scheduled clean-up of dead sessions: its interval (on an injected clock, no sleeping)
/// and one replica at a time.
@Suite struct SessionMaintenanceTests {
    /// Collects the outcome of each clean-up and lets the test wait for the n-th.
    final class Sweeps: Sendable {
        private let state = Mutex<(results: [Int], waiters: [(Int, CheckedContinuation<[Int], Never>)])>(([], []))

        func record(_ result: Result<SessionService.DeadSessionSweep, any Error>) {
            let deleted = (try? result.get().deleted) ?? -1
            let ready = state.withLock { state -> [(CheckedContinuation<[Int], Never>, [Int])] in
                state.results.append(deleted)
                let results = state.results
                let ready = state.waiters.filter { $0.0 <= results.count }.map { ($0.1, results) }
                state.waiters.removeAll { $0.0 <= results.count }
                return ready
            }
            for (continuation, results) in ready { continuation.resume(returning: results) }
        }

        var results: [Int] { state.withLock { $0.results } }

        /// The results once there are `count` of them.
        func wait(for count: Int) async -> [Int] {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state -> [Int]? in
                    if state.results.count >= count { return state.results }
                    state.waiters.append((count, continuation))
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        }
    }

    @Test func deletesDeadSessionsOncePerInterval() async throws {
        try await withSessionService(configure: {
            $0.deadSessionSweepInterval = .seconds(3_600)
            $0.deadSessionRetention = .seconds(86_400)
        }) { fixture in
            let first = try await fixture.issue()
            _ = try await fixture.client.revoke(.init(sessionID: first.sessionID))
            let live = try await fixture.issue()
            fixture.clock.advance(by: .seconds(86_400 + 1))  // `first` is past its retention

            let sleepClock = TestSleepClock()
            let sweeps = Sweeps()
            let maintenance = SessionMaintenance(
                service: fixture.service,
                clock: sleepClock,
                logger: testLogger,
                observer: { sweeps.record($0) }
            )
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await maintenance.run() }

                // Nothing happens before the first interval has passed.
                await sleepClock.waitForSleeps(1)
                sleepClock.advance(by: .seconds(3_599))
                #expect(sweeps.results.isEmpty)
                #expect(try await fixture.query("SELECT count(*) FROM @sessions")[0][0].int == 2)

                sleepClock.advance(by: .seconds(1))
                #expect(await sweeps.wait(for: 1) == [1])
                #expect(
                    try await fixture.query("SELECT id::text FROM @sessions").map { try $0[0].string } == [
                        live.sessionID
                    ]
                )

                // The next interval: `live` is revoked and past its retention by then.
                await sleepClock.waitForSleeps(2)
                _ = try await fixture.client.revoke(.init(sessionID: live.sessionID))
                fixture.clock.advance(by: .seconds(86_400 + 1))
                sleepClock.advance(by: .seconds(3_600))
                #expect(await sweeps.wait(for: 2) == [1, 1])
                #expect(try await fixture.query("SELECT count(*) FROM @sessions")[0][0].int == 0)

                // Cancelling (graceful shutdown cancels it the same way) ends the service.
                await sleepClock.waitForSleeps(3)
                group.cancelAll()
                try await group.waitForAll()
            }
            #expect(sweeps.results == [1, 1])
        }
    }

    /// While another replica holds the clean-up's lock, a clean-up deletes nothing and says so;
    /// once the lock is free it deletes.
    @Test func oneReplicaAtATime() async throws {
        try await withSessionService { fixture in
            let dead = try await fixture.issue()
            _ = try await fixture.client.revoke(.init(sessionID: dead.sessionID))
            fixture.clock.advance(by: .seconds(8 * 86_400))
            let lockName = SessionStore.cleanupLockName(schema: fixture.schema)

            // "Another replica": a session-level lock on a one-connection pool of its own.
            try await PostgresTestDatabase.withTestSchema(maxConnections: 1, logger: testLogger) { other, _ in
                try await other.query("SELECT pg_advisory_lock(hashtextextended($1, 0))", [.text(lockName)])
                let (replica, _) = try await fixture.replica()
                let blocked = try await replica.sweepDeadSessions(retention: .seconds(7 * 86_400))
                #expect(blocked == SessionService.DeadSessionSweep(deleted: 0, lockedOut: true))
                #expect(try await fixture.query("SELECT count(*) FROM @sessions")[0][0].int == 1)
                let unlocked = try await other.query(
                    "SELECT pg_advisory_unlock(hashtextextended($1, 0))",
                    [.text(lockName)]
                )
                #expect(try unlocked[0][0].bool)
                let done = try await replica.sweepDeadSessions(retention: .seconds(7 * 86_400))
                #expect(done == SessionService.DeadSessionSweep(deleted: 1, lockedOut: false))
            }
            #expect(try await fixture.query("SELECT count(*) FROM @sessions")[0][0].int == 0)
        }
    }

    /// Several batches: each takes the lock again, and all dead sessions go.
    @Test func deletesInBatches() async throws {
        try await withSessionService { fixture in
            for _ in 0..<5 {
                let pair = try await fixture.issue()
                _ = try await fixture.client.revoke(.init(sessionID: pair.sessionID))
            }
            fixture.clock.advance(by: .seconds(8 * 86_400))
            let sweep = try await fixture.service.sweepDeadSessions(retention: .seconds(7 * 86_400), batch: 2)
            #expect(sweep == SessionService.DeadSessionSweep(deleted: 5, lockedOut: false))
        }
    }
}
