#if canImport(Glibc)
import Glibc
#endif

/// A TCP/IPv4 socket that no program this process starts inherits: close-on-exec from its
/// creation (`SOCK_CLOEXEC`). Foundation's `Process` closes in a new program only the
/// descriptors that were open when its start began, so a socket another test thread made
/// meanwhile went with the program, and closing it here then left the connection open in that
/// program: the gateway's connection-cap test waited a minute in vain for its place to come back
/// (docs/testing.md, "Only the child holds its output"). Returns -1 when `socket` fails.
public func closeOnExecTCPSocket() -> Int32 {
    socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
}
