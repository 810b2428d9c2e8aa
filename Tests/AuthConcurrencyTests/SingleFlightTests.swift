import AuthConcurrency
import Synchronization
import Testing

@Suite struct SingleFlightTests {
    final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    final class Stored: Sendable {
        let value = Mutex<Int?>(nil)
    }

    /// Callers that come while an operation runs share its result; the next one starts anew.
    @Test func callersShareTheOperationInFlight() async throws {
        let flight = SingleFlight<Int>()
        let calls = Counter()
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        let results = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<10 {
                group.addTask {
                    await flight.run {
                        let call = calls.value.add(1, ordering: .relaxed).newValue
                        for await _ in gate { break }
                        return call
                    }
                }
            }
            // Every caller waits on the one operation, which waits for the gate.
            while flight.waiting < 10 { await Task.yield() }
            open.yield()
            open.finish()
            return await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(calls.value.load(ordering: .relaxed) == 1)
        #expect(results == Array(repeating: 1, count: 10))
        #expect(!flight.isRunning)
        let next = await flight.run { calls.value.add(1, ordering: .relaxed).newValue }
        #expect(next == 2)
    }

    @Test func aFailureReachesItsCallerAndTheNextCallTriesAgain() async throws {
        struct Failed: Error {}
        let flight = SingleFlight<Int>()
        await #expect(throws: Failed.self) { try await flight.run { throw Failed() } }
        let again = try await flight.run { () async throws -> Int in 7 }
        #expect(again == 7)
    }

    /// After `forget()`, a caller starts a new operation while the old one still runs for its waiters.
    @Test func forgetLetsTheNextCallerStartAnew() async throws {
        let flight = SingleFlight<String>()
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        let started = Counter()
        let old = Task {
            await flight.run {
                started.value.add(1, ordering: .relaxed)
                for await _ in gate { break }
                return "old"
            }
        }
        while started.value.load(ordering: .relaxed) == 0 { await Task.yield() }
        flight.forget()
        let new = await flight.run { "new" }
        #expect(new == "new")
        open.yield()
        open.finish()
        let oldValue = await old.value
        #expect(oldValue == "old")
    }

    /// `reusing` is asked under the lock that starts operations: once an operation stored its
    /// value there, no later caller starts another, however its check and the end interleave.
    @Test func aValueStoredByTheOperationIsReusedByEveryLaterCaller() async throws {
        let flight = SingleFlight<Int>()
        let calls = Counter()
        let stored = Stored()
        let results = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<200 {
                group.addTask {
                    await flight.run(reusing: { stored.value.withLock { $0 } }) {
                        let call = calls.value.add(1, ordering: .relaxed).newValue
                        stored.value.withLock { $0 = call }
                        return call
                    }
                }
            }
            return await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(calls.value.load(ordering: .relaxed) == 1)
        #expect(Set(results) == [1])
        #expect(flight.waiting == 0)
    }
}
