#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Standard error and standard input as bytes, for the executables' messages and authctl's
/// `-` arguments (Foundation's `FileHandle` is not in FoundationEssentials).
public enum StandardStreams {
    /// Whether standard error is a terminal (progress lines may then overwrite each other).
    public static var errorIsTerminal: Bool { isatty(2) == 1 }

    /// Writes `text` to standard error, all of it (short writes and EINTR are retried; other
    /// errors drop the rest: there is nowhere left to report them).
    public static func writeError(_ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                return
            }
            bytes = bytes.dropFirst(written)
        }
    }

    /// Everything on standard input up to its end.
    public static func readInput() throws(StandardInputError) -> [UInt8] {
        var input: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if count == 0 { return input }
            if count < 0 {
                if errno == EINTR { continue }
                throw StandardInputError(errno: errno)
            }
            input += chunk[..<count]
        }
    }

    /// Prints `<program>: configuration error: <error>` to standard error and exits with status
    /// 2, the status every executable gives a bad setting (README, "Configuration").
    public static func exitWithConfigurationError(_ program: String, _ error: any Error) -> Never {
        exitWithUsageError(program, "configuration error: \(error)")
    }

    /// Prints `<program>: <message>` to standard error and exits with status 2 (bad input or
    /// settings: nothing was done).
    public static func exitWithUsageError(_ program: String, _ message: String) -> Never {
        writeError("\(program): \(message)\n")
        exit(2)
    }
}

/// Standard input could not be read.
public struct StandardInputError: Error, CustomStringConvertible {
    public var errno: Int32
    public var description: String { "cannot read standard input (errno \(errno))" }
}
