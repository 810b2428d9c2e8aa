import Foundation
import Synchronization

/// One of the project's executables started as a real process for an end-to-end test.
/// Standard error is collected so a test can wait for a log line (e.g. the bound port).
public final class ServiceProcess: Sendable {
    public let name: String
    private let process: Process
    private let output = OutputBuffer()

    final class OutputBuffer: Sendable {
        private let text = Mutex("")
        func append(_ data: Data) { text.withLock { $0 += String(decoding: data, as: UTF8.self) } }
        var value: String { text.withLock { $0 } }
    }

    /// The folder holding the built executables: the one the test bundle runs from.
    public static var binaryDirectory: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    }

    /// Starts `executable` (a product name, e.g. "session") with `environment` added to this
    /// process's environment minus any inherited `AUTH_*` variables. With `unprivileged`, a
    /// test running as root starts it as the user `nobody` (via setpriv), as containers do, so
    /// nothing that needs root's privileges goes unnoticed.
    public init(executable: String, arguments: [String] = [], environment: [String: String], unprivileged: Bool = false) throws {
        self.name = executable
        let url = Self.binaryDirectory.appendingPathComponent(executable)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw ServiceProcessError(message: "\(url.path) is not built; run `swift build --build-tests` first")
        }
        let process = Process()
        if unprivileged && getuid() == 0 {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--inh-caps=-all", "--", url.path] + arguments
        } else {
            process.executableURL = url
            process.arguments = arguments
        }
        var merged = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("AUTH_") }
        merged.merge(environment) { $1 }
        process.environment = merged
        let pipe = Pipe()
        process.standardError = pipe
        process.standardOutput = pipe
        self.process = process
        let output = self.output
        pipe.fileHandleForReading.readabilityHandler = { @Sendable handle in
            let data = handle.availableData
            guard !data.isEmpty else {
                handle.readabilityHandler = nil
                return
            }
            output.append(data)
        }
        try process.run()
    }

    /// Everything the process wrote so far.
    public var log: String { output.value }

    public var isRunning: Bool { process.isRunning }

    /// Waits until the log matches `pattern` (a regular expression) and returns the first
    /// capture group (or the whole match).
    public func waitForLog(_ pattern: String, timeout: Duration = .seconds(30)) async throws -> String {
        let regex = try NSRegularExpression(pattern: pattern)
        let deadline = ContinuousClock.now + timeout
        var exitedAt: ContinuousClock.Instant?
        while ContinuousClock.now < deadline {
            let text = log
            if let match = regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) {
                let range = match.numberOfRanges > 1 ? match.range(at: 1) : match.range
                return String(text[Range(range, in: text)!])
            }
            // After the exit, give the pipe a moment to deliver the last output.
            if !process.isRunning {
                let exited = exitedAt ?? .now
                exitedAt = exited
                if ContinuousClock.now - exited > .seconds(1) { break }
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ServiceProcessError(message: "\(name) did not log /\(pattern)/ (running: \(process.isRunning)); log:\n\(log)")
    }

    /// The port a service logged as listening on (it logs `port=N` at start-up).
    public func listeningPort() async throws -> Int {
        let text = try await waitForLog(#"port=(\d+)[^\n]*RPC server listening"#)
        guard let port = Int(text) else { throw ServiceProcessError(message: "bad port \(text)") }
        return port
    }

    /// Waits for a process that ends by itself (a command-line tool, a refused start) and returns
    /// its exit status; nil when it still runs after `timeout`.
    public func exitStatus(timeout: Duration = .seconds(30)) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            guard ContinuousClock.now < deadline else { return nil }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return process.terminationStatus
    }

    /// SIGTERM, then waits for the exit; SIGKILL if it takes longer than `grace`.
    @discardableResult
    public func terminate(grace: Duration = .seconds(15)) async -> Int32 {
        if process.isRunning { process.terminate() }
        let deadline = ContinuousClock.now + grace
        while process.isRunning, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        return process.terminationStatus
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
        }
    }
}

public struct ServiceProcessError: Error, CustomStringConvertible {
    public let message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}
