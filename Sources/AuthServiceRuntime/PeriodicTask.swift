import Logging
import ServiceLifecycle

/// Runs `work` every `interval` until graceful shutdown: a sampler of gauges, say. A failed
/// run is logged (`warning`) and the next one comes at the next interval.
public struct PeriodicTask: Service {
    let name: String
    let interval: Duration
    let clock: any Clock<Duration>
    let logger: Logger
    let work: @Sendable () async throws -> Void

    /// - Parameter clock: what the interval is slept on; tests pass one they advance by hand.
    public init(
        name: String,
        every interval: Duration,
        clock: any Clock<Duration> = ContinuousClock(),
        logger: Logger,
        work: @escaping @Sendable () async throws -> Void
    ) {
        self.name = name
        self.interval = interval
        self.clock = clock
        self.logger = logger
        self.work = work
    }

    public func run() async throws {
        try? await cancelWhenGracefulShutdown { () async throws -> Void in
            while true {
                do {
                    try await work()
                } catch is CancellationError {
                    return
                } catch {
                    logger.warning("\(name) failed; trying again next interval", metadata: ["error": "\(error)"])
                }
                try await clock.sleep(for: interval)
            }
        }
    }
}
