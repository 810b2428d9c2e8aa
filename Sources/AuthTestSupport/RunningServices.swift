import Logging
import ServiceLifecycle

/// Runs `services` in a `ServiceGroup` for the length of `body` (started before, shut down
/// gracefully after, whether `body` returns or throws), as a process runs them.
public func withRunningServices<R>(
    _ services: [any Service],
    logger: Logger,
    _ body: () async throws -> R
) async throws -> R {
    let group = ServiceGroup(services: services, logger: logger)
    let task = Task { try await group.run() }
    return try await finishing(group, task, body)
}

/// `body`'s result, after shutting `group` (run by `task`) down gracefully either way.
func finishing<R>(
    _ group: ServiceGroup,
    _ task: Task<Void, any Error>,
    _ body: () async throws -> R
) async throws -> R {
    do {
        let result = try await body()
        await group.triggerGracefulShutdown()
        _ = await task.result
        return result
    } catch {
        await group.triggerGracefulShutdown()
        _ = await task.result
        throw error
    }
}
