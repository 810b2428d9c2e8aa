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
            ])
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
        var generator = SplitMix64(seed: 42)
        var seen: Set<Bool> = []
        for _ in 0..<1_000 {
            let delay = backoff.delay(afterFailures: 2, using: &generator)
            #expect(delay >= .milliseconds(100) && delay <= .milliseconds(300))
            seen.insert(delay > .milliseconds(200))
        }
        #expect(seen == [true, false], "the jitter spreads on both sides of the step")
    }
}

/// A small deterministic generator, so the test's draws are the same every run.
private struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { self.state = seed }
    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
