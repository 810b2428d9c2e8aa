import AuthProtobuf
import AuthTestSupport
import Foundation

/// A ``RawFrameConnection`` whose blocking reads run on a thread of their own. A blocking
/// `recv` on the concurrency pool (two threads on a 2-core machine) can starve the server
/// tasks the test is waiting for: a test waiting for a GoAway that the server's `run()` task
/// sends, while another waits for a handler, stalls both until their receive timeouts.
final class OffPoolRawConnection: @unchecked Sendable {
    // @unchecked: the connection is used by one test, one step at a time (each step is
    // awaited before the next starts), so no two threads touch it at once.
    let raw: RawFrameConnection

    /// Connects; with `readChallenge` (the default) also reads the server's Challenge (a
    /// short blocking read: the server sends it as soon as it admits the connection).
    init(port: Int, readChallenge: Bool = true) throws {
        raw = try RawFrameConnection(port: port, readChallenge: readChallenge)
    }

    private func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }

    func receiveFrame() async throws -> Auth_Rpc_V1_Frame? {
        try await offPool { try self.raw.receiveFrame() }
    }

    func receiveUntilClosed() async throws -> [Auth_Rpc_V1_Frame] {
        try await offPool { try self.raw.receiveUntilClosed() }
    }

    func isClosedByPeer() async throws -> Bool {
        try await offPool { self.raw.isClosedByPeer() }
    }
}
