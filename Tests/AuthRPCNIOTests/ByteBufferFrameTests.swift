import AuthProtobuf
import NIOCore
import Testing

@testable import AuthRPCNIO

@Suite struct ByteBufferFrameTests {
    /// The byte-by-byte example in docs/protocol.md §8 must be what we send.
    @Test func documentedRequestFrameBytes() throws {
        var buffer = ByteBuffer()
        try buffer.writeFrame(
            Auth_Rpc_V1_Frame(
                kind: .request(
                    Auth_Rpc_V1_Request(
                        callID: 1,
                        method: "/auth.health.v1.Health/Check",
                        timeoutUS: 1_000_000
                    )
                )
            )
        )
        let expected: [UInt8] =
            [0x00, 0x00, 0x00, 0x26, 0x1A, 0x24, 0x08, 0x01, 0x12, 0x1C]
            + Array("/auth.health.v1.Health/Check".utf8) + [0x18, 0xC0, 0x84, 0x3D]
        #expect(Array(buffer.readableBytesView) == expected)
        buffer.moveReaderIndex(forwardBy: 4)
        let decoded = try Auth_Rpc_V1_Frame(frameBody: buffer)
        guard case .request(let request) = decoded.kind else {
            Issue.record("expected a request")
            return
        }
        #expect(request.timeoutUS == 1_000_000)
    }

    /// docs/protocol.md §8: Health/Check's SERVING response payload is `08 01`.
    @Test func documentedHealthResponsePayload() throws {
        #expect(try Auth_Health_V1_HealthCheckResponse(status: .serving).serializedBytes() == [0x08, 0x01])
    }
}
