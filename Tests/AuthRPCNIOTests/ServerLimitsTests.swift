import AuthProtobuf
import AuthRPC
import AuthTestSupport
import Foundation
import Logging
import NIOCore
import Synchronization
import Testing

@testable import AuthRPCNIO

/// A Frame carrying `hello`, padded with an unknown field (field 100, bytes) so that its body
/// is exactly `bodySize` bytes: still a valid Hello to any protobuf decoder.
func paddedHelloFrame(
    answering challenge: Auth_Rpc_V1_Challenge,
    service: String = "raw",
    secret: [UInt8] = testSecret,
    bodySize: Int
) throws -> [UInt8] {
    let hello = try ServiceCredentialSigner(service: service, secret: secret)
        .hello(answering: challenge, expectedServer: nil).get()
    let plain = try Auth_Rpc_V1_Frame(kind: .hello(hello)).serializedBytes()
    // Unknown field: tag 0xA2 0x06 (field 100, length-delimited), a 2-byte varint length, padding.
    let padding = bodySize - plain.count - 4
    precondition(padding >= 128 && padding < 16384)
    var body = plain
    body += [0xA2, 0x06, UInt8(padding & 0x7F) | 0x80, UInt8(padding >> 7)]
    body += [UInt8](repeating: 0x61, count: padding)
    precondition(body.count == bodySize)
    return lengthPrefix(body.count) + body
}

func lengthPrefix(_ count: Int) -> [UInt8] {
    let length = UInt32(count)
    return [UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF)]
}

func goAwayReason(_ frames: [Auth_Rpc_V1_Frame]) -> String? {
    guard case .goAway(let goAway) = frames.last?.kind else { return nil }
    return goAway.reason
}

@Suite struct ServerLimitsTests {
    @Test func firstFrameIsCappedAtHelloSizeBeforeDecoding() async throws {
        try await withServer { _, port in
            // A valid Hello of exactly the cap is served.
            let fits = try await RawFrameConnection(port: port)
            await fits.send(
                try paddedHelloFrame(answering: fits.challenge, bodySize: ConnectionLimits().maxHelloFrameSize)
            )
            guard case .helloAck = try await fits.receiveFrame()?.kind else {
                Issue.record("a Hello of \(ConnectionLimits().maxHelloFrameSize) bytes was not accepted")
                return
            }
            // After Hello, frames up to max_frame_size are read again.
            var request = Auth_Rpc_V1_Request(callID: 1, method: echoMethod.path)
            request.payload = try HealthRequest(service: "7").serializedBytes()
            request.metadata =
                RPCMetadata(
                    requestID: String(repeating: "r", count: 1000),
                    traceparent: String(repeating: "t", count: 1000)
                ).proto
            try await fits.send(Auth_Rpc_V1_Frame(kind: .request(request)))
            guard case .response(let response) = try await fits.receiveFrame()?.kind else {
                Issue.record("a 2 KB request after Hello was not answered")
                return
            }
            #expect(response.status == nil)

            // One byte more, still a valid Hello: refused from its length alone.
            let tooLarge = try await RawFrameConnection(port: port)
            await tooLarge.send(
                try paddedHelloFrame(answering: tooLarge.challenge, bodySize: ConnectionLimits().maxHelloFrameSize + 1)
            )
            let frames = try await tooLarge.receiveUntilClosed()
            #expect(goAwayReason(frames) == "frame_too_large")
            // A length prefix alone is enough to be refused (no body sent).
            let prefixOnly = try await RawFrameConnection(port: port)
            await prefixOnly.send([0x00, 0x00, 0x10, 0x00])
            let prefixOnlyFrames = try await prefixOnly.receiveUntilClosed()
            #expect(goAwayReason(prefixOnlyFrames) == "frame_too_large")
        }
    }

    @Test func connectionsBeyondTheServerLimitAreRefused() async throws {
        var limits = ConnectionLimits()
        limits.maxConnections = 2
        try await withServer(limits: limits) { _, port in
            // Two connections, each known to be admitted (it was answered).
            let first = try await RawFrameConnection(port: port)
            try await first.sendHello(service: "raw", secret: testSecret)
            let second = try await RawFrameConnection(port: port)
            try await second.sendHello(service: "raw", secret: testSecret)
            for connection in [first, second] {
                guard case .helloAck = try await connection.receiveFrame()?.kind else {
                    Issue.record("expected HelloAck")
                    return
                }
            }
            // Refused connections get a GoAway instead of a Challenge.
            let third = try await RawFrameConnection(port: port, readChallenge: false)
            let frames = try await third.receiveUntilClosed()
            guard case .goAway(let goAway) = frames.last?.kind else {
                Issue.record("expected GoAway, got \(frames)")
                return
            }
            #expect(goAway.code == .resourceExhausted)
            #expect(goAway.reason == "too_many_connections")
            // The admitted ones still work.
            try await first.send(Auth_Rpc_V1_Frame(kind: .ping(Auth_Rpc_V1_Ping(payload: 9))))
            guard case .pong(let pong) = try await first.receiveFrame()?.kind else {
                Issue.record("expected Pong")
                return
            }
            #expect(pong.payload == 9)
        }
    }

    @Test func unauthenticatedConnectionsPerPeerAreCapped() async throws {
        // The three silent connections must all be open before the first one's Hello timeout
        // frees its place: they are opened back to back on one thread (sequential awaits on a
        // loaded machine once took longer than the 1 s this timeout was, and all three timed
        // out), and the timeout is 5 s.
        var limits = ConnectionLimits(idleTimeout: .seconds(60), readTimeout: .seconds(5))
        limits.maxUnauthenticatedConnectionsPerPeer = 2
        try await withServer(limits: limits) { _, port in
            // Authenticated connections from the same address do not count.
            var authenticated: [RawFrameConnection] = []
            for _ in 0..<3 {
                // Hello within the read timeout: Challenge, Hello and answer in one step.
                let (connection, answer) = try await RawFrameConnection.authenticated(
                    port: port,
                    service: "raw",
                    secret: testSecret
                )
                guard case .helloAck = answer?.kind else {
                    Issue.record("expected HelloAck, got \(String(describing: answer))")
                    return
                }
                authenticated.append(connection)
            }
            // Three silent connections: whichever the server admits last is refused at once;
            // the two others wait for Hello until the read timeout.
            let silent = try await RawFrameConnection.several(3, port: port)
            var reasons: [String?] = []
            for connection in silent { reasons.append(goAwayReason(try await connection.receiveUntilClosed())) }
            #expect(reasons.filter { $0 == "too_many_unauthenticated_connections" }.count == 1)
            #expect(reasons.filter { $0 == "hello_timeout" }.count == 2)
            #expect(authenticated.count == 3)
        }
    }

    @Test func peerSuppliedTextIsEscapedAndCutInTheLog() async throws {
        let log = CapturedLog()
        try await withServer(logger: log.logger()) { _, port in
            let raw = try await RawFrameConnection(port: port)
            let evil = "evil\nlevel=critical msg=forged \u{1B}[2J\u{202E}" + String(repeating: "x", count: 600)
            try await raw.sendHello(service: evil, secret: Array(repeating: 1, count: 32))
            _ = try await raw.receiveUntilClosed()
        }
        let refusals = log.records.withLock { $0.filter { $0.message == "Refused a caller" } }
        #expect(refusals.count == 1)
        let service = try #require(refusals.first?.metadata["service"])
        #expect(!service.contains("\n"))
        #expect(!service.unicodeScalars.contains { $0.value < 0x20 || $0.value > 0x7E })
        #expect(service.hasPrefix("evil\\nlevel=critical msg=forged \\u{1B}[2J\\u{202E}xxx"))
        #expect(service.utf8.count < 200)
    }
}

@Suite struct HugeLimitsTests {
    /// Limits set in code are not range-checked like the environment's: the largest durations
    /// must still not trap when they become timer intervals (NIO's clamping conversion).
    @Test func hugeTimeoutsDoNotTrap() async throws {
        let limits = ConnectionLimits(
            idleTimeout: .seconds(Int64.max),
            readTimeout: .seconds(Int64.max),
            maxCallTimeout: .seconds(Int64.max)
        )
        try await withServer(limits: limits) { _, port in
            let (client, transport) = makeClient(port: port)
            let answer = try await client.echo(5, timeout: .seconds(Int64.max / 2))
            #expect(answer == 5)
            await transport.shutdown()
        }
    }
}

@Suite struct MetadataLimitOnTheWireTests {
    @Test func repeatedMetadataKeysCountAgainstTheLimit() async throws {
        try await withServer { _, port in
            let raw = try await authenticatedRawConnection(port: port)
            var request = Auth_Rpc_V1_Request(
                callID: 1,
                method: echoMethod.path,
                payload: try HealthRequest(service: "1").serializedBytes()
            )
            request.metadata = Auth_Rpc_V1_Metadata(
                extra: (0..<1000).map { _ in Auth_Rpc_V1_MetadataEntry(key: "same", value: "v") }
            )
            try await raw.send(Auth_Rpc_V1_Frame(kind: .request(request)))
            guard case .response(let response) = try await raw.receiveFrame()?.kind else {
                Issue.record("expected a Response")
                return
            }
            #expect(response.status?.code == .invalidArgument)
            #expect(response.status?.reason == "invalid_metadata")
        }
    }
}
