import AuthConcurrency

/// `/health/ready`'s answer, kept for `maxAge` (issue 19: every call fanned out to the three
/// services and their databases, so a flood of it was a flood on them). One probe runs at a
/// time: callers that arrive while it runs wait for its result instead of starting their own.
actor ReadinessCache {
    private let maxAge: Duration
    private let now: @Sendable () -> ContinuousClock.Instant
    private let probe: @Sendable () async -> HealthReport
    private var last: (report: HealthReport, at: ContinuousClock.Instant)?
    private let probes = SingleFlight<HealthReport>()

    init(
        maxAge: Duration,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now },
        probe: @escaping @Sendable () async -> HealthReport
    ) {
        self.maxAge = maxAge
        self.now = now
        self.probe = probe
    }

    func report() async -> HealthReport {
        if let last, now() - last.at < maxAge { return last.report }
        let report = await probes.run(probe)
        last = (report, now())
        return report
    }
}
