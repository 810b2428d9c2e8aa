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
public final class RawFrameConnection {
    private let fd: Int32
    /// The server's first frame (its Challenge), read by `init` unless told not to.
    public private(set) var challenge = Auth_Rpc_V1_Challenge()

    /// Connects; with `readChallenge` (the default) also reads the server's Challenge.
    public init(host: String = "127.0.0.1", port: Int, receiveTimeout: Duration = .seconds(5), readChallenge: Bool = true) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ServiceProcessError(message: "socket() failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &address.sin_addr)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            close(fd)
            throw ServiceProcessError(message: "connect() to \(host):\(port) failed")
        }
        var timeout = timeval(tv_sec: Int(receiveTimeout.components.seconds), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if readChallenge {
            guard case .challenge(let challenge) = try receiveFrame()?.kind else {
                close(fd)
                throw ServiceProcessError(message: "the server at \(host):\(port) sent no Challenge")
            }
            self.challenge = challenge
        }
    }

    deinit { close(fd) }

    /// Sends raw bytes; false when the peer has closed.
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }

    /// Sends one frame with its length prefix.
    @discardableResult
    public func send(_ frame: Auth_Rpc_V1_Frame) throws -> Bool {
        let body = try frame.serializedBytes()
        let length = UInt32(body.count)
        return send([UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + body)
    }

    /// A valid Hello for `service` under `secret`, answering this connection's challenge.
    public func hello(service: String, secret: [UInt8]) throws -> Auth_Rpc_V1_Hello {
        try ServiceCredentialSigner(service: service, secret: secret)
            .hello(answering: challenge, expectedServer: nil)
            .get()
    }

    /// Sends a valid Hello for `service` under `secret`, answering this connection's challenge.
    @discardableResult
    public func sendHello(service: String, secret: [UInt8]) throws -> Auth_Rpc_V1_Hello {
        let hello = try hello(service: service, secret: secret)
        try send(Auth_Rpc_V1_Frame(kind: .hello(hello)))
        return hello
    }

    /// Reads one frame; nil when the peer closed the connection (or the timeout passed).
    public func receiveFrame() throws -> Auth_Rpc_V1_Frame? {
        guard let header = receive(count: 4) else { return nil }
        let length = Int(header[0]) << 24 | Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
        guard let body = receive(count: length) else { return nil }
        return try Auth_Rpc_V1_Frame(serializedBytes: body)
    }

    /// Reads frames until the server closes the connection; returns them.
    public func receiveUntilClosed(maxFrames: Int = 100) throws -> [Auth_Rpc_V1_Frame] {
        var frames: [Auth_Rpc_V1_Frame] = []
        while frames.count < maxFrames, let frame = try receiveFrame() { frames.append(frame) }
        return frames
    }

    /// Whether the server has closed the connection (reads until EOF or the timeout).
    public func isClosedByPeer() -> Bool {
        var byte: UInt8 = 0
        while true {
            let n = recv(fd, &byte, 1, 0)
            if n == 0 { return true }
            if n < 0 { return errno != EAGAIN && errno != EWOULDBLOCK }
        }
    }

    private func receive(count: Int) -> [UInt8]? {
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
