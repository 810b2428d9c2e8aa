import Synchronization
import Testing

@testable import AuthGateway

/// Issue 19: `/health/ready` fanned out to the three services on every call.
@Suite struct ReadinessCacheTests {
    final class Probes: Sendable {
        let count = Atomic<Int>(0)
        let now = Mutex(ContinuousClock.now)
    }

    @Test func aFloodCostsOneProbeAndTheResultLivesOneSecond() async {
        let probes = Probes()
        let cache = ReadinessCache(maxAge: .seconds(1), now: { probes.now.withLock { $0 } }) {
            let number = probes.count.add(1, ordering: .relaxed).newValue
            return HealthReport(status: "SERVING", services: ["probe": "\(number)"])
        }
        // 200 callers at once: one probe, every caller gets its answer.
        let answers = await withTaskGroup(of: String.self) { group in
            for _ in 0..<200 { group.addTask { await cache.report().services["probe"] ?? "" } }
            var answers: [String] = []
            for await answer in group { answers.append(answer) }
            return answers
        }
        #expect(probes.count.load(ordering: .relaxed) == 1)
        #expect(Set(answers) == ["1"])
        // Still fresh just before a second has passed; probed again at a second.
        probes.now.withLock { $0 += .milliseconds(999) }
        #expect(await cache.report().services["probe"] == "1")
        probes.now.withLock { $0 += .milliseconds(1) }
        #expect(await cache.report().services["probe"] == "2")
        #expect(probes.count.load(ordering: .relaxed) == 2)
    }
}
