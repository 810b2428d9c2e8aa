import AuthProtobuf
import Testing

/// Byte-exact encodings computed by hand from the protobuf wire format
/// (https://protobuf.dev/programming-guides/encoding/):
/// - a tag is the varint `(field_number << 3) | wire_type`, wire type 0 = VARINT, 2 = LEN;
/// - a varint stores 7 bits per byte, least significant group first, the high bit set on every
///   byte but the last (300 = 0b10_0101100 -> 0xAC 0x02);
/// - `int64`/`int32`/enum values that are negative are sign-extended to 64 bits, so always take
///   10 bytes;
/// - LEN fields (string, bytes, embedded message) are the tag, the length as a varint, then the
///   bytes;
/// - proto3 fields without presence are not written when they hold the default value; a set
///   message field or oneof member is written even when empty (tag + length 0).
@Suite("wire format")
struct WireFormatTests {
    @Test("Frame{request{call_id: 300, method: \"/a/B\", payload: 00 FF}}")
    func frameWithRequest() throws {
        let frame = Auth_Rpc_V1_Frame(
            kind: .request(Auth_Rpc_V1_Request(callID: 300, method: "/a/B", timeoutUS: 0, payload: [0x00, 0xFF]))
        )
        let request: [UInt8] = [
            0x08, 0xAC, 0x02,  // field 1 (call_id) VARINT: 300
            0x12, 0x04, 0x2F, 0x61, 0x2F, 0x42,  // field 2 (method) LEN 4: "/a/B"
            // field 3 (timeout_us) is 0: not written
            0x2A, 0x02, 0x00, 0xFF,  // field 5 (payload) LEN 2: 00 FF
        ]
        let expected: [UInt8] = [0x1A, UInt8(request.count)] + request  // field 3 of Frame (request) LEN 13
        #expect(try frame.serializedBytes() == expected)
        #expect(try Auth_Rpc_V1_Frame(serializedBytes: expected) == frame)
    }

    @Test("RotateSigningKeyResponse{signs_from: -1}")
    func negativeInt64() throws {
        let message = Auth_Session_V1_RotateSigningKeyResponse(signsFrom: -1)
        let expected: [UInt8] = [
            0x10, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01,  // field 2 VARINT: -1 as 2^64 - 1
        ]
        #expect(try message.serializedBytes() == expected)
        #expect(try Auth_Session_V1_RotateSigningKeyResponse(serializedBytes: expected) == message)
    }

    @Test("Status{code: unrecognized(-5)} is a sign-extended 10-byte varint")
    func negativeEnum() throws {
        let status = Auth_Rpc_V1_Status(code: .unrecognized(-5))
        let expected: [UInt8] = [0x08, 0xFB, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]
        #expect(try status.serializedBytes() == expected)
        #expect(try Auth_Rpc_V1_Status(serializedBytes: expected).code == .unrecognized(-5))
    }

    @Test("an empty but present message field is tag + length 0")
    func emptyMessageField() throws {
        #expect(try Auth_Rpc_V1_Response(callID: 1).serializedBytes() == [0x08, 0x01])
        #expect(try Auth_Rpc_V1_Response(callID: 1, status: .init()).serializedBytes() == [0x08, 0x01, 0x12, 0x00])
        #expect(try Auth_Rpc_V1_Frame(kind: .ping(.init())).serializedBytes() == [0x32, 0x00])  // field 6 LEN 0
    }

    @Test("default values are not written")
    func defaults() throws {
        #expect(try Auth_Rpc_V1_Request().serializedBytes() == [])
        #expect(try Auth_Rpc_V1_Status(code: .ok).serializedBytes() == [])
        #expect(try Auth_Health_V1_HealthCheckResponse(status: .notServing).serializedBytes() == [0x08, 0x02])
    }

    @Test("strings are written as UTF-8")
    func utf8() throws {
        // "é" is U+00E9 = C3 A9 in UTF-8.
        #expect(try Auth_Health_V1_HealthCheckRequest(service: "é").serializedBytes() == [0x0A, 0x02, 0xC3, 0xA9])
    }

    @Test("repeated messages are one LEN record per element")
    func repeatedMessages() throws {
        let metadata = Auth_Rpc_V1_Metadata(extra: [.init(key: "a", value: "b"), .init()])
        let expected: [UInt8] = [
            0x32, 0x06, 0x0A, 0x01, 0x61, 0x12, 0x01, 0x62,  // field 6 LEN 6: {key "a", value "b"}
            0x32, 0x00,  // field 6 LEN 0: {}
        ]
        #expect(try metadata.serializedBytes() == expected)
        #expect(try Auth_Rpc_V1_Metadata(serializedBytes: expected) == metadata)
    }

    @Test("unknown fields are skipped when decoding")
    func unknownFields() throws {
        let bytes: [UInt8] = [
            0x78, 0x05,  // field 15 VARINT: unknown
            0x08, 0x2A,  // field 1 VARINT: 42
            0x82, 0x01, 0x01, 0x00,  // field 16 LEN 1: unknown
        ]
        #expect(try Auth_Rpc_V1_Ping(serializedBytes: bytes).payload == 42)
    }
}
