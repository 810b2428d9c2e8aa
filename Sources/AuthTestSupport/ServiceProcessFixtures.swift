import Testing

/// What a process that ran to its end left: its exit status (nil when it still ran at the
/// deadline and was stopped) and everything it wrote.
public struct FinishedProcess: Sendable {
    public let status: Int32?
    public let log: String
}

extension ServiceProcess {
    /// Runs `executable` until it exits by itself (a refused start, an authctl command) and
    /// returns its status and output. One that still runs after `timeout` is stopped (SIGTERM,
    /// then SIGKILL) and answers a nil status, so no test leaves it behind.
    public static func run(
        _ executable: String,
        arguments: [String] = [],
        environment: [String: String],
        unprivileged: Bool = false,
        timeout: Duration = .seconds(30)
    ) async throws -> FinishedProcess {
        let process = try ServiceProcess(
            executable: executable,
            arguments: arguments,
            environment: environment,
            unprivileged: unprivileged
        )
        let status = await process.waitForExit(timeout: timeout)
        if status == nil { await process.terminate() }
        return FinishedProcess(status: status, log: process.log)
    }
}

/// Starts the service `executable`, waits until it listens, runs `body` with the process and
/// its RPC port, then stops it (SIGTERM) whether `body` returned or threw, and records an issue
/// unless it stopped with status 0 (a clean shutdown is part of every such test).
public func withServiceProcess<Result>(
    _ executable: String,
    arguments: [String] = [],
    environment: [String: String],
    unprivileged: Bool = false,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: (ServiceProcess, Int) async throws -> Result
) async throws -> Result {
    let process = try ServiceProcess(
        executable: executable,
        arguments: arguments,
        environment: environment,
        unprivileged: unprivileged
    )
    let result: Result
    do {
        result = try await body(process, try await process.listeningPort())
    } catch {
        await process.terminate()
        throw error
    }
    let status = await process.terminate()
    #expect(
        status == 0,
        "\(executable) stopped with status \(status); log:\n\(process.log)",
        sourceLocation: sourceLocation
    )
    return result
}
