import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Runs a short-lived program (a script, `openssl`, a Python check) to its end, for tests.
///
/// It waits with `waitpid(WNOHANG)` itself, never with `Process.terminationHandler` or
/// `waitUntilExit()`: Foundation's `Process` on Linux learns of a child's exit from a socket
/// pair whose child end is not close-on-exec, so a process spawned at the same moment by
/// another test inherits it and hides the exit until that process exits too (a full run hung
/// on it once in `ServiceProcess`, docs/testing.md). Output goes to files, not pipes, so a
/// chatty child never blocks on a full pipe.
public enum ChildProcess {
    public struct Result: Sendable {
        /// The exit code, or the number of the signal that killed it.
        public var status: Int32
        /// Standard output's bytes (binary output, e.g. a signature, stays intact).
        public var output: [UInt8]
        public var standardError: String
        /// Standard output as UTF-8 text.
        public var standardOutput: String { String(decoding: output, as: UTF8.self) }
    }

    /// Runs `executable` with `arguments` (standard input empty) and returns when it has exited.
    /// Throws when it cannot start, or when it still runs after `timeout` (it is then killed).
    public static func run(
        _ executable: URL,
        _ arguments: [String],
        currentDirectory: URL? = nil,
        timeout: Duration = .seconds(600)
    ) async throws -> Result {
        let files = FileManager.default
        let prefix = files.temporaryDirectory.appendingPathComponent("auth-child-\(UUID().uuidString)")
        let outURL = prefix.appendingPathExtension("out")
        let errURL = prefix.appendingPathExtension("err")
        _ = files.createFile(atPath: outURL.path, contents: nil)
        _ = files.createFile(atPath: errURL.path, contents: nil)
        defer {
            try? files.removeItem(at: outURL)
            try? files.removeItem(at: errURL)
        }
        let out = try FileHandle(forWritingTo: outURL)
        let err = try FileHandle(forWritingTo: errURL)
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        if let currentDirectory { process.currentDirectoryURL = currentDirectory }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = out
        process.standardError = err
        do {
            try process.run()
        } catch {
            try? out.close()
            try? err.close()
            throw error
        }
        // The child has its own copies.
        try? out.close()
        try? err.close()
        let pid = process.processIdentifier
        let deadline = ContinuousClock.now + timeout
        var status = exitStatus(reaping: process)
        while status == nil {
            if ContinuousClock.now > deadline {
                Glibc.kill(pid, SIGKILL)
                var raw: Int32 = 0
                _ = waitpid(pid, &raw, 0)
                throw ServiceProcessError(message: "\(executable.lastPathComponent) still ran after \(timeout); killed")
            }
            try? await Task.sleep(for: .milliseconds(5))
            status = exitStatus(reaping: process)
        }
        return Result(
            status: status!,
            output: Array((try? Data(contentsOf: outURL)) ?? Data()),
            standardError: (try? String(contentsOf: errURL, encoding: .utf8)) ?? ""
        )
    }

    /// `process`'s exit status once it has exited, else nil. Reaps it with `waitpid(WNOHANG)`
    /// when Foundation has not (whichever reaps first, the other finds nothing to wait for); a
    /// status reaped here is returned once only, since Foundation then never learns it, so
    /// callers keep it.
    static func exitStatus(reaping process: Process) -> Int32? {
        var raw: Int32 = 0
        if waitpid(process.processIdentifier, &raw, WNOHANG) == process.processIdentifier { return exitCode(raw) }
        // 0: still running; ECHILD: Foundation reaped it and has (or is about to have) its status.
        return process.isRunning ? nil : process.terminationStatus
    }

    /// The exit code of a `waitpid` status, or the signal's number for a child killed by one
    /// (as Foundation's `terminationStatus`).
    static func exitCode(_ status: Int32) -> Int32 {
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : signal
    }
}
