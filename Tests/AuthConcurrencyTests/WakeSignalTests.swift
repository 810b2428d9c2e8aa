import AuthConcurrency
import Testing

/// The dispatcher's wake-ups: one worker per outbox notification, all of them for a sweep, and
/// no wake lost between a worker's empty claim and its wait.
@Suite struct WakeSignalTests {
    /// Waits until `count` callers wait on `signal` (they are started as tasks).
    private func waitUntilWaiting(_ signal: WakeSignal, _ count: Int) async {
        while signal.waiting < count { await Task.yield() }
    }

    @Test func wakeOneResumesASingleWaiter() async {
        let signal = WakeSignal(maximumPendingWakes: 4)
        var reasons: [WakeSignal.Reason] = []
        await withTaskGroup(of: WakeSignal.Reason.self) { group in
            let seen = signal.generation
            for _ in 0..<3 {
                group.addTask { await signal.wait(past: seen) }
            }
            await waitUntilWaiting(signal, 3)
            signal.wakeOne()
            if let reason = await group.next() { reasons.append(reason) }
            // The other two still wait (a resumed waiter leaves the list before it resumes).
            #expect(signal.waiting == 2)
            signal.wake()
            while let reason = await group.next() { reasons.append(reason) }
        }
        #expect(reasons == [.one, .all, .all])
        #expect(signal.waiting == 0)
    }

    /// A wakeOne with nobody waiting (a notification while every worker claims or sends) is
    /// kept for the next wait, at most `maximumPendingWakes` of them.
    @Test func aWakeOneWithoutWaitersIsKeptUpToTheLimit() async {
        let signal = WakeSignal(maximumPendingWakes: 2)
        for _ in 0..<5 { signal.wakeOne() }
        let seen = signal.generation
        #expect(await signal.wait(past: seen) == .one)  // the first kept wake
        #expect(await signal.wait(past: seen) == .one)  // the second
        await withTaskGroup(of: WakeSignal.Reason.self) { group in
            group.addTask { await signal.wait(past: seen) }
            await waitUntilWaiting(signal, 1)  // the other three were not kept: it waits
            signal.wakeOne()
            #expect(await group.next() == .one)
        }
        #expect(signal.waiting == 0)
    }

    @Test func wakeMovesTheGenerationSoALaterWaitReturnsAtOnce() async {
        let signal = WakeSignal()
        let seen = signal.generation
        signal.wake()
        #expect(signal.generation != seen)
        #expect(await signal.wait(past: seen) == .all)
        #expect(signal.waiting == 0)
    }
}
