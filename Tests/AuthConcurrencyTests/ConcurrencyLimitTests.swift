import Synchronization
import Testing

@testable import AuthConcurrency

@Suite struct ConcurrencyLimitTests {
    @Test func neverMoreHoldersThanTheLimitAndEveryoneRuns() async {
        final class Counts: Sendable {
            let running = Atomic<Int>(0)
            let highest = Atomic<Int>(0)
            let finished = Atomic<Int>(0)
        }
        let limit = ConcurrencyLimit(limit: 3)
        let counts = Counts()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    await limit.withPermit {
                        let now = counts.running.add(1, ordering: .relaxed).newValue
                        counts.highest.max(now, ordering: .relaxed)
                        await Task.yield()
                        counts.running.subtract(1, ordering: .relaxed)
                        counts.finished.add(1, ordering: .relaxed)
                    }
                }
            }
        }
        #expect(counts.finished.load(ordering: .relaxed) == 50)
        #expect(counts.highest.load(ordering: .relaxed) <= 3)
        #expect(counts.highest.load(ordering: .relaxed) >= 1)
        #expect(limit.inUse == 0 && limit.waiting == 0)
    }

    @Test func aWaiterGetsThePermitWhenAHolderEnds() async {
        let limit = ConcurrencyLimit(limit: 1)
        let (holding, holder) = AsyncStream<Void>.makeStream()
        let (release, releaser) = AsyncStream<Void>.makeStream()
        let first = Task {
            await limit.withPermit {
                holder.yield()
                for await _ in release { break }
            }
        }
        for await _ in holding { break }
        #expect(limit.inUse == 1)
        let second = Task { await limit.withPermit { 2 } }
        while limit.waiting == 0 { await Task.yield() }
        #expect(limit.waiting == 1)
        releaser.yield()
        await first.value
        #expect(await second.value == 2)
        #expect(limit.inUse == 0)
    }

    @Test func aThrowingBodyGivesItsPermitBack() async {
        struct Failure: Error {}
        let limit = ConcurrencyLimit(limit: 1)
        await #expect(throws: Failure.self) { try await limit.withPermit { throw Failure() } }
        #expect(limit.inUse == 0)
        let value = await limit.withPermit { 1 }
        #expect(value == 1)
    }
}
