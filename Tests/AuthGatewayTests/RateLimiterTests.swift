import Testing

@testable import AuthGateway

@Suite struct RateLimiterTests {
    let start = ContinuousClock.now

    @Test func allowsTheCapacityThenRefusesWithTheTimeToTheNextToken() {
        let limiter = RateLimiter(capacity: 3, per: .seconds(60))
        for _ in 0..<3 { #expect(limiter.acquire("a", now: start).allowed) }
        let refused = limiter.acquire("a", now: start)
        #expect(!refused.allowed)
        // One token comes back every 20 s.
        #expect(refused.retryAfterSeconds == 20)
        #expect(!limiter.acquire("a", now: start + .seconds(19)).allowed)
        #expect(limiter.acquire("a", now: start + .seconds(20)).allowed)
    }

    @Test func keysAreIndependent() {
        let limiter = RateLimiter(capacity: 1, per: .seconds(60))
        #expect(limiter.acquire("a", now: start).allowed)
        #expect(!limiter.acquire("a", now: start).allowed)
        #expect(limiter.acquire("b", now: start).allowed)
    }

    @Test func anIdleClientHasItsWholeBudgetBackButNoMore() {
        let limiter = RateLimiter(capacity: 2, per: .seconds(60))
        #expect(limiter.acquire("a", now: start).allowed)
        #expect(limiter.acquire("a", now: start).allowed)
        let later = start + .seconds(3600)
        #expect(limiter.acquire("a", now: later).allowed)
        #expect(limiter.acquire("a", now: later).allowed)
        #expect(!limiter.acquire("a", now: later).allowed)
    }

    @Test func retryAfterIsAtLeastOneSecond() {
        let limiter = RateLimiter(capacity: 1000, per: .seconds(1))
        for _ in 0..<1000 { _ = limiter.acquire("a", now: start) }
        let refused = limiter.acquire("a", now: start)
        #expect(!refused.allowed)
        #expect(refused.retryAfterSeconds == 1)
    }

    @Test func memoryIsBoundedAndTheLimitedClientsAreKept() {
        let limiter = RateLimiter(capacity: 1, per: .seconds(3600), maxKeys: 100)
        // The client being limited keeps knocking while 1,000 others pass by once each.
        #expect(limiter.acquire("attacker", now: start).allowed)
        for index in 0..<1000 {
            let now = start + .milliseconds(index)
            _ = limiter.acquire("client-\(index)", now: now)
            if index % 20 == 0 { #expect(!limiter.acquire("attacker", now: now).allowed) }
        }
        #expect(limiter.trackedKeys <= 100)
        #expect(!limiter.acquire("attacker", now: start + .seconds(2)).allowed)
    }
}
