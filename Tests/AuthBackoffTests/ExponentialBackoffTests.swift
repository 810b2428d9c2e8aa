import AuthBackoff
import Testing

@Suite("ExponentialBackoff")
struct ExponentialBackoffTests {
    @Test func doublesUpToTheLimit() {
        let backoff = ExponentialBackoff(initial: .milliseconds(100), limit: .seconds(2))
        let steps = (0...8).map { backoff.step(afterFailures: $0) }
        #expect(
            steps == [
                .milliseconds(100), .milliseconds(100), .milliseconds(200), .milliseconds(400),
                .milliseconds(800), .milliseconds(1600), .seconds(2), .seconds(2), .seconds(2),
            ]
        )
    }

    @Test func neverOverflows() {
        let backoff = ExponentialBackoff(initial: .seconds(1), limit: .seconds(Int64.max / 4))
        #expect(backoff.step(afterFailures: Int.max) == .seconds(Int64.max / 4))
        let tiny = ExponentialBackoff(initial: .nanoseconds(1), limit: .seconds(60))
        #expect(tiny.step(afterFailures: 1_000) == .seconds(60))
    }

    @Test func limitBelowInitialWins() {
        let backoff = ExponentialBackoff(initial: .seconds(5), limit: .seconds(1))
        #expect(backoff.step(afterFailures: 1) == .seconds(1))
        #expect(backoff.step(afterFailures: 3) == .seconds(1))
    }

    @Test func jitterStaysInItsRange() {
        let backoff = ExponentialBackoff(initial: .milliseconds(100), limit: .seconds(1), jitter: 0.5...1.5)
        // Any draws must stay in range; 1,000 draws all on one side of the middle would have a
        // chance of 2 · 2⁻¹⁰⁰⁰.
        var seen: Set<Bool> = []
        for _ in 0..<1_000 {
            let delay = backoff.delay(afterFailures: 2)
            #expect(delay >= .milliseconds(100) && delay <= .milliseconds(300))
            seen.insert(delay > .milliseconds(200))
        }
        #expect(seen == [true, false], "the jitter spreads on both sides of the step")
    }
}
