import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One of the project's executables started as a real process for an end-to-end test.
/// Standard error is collected so a test can wait for a log line (e.g. the bound port).
public final class ServiceProcess: Sendable {
    public let name: String
    private let process: Process
    private let output = OutputBuffer()
    /// The exit status, once known (see ``hasExited``).
    private let reapedStatus = Mutex<Int32?>(nil)
    /// The folder of an unprivileged copy (``installForNobody(_:)``), removed with the process.
    private let copyFolder = Mutex<URL?>(nil)

    final class OutputBuffer: Sendable {
        private let state = Mutex((text: "", ended: false))
        func append(_ data: Data) { state.withLock { $0.text += String(decoding: data, as: UTF8.self) } }
        /// The reader saw end of stream: every byte the process wrote is in `value`.
        func end() { state.withLock { $0.ended = true } }
        var value: String { state.withLock { $0.text } }
        var ended: Bool { state.withLock { $0.ended } }
    }

    /// The folder holding the built executables: the one the test bundle runs from.
    public static var binaryDirectory: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    }

    /// Starts `executable` (a product name, e.g. "session") with `environment` added to this
    /// process's environment minus any inherited `AUTH_*` variables. With `unprivileged`, a
    /// test running as root starts it as the user `nobody` (via setpriv), as containers do, so
    /// nothing that needs root's privileges goes unnoticed.
    public convenience init(
        executable: String,
        arguments: [String] = [],
        environment: [String: String],
        unprivileged: Bool = false
    ) throws {
        let url = Self.binaryDirectory.appendingPathComponent(executable)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw ServiceProcessError(message: "\(url.path) is not built; run `swift build --build-tests` first")
        }
        if unprivileged && getuid() == 0 {
            let installed = try Self.installForNobody(executable)
            try self.init(
                name: executable,
                executableURL: URL(fileURLWithPath: "/usr/bin/setpriv"),
                arguments: [
                    "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--inh-caps=-all", "--", installed.path,
                ] + arguments,
                environment: environment
            )
            copyFolder.withLock { $0 = installed.deletingLastPathComponent() }
        } else {
            try self.init(name: executable, executableURL: url, arguments: arguments, environment: environment)
        }
    }

    /// A copy of `executable` in a new folder that `nobody` can reach, as in the container
    /// image: the checkout may sit below a folder only root may enter (a `mktemp -d` clone is
    /// 0700). The services carry their resources (migrations, the password blocklist, the OpenAPI
    /// document) inside the executable, so the executable is all they need.
    static func installForNobody(_ executable: String) throws -> URL {
        let files = FileManager.default
        let folder = files.temporaryDirectory.appendingPathComponent("auth-unprivileged-\(UUID().uuidString)")
        try files.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let installed = folder.appendingPathComponent(executable)
        // Copied by a child process (`install`, runnable by everyone whatever the umask), not
        // in this one: a file this process holds open for writing is inherited by every child
        // another test thread forks meanwhile, until that child execs, and executing the copy
        // then fails with ETXTBSY ("Text file busy": seen in CI under load). The writing
        // descriptor lives only in `install`, which forks nothing.
        let install = Process()
        install.executableURL = URL(fileURLWithPath: "/usr/bin/install")
        install.arguments = ["-m", "0755", binaryDirectory.appendingPathComponent(executable).path, installed.path]
        try install.run()
        install.waitUntilExit()
        guard install.terminationStatus == 0 else {
            throw ServiceProcessError(
                message: "install of \(executable) into \(folder.path) failed: status \(install.terminationStatus)"
            )
        }
        return installed
    }

    /// Starts any program (e.g. `/usr/sbin/pgbouncer`), called `name` in errors, the same way.
    public init(name: String, executableURL: URL, arguments: [String], environment: [String: String]) throws {
        self.name = name
        let process = Process()
        process.executableURL = executableURL
        process.arguments = arguments
        var merged = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("AUTH_") }
        merged.merge(environment) { $1 }
        process.environment = merged
        let sockets = try Self.outputSocketPair()
        process.standardError = sockets.write
        process.standardOutput = sockets.write
        self.process = process
        // Read on a thread of its own with blocking reads, not with `readabilityHandler`:
        // libdispatch's epoll bookkeeping on Linux can be corrupted by read sources being set up
        // and torn down concurrently (swift-corelibs-libdispatch issue 949), which crashes or
        // silences other sources in the test process.
        let output = self.output
        let reader = sockets.read
        let thread = Thread {
            while true {
                let data = reader.availableData
                if data.isEmpty { break }
                output.append(data)
            }
            output.end()
            try? reader.close()
        }
        thread.name = "ServiceProcess output"
        try process.run()
        // The child has its copy of the write end; ours must go, or the reader never sees EOF.
        try? sockets.write.close()
        thread.start()
    }

    /// The channel of the process's output: a connected pair of Unix sockets whose two ends
    /// are close-on-exec from their creation (`SOCK_CLOEXEC`; `pipe2`, which could do the same
    /// for a pipe, is not in Swift's Glibc module). The child gets the write end as its standard
    /// output and error through `dup2`, which clears the flag on the copy, and no other program
    /// does. Foundation's `Pipe` leaves both ends inheritable, and Foundation's `Process` closes
    /// in a new program only the descriptors open when its start began: a program another test
    /// thread was starting meanwhile kept a copy of the write end, and the output ended only when
    /// that program exited (`ServiceProcessOutputTests`).
    static func outputSocketPair() throws -> (read: FileHandle, write: FileHandle) {
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            throw ServiceProcessError(message: "socketpair failed: errno \(errno)")
        }
        return (
            FileHandle(fileDescriptor: ends[0], closeOnDealloc: true),
            FileHandle(fileDescriptor: ends[1], closeOnDealloc: true)
        )
    }

    /// Everything the process wrote so far.
    public var log: String { output.value }

    public var isRunning: Bool { !hasExited }

    /// Whether the child has exited. Foundation's `Process` on Linux learns it from a socket
    /// pair whose child end it does not open close-on-exec, so a sibling spawned at the same
    /// moment (the tests start several services at once) inherits it too: Foundation then sees
    /// the exit only when that sibling exits as well, and until then `isRunning` stays true, the
    /// child stays a zombie and `waitUntilExit()` blocks (a whole test run hung on it once,
    /// in `terminate`). So the child is also reaped here (``ChildProcess/exitStatus(reaping:)``).
    private var hasExited: Bool { exitStatusIfExited != nil }

    /// The exit status once exited, else nil (kept: once reaped here, Foundation never learns it).
    private var exitStatusIfExited: Int32? {
        reapedStatus.withLock { status in
            if status == nil { status = ChildProcess.exitStatus(reaping: process) }
            return status
        }
    }

    /// Stops the process (SIGSTOP) and returns once every one of its threads is stopped: `kill`
    /// returns before that, and on a loaded machine a thread of a stopped service still read
    /// and even answered a request that the test sent after the `kill` (the Lifecycle tests'
    /// flake: a call that never reached the "stopped" session's receive queue, a 200 from it).
    /// Returns false if the threads were not all stopped within a minute.
    @discardableResult
    public func pause() async -> Bool {
        send(SIGSTOP)
        let pid = process.processIdentifier
        return await eventually(interval: .milliseconds(5)) { Self.allThreadsStopped(pid: pid) }
    }

    /// Whether every thread of `pid` is in state `T` (stopped) in /proc.
    static func allThreadsStopped(pid: Int32) -> Bool {
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task"), !tasks.isEmpty
        else { return false }
        return tasks.allSatisfy { task in
            // "<tid> (<name>) <state> ...": the state follows the last ')'.
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return false }
            return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("T")
        }
    }

    /// Sends `signal` (e.g. SIGINT, as Ctrl-C does) to the process.
    public func send(_ signal: Int32) {
        guard isRunning else { return }
        Glibc.kill(process.processIdentifier, signal)
    }

    /// Waits until the log matches `pattern` (a regular expression) and returns the first
    /// capture group (or the whole match).
    public func waitForLog(_ pattern: String, timeout: Duration = .seconds(30)) async throws -> String {
        let regex = try NSRegularExpression(pattern: pattern)
        return try await waitForLog(describedAs: "/\(pattern)/", timeout: timeout) {
            Self.firstMatch(of: regex, in: $0)
        }
    }

    /// Waits until `find` finds something in the log (it is asked every 20 ms, with the whole
    /// log) and returns what it found. Gives up after `timeout`, or once the process has exited
    /// and `find` has seen all it wrote; the error names the wait by `description`.
    ///
    /// `find` runs on a cooperative thread: it must take time linear in the log (count or
    /// search), not a pattern that backtracks (docs/testing.md, "Count lines").
    @discardableResult
    public func waitForLog<Found>(
        describedAs description: String,
        timeout: Duration = .seconds(30),
        find: (String) -> Found?
    ) async throws -> Found {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            // Whether the output was complete is read before the log, so a log that ended with
            // the process is searched whole before giving up.
            let complete = !isRunning && output.ended
            if let found = find(log) { return found }
            // A process that has exited may still have output in the socket that the reader has
            // not taken yet: give up only once the reader has reached its end.
            if complete { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ServiceProcessError(message: "\(name) did not log \(description) (running: \(isRunning)); log:\n\(log)")
    }

    /// Everything the process wrote, once it has exited and its output has been read to the end
    /// (a short-lived command such as authctl); throws if that takes longer than `timeout`.
    public func completeOutput(timeout: Duration = .seconds(30)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if !isRunning && output.ended { return log }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw ServiceProcessError(message: "\(name) did not finish its output (running: \(isRunning)); log:\n\(log)")
    }

    private static func firstMatch(of regex: NSRegularExpression, in text: String) -> String? {
        guard let match = regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) else { return nil }
        let range = match.numberOfRanges > 1 ? match.range(at: 1) : match.range
        return String(text[Range(range, in: text)!])
    }

    /// The port a service logged as listening on (it logs `port=N` at start-up).
    /// The process's pid.
    public var processIdentifier: Int32 { process.processIdentifier }

    public func listeningPort() async throws -> Int {
        let text = try await waitForLog(#"port=(\d+)[^\n]*RPC server listening"#)
        guard let port = Int(text) else { throw ServiceProcessError(message: "bad port \(text)") }
        return port
    }

    /// Waits for the process to exit by itself and returns its status; nil if it still runs
    /// after `timeout`. Once it has exited, ``log`` holds all it wrote: what was still in the
    /// socket when it exited is read first (a test that checked the log right after the exit
    /// found it empty once: the reader thread had not got to the last line yet).
    public func waitForExit(timeout: Duration = .seconds(30)) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status = exitStatusIfExited {
                // Bounded: a child of the process could keep its output open after it exits.
                let outputDeadline = ContinuousClock.now + .seconds(10)
                while !output.ended, ContinuousClock.now < outputDeadline {
                    try? await Task.sleep(for: .milliseconds(5))
                }
                return status
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return exitStatusIfExited
    }

    /// The same as ``waitForExit(timeout:)``: the exit status of a process that ends by itself
    /// (a command-line tool, a refused start); nil when it still runs after `timeout`.
    public func exitStatus(timeout: Duration = .seconds(30)) async -> Int32? {
        await self.waitForExit(timeout: timeout)
    }

    /// SIGTERM, then waits for the exit; SIGKILL if it takes longer than `grace`.
    @discardableResult
    public func terminate(grace: Duration = .seconds(15)) async -> Int32 {
        if isRunning { Glibc.kill(process.processIdentifier, SIGTERM) }
        if let status = await waitForExit(timeout: grace) { return status }
        Glibc.kill(process.processIdentifier, SIGKILL)
        // A killed process is gone at once; the bound only keeps a test from hanging.
        return await waitForExit(timeout: .seconds(30)) ?? SIGKILL
    }

    /// SIGKILL (`kill -9`: no shutdown, as a crash), then waits for the exit. It waits without
    /// holding a thread of the cooperative pool (it once slept in `usleep`, blocking one of the
    /// two threads every test shares; issue 18).
    public func kill() async {
        guard isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        // A killed process is gone at once; the bound only keeps a test from hanging.
        _ = await waitForExit(timeout: .seconds(30))
    }

    deinit {
        // Not once reaped: its pid may belong to another process by now.
        if !hasExited {
            Glibc.kill(process.processIdentifier, SIGKILL)
        }
        if let folder = copyFolder.withLock({ $0 }) { try? FileManager.default.removeItem(at: folder) }
    }
}

public struct ServiceProcessError: Error, CustomStringConvertible {
    public let message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}
