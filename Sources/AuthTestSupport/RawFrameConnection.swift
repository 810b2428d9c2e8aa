import AuthCrypto
import AuthProtobuf
import AuthRPC
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A hand-driven protocol peer over a blocking socket: sends exactly the bytes a test wants
/// (valid frames, garbage, oversized lengths) and reads what the server answers. For testing
/// how a server treats misbehaving clients, and that the protocol works as docs/protocol.md
/// says without our client library.
///
/// Every call that touches the socket is async and runs on a thread of its own
/// (``offCooperativePool(_:)``): a `recv` waiting for the server on the cooperative pool (two
/// threads on a 2-core machine) starves the very server tasks it waits for, and every other
/// test of the run (issue 18).
public final class RawFrameConnection: @unchecked Sendable {
    // @unchecked Sendable: `fd` never changes; `challenge` is written once by `init`. A test
    // uses a connection one step at a time (each call is awaited before the next), so no two
    // threads read or write the socket at once.
    private let fd: Int32
    /// The server's first frame (its Challenge), read by `init` unless told not to.
    public private(set) var challenge = Auth_Rpc_V1_Challenge()

    /// Connects; with `readChallenge` (the default) also reads the server's Challenge.
    /// `receiveTimeout` bounds each read (a read that times out counts as "nothing came"): it
    /// tells a stuck server from a slow one, so it is far beyond any server timeout a test sets.
    public init(
        host: String = "127.0.0.1",
        port: Int,
        receiveTimeout: Duration = .seconds(30),
        readChallenge: Bool = true
    ) async throws {
        let connected = try await offCooperativePool {
            try Self.openSocket(host: host, port: port, receiveTimeout: receiveTimeout, readChallenge: readChallenge)
        }
        self.fd = connected.fd
        self.challenge = connected.challenge
    }

    /// Connects, reads the Challenge, sends a valid Hello for `service` under `secret` and reads
    /// the server's answer, all in one step on one thread: a server with a short Hello timeout
    /// (a read timeout of a second) never sees the pause a hop through a busy cooperative pool
    /// can put between the Challenge and the Hello. Returns the connection and the answer
    /// (a HelloAck, or a GoAway; nil when the server closed).
    public static func authenticated(
        host: String = "127.0.0.1",
        port: Int,
        service: String,
        secret: [UInt8],
        receiveTimeout: Duration = .seconds(30)
    ) async throws -> (connection: RawFrameConnection, answer: Auth_Rpc_V1_Frame?) {
        let (fd, challenge, answer) = try await offCooperativePool {
            let (fd, challenge) = try Self.openSocket(
                host: host,
                port: port,
                receiveTimeout: receiveTimeout,
                readChallenge: true
            )
            do {
                let hello = try ServiceCredentialSigner(service: service, secret: secret)
                    .hello(answering: challenge, expectedServer: nil)
                    .get()
                _ = Self.send(fd, try Self.framed(Auth_Rpc_V1_Frame(kind: .hello(hello))))
                return (fd, challenge, try Self.receiveFrame(fd))
            } catch {
                close(fd)
                throw error
            }
        }
        return (RawFrameConnection(fd: fd, challenge: challenge), answer)
    }

    /// Opens `count` connections one right after the other on one thread (without reading
    /// their Challenges unless told to): for tests where the server must see them arrive
    /// together, which separate awaits on a busy cooperative pool do not promise.
    public static func several(
        _ count: Int,
        host: String = "127.0.0.1",
        port: Int,
        readChallenge: Bool = false,
        receiveTimeout: Duration = .seconds(30)
    ) async throws -> [RawFrameConnection] {
        let opened = try await offCooperativePool {
            var opened: [(fd: Int32, challenge: Auth_Rpc_V1_Challenge)] = []
            do {
                for _ in 0..<count {
                    opened.append(
                        try Self.openSocket(
                            host: host,
                            port: port,
                            receiveTimeout: receiveTimeout,
                            readChallenge: readChallenge
                        )
                    )
                }
            } catch {
                for connection in opened { close(connection.fd) }
                throw error
            }
            return opened
        }
        return opened.map { RawFrameConnection(fd: $0.fd, challenge: $0.challenge) }
    }

    private init(fd: Int32, challenge: Auth_Rpc_V1_Challenge) {
        self.fd = fd
        self.challenge = challenge
    }

    /// Connects a blocking socket and reads the challenge (on the calling thread).
    private static func openSocket(
        host: String,
        port: Int,
        receiveTimeout: Duration,
        readChallenge: Bool
    ) throws -> (fd: Int32, challenge: Auth_Rpc_V1_Challenge) {
        let fd = closeOnExecTCPSocket()
        guard fd >= 0 else { throw ServiceProcessError(message: "socket() failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &address.sin_addr)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            close(fd)
            throw ServiceProcessError(message: "connect() to \(host):\(port) failed")
        }
        var timeout = timeval(tv_sec: Int(receiveTimeout.components.seconds), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard readChallenge else { return (fd, Auth_Rpc_V1_Challenge()) }
        do {
            guard case .challenge(let challenge) = try receiveFrame(fd)?.kind else {
                throw ServiceProcessError(message: "the server at \(host):\(port) sent no Challenge")
            }
            return (fd, challenge)
        } catch {
            close(fd)
            throw error
        }
    }

    deinit { close(fd) }

    /// Sends raw bytes; false when the peer has closed.
    @discardableResult
    public func send(_ bytes: [UInt8]) async -> Bool {
        let fd = self.fd
        return await offCooperativePool { Self.send(fd, bytes) }
    }

    private static func send(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }

    /// Sends one frame with its length prefix.
    @discardableResult
    public func send(_ frame: Auth_Rpc_V1_Frame) async throws -> Bool {
        await send(try Self.framed(frame))
    }

    /// Sends frames with their length prefixes in one write, so that a server on loopback
    /// reads them together.
    @discardableResult
    public func send(_ frames: [Auth_Rpc_V1_Frame]) async throws -> Bool {
        await send(try frames.flatMap { try Self.framed($0) })
    }

    /// `frame` with its length prefix.
    private static func framed(_ frame: Auth_Rpc_V1_Frame) throws -> [UInt8] {
        let body = try frame.serializedBytes()
        let length = UInt32(body.count)
        return [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + body
    }

    /// A valid Hello for `service` under `secret`, answering this connection's challenge.
    public func hello(service: String, secret: [UInt8]) throws -> Auth_Rpc_V1_Hello {
        try ServiceCredentialSigner(service: service, secret: secret)
            .hello(answering: challenge, expectedServer: nil)
            .get()
    }

    /// Sends a valid Hello for `service` under `secret`, answering this connection's challenge.
    @discardableResult
    public func sendHello(service: String, secret: [UInt8]) async throws -> Auth_Rpc_V1_Hello {
        let hello = try hello(service: service, secret: secret)
        try await send(Auth_Rpc_V1_Frame(kind: .hello(hello)))
        return hello
    }

    /// Connects and completes the handshake as `service` under `secret`; throws unless the
    /// server answers with a HelloAck, which it returns with the connection.
    public static func greeted(
        port: Int,
        service: String,
        secret: [UInt8]
    ) async throws -> (connection: RawFrameConnection, ack: Auth_Rpc_V1_HelloAck) {
        let connection = try await RawFrameConnection(port: port)
        try await connection.sendHello(service: service, secret: secret)
        let answer = try await connection.receiveFrame()
        guard case .helloAck(let ack) = answer?.kind else {
            throw ServiceProcessError(message: "expected a HelloAck, got \(String(describing: answer))")
        }
        return (connection, ack)
    }

    /// Sends one request frame.
    @discardableResult
    public func sendRequest(
        callID: UInt64,
        method: String,
        timeoutUS: UInt64 = 0,
        payload: [UInt8] = []
    ) async throws -> Bool {
        try await send(
            Auth_Rpc_V1_Frame(
                kind: .request(
                    Auth_Rpc_V1_Request(callID: callID, method: method, timeoutUS: timeoutUS, payload: payload)
                )
            )
        )
    }

    /// Reads one frame; nil when the peer closed the connection (or the timeout passed).
    public func receiveFrame() async throws -> Auth_Rpc_V1_Frame? {
        let fd = self.fd
        return try await offCooperativePool { try Self.receiveFrame(fd) }
    }

    /// Reads frames until the server closes the connection; returns them.
    public func receiveUntilClosed(maxFrames: Int = 100) async throws -> [Auth_Rpc_V1_Frame] {
        let fd = self.fd
        return try await offCooperativePool {
            var frames: [Auth_Rpc_V1_Frame] = []
            while frames.count < maxFrames, let frame = try Self.receiveFrame(fd) { frames.append(frame) }
            return frames
        }
    }

    /// Reads exactly `count` bytes; nil when the peer closed first (or the timeout passed).
    public func receiveBytes(_ count: Int) async -> [UInt8]? {
        let fd = self.fd
        return await offCooperativePool { Self.receive(fd, count: count) }
    }

    /// Whether the server has closed the connection (reads until EOF or the timeout).
    public func isClosedByPeer() async -> Bool {
        let fd = self.fd
        return await offCooperativePool { Self.isClosedByPeer(fd) }
    }

    private static func receiveFrame(_ fd: Int32) throws -> Auth_Rpc_V1_Frame? {
        guard let header = receive(fd, count: 4) else { return nil }
        let length = Int(header[0]) << 24 | Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
        guard let body = receive(fd, count: length) else { return nil }
        return try Auth_Rpc_V1_Frame(serializedBytes: body)
    }

    private static func isClosedByPeer(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        while true {
            let n = recv(fd, &byte, 1, 0)
            if n == 0 { return true }
            if n < 0 { return errno != EAGAIN && errno != EWOULDBLOCK }
        }
    }

    private static func receive(_ fd: Int32, count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var offset = 0
        while offset < count {
            let n = bytes[offset...].withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return nil }
            offset += n
        }
        return bytes
    }
}
