import AuthProtobuf
import Testing

@Suite("malformed and hostile input")
struct MalformedInputTests {
    @Test(
        "bytes protobuf-c rejects throw malformedInput",
        arguments: [
            [0x1A, 0x05, 0x08],  // submessage length past the end
            [0x08],  // tag without a value (and field 1 of Frame is a message)
            [0x30, 0x80],  // truncated varint
            [0x00],  // field number 0
            [0x0F],  // wire type 7 does not exist
            [0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F],  // a 4 GiB length
            [0x08, 0x01],  // a VARINT where the oneof member `hello` is a message
            [0x1A, 0x02, 0x12, 0x05],  // truncated string inside the submessage
            [0x0B],  // group start: groups are not part of these messages
            [0x1A, 0x03, 0x08, 0x80, 0x80],  // truncated varint inside the submessage
        ] as [[UInt8]]
    )
    func rejected(_ bytes: [UInt8]) {
        expectProtobufCError(.malformedInput, messageName: "auth.rpc.v1.Frame") {
            _ = try Auth_Rpc_V1_Frame(serializedBytes: bytes)
        }
    }

    @Test("every truncation of a valid frame decodes or throws malformedInput")
    func truncations() throws {
        for kind in Samples.frameKinds {
            let bytes = try Auth_Rpc_V1_Frame(kind: kind).serializedBytes()
            for length in 0..<bytes.count {
                do {
                    _ = try Auth_Rpc_V1_Frame(serializedBytes: Array(bytes[..<length]))
                } catch let error as ProtobufCError {
                    #expect(error.code == .malformedInput || error.code == .invalidUTF8)
                }
            }
        }
    }

    @Test("random bytes never crash the decoder")
    func randomBytes() throws {
        var random = SplitMix64(seed: 0x5EED)
        var decoded = 0
        var rejected = 0
        for round in 0..<4000 {
            let bytes = random.bytes(count: Int.random(in: 0...(round < 2000 ? 16 : 128), using: &random))
            if try decodeAll(bytes) {
                decoded += 1
            } else {
                rejected += 1
            }
        }
        // Both outcomes occur: some short inputs are valid (e.g. a lone unknown varint field).
        #expect(decoded > 0)
        #expect(rejected > 0)
    }

    @Test("mutated valid frames never crash the decoder, and what decodes re-encodes stably")
    func mutatedFrames() throws {
        var random = SplitMix64(seed: 42)
        let valid = try Samples.frameKinds.map { try Auth_Rpc_V1_Frame(kind: $0).serializedBytes() }
        for _ in 0..<4000 {
            var bytes = valid[Int.random(in: 0..<valid.count, using: &random)]
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                let index = Int.random(in: 0..<bytes.count, using: &random)
                switch Int.random(in: 0..<4, using: &random) {
                case 0: bytes[index] = UInt8.random(in: 0...255, using: &random)
                case 1: bytes[index] ^= 1 << UInt8.random(in: 0..<8, using: &random)
                case 2: bytes.insert(UInt8.random(in: 0...255, using: &random), at: index)
                default: bytes.removeSubrange(index...)
                }
                if bytes.isEmpty { break }
            }
            _ = try decodeAll(bytes)
            if let frame = try? Auth_Rpc_V1_Frame(serializedBytes: bytes) {
                // A decoded message holds valid, NUL-free strings, so it must encode again.
                #expect(try roundTrip(frame) == frame)
            }
        }
    }

    @Test("huge declared lengths are rejected without allocating them")
    func hugeLengths() {
        let lengths: [[UInt8]] = [
            [0x80, 0x80, 0x80, 0x80, 0x08],  // 2^31
            [0xFF, 0xFF, 0xFF, 0xFF, 0x0F],  // 2^32 - 1
            [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01],  // 2^64 - 1
        ]
        for length in lengths {
            expectProtobufCError(.malformedInput) {
                _ = try Auth_Rpc_V1_Request(serializedBytes: [0x2A] + length + [0x00])  // payload
            }
            expectProtobufCError(.malformedInput) {
                _ = try Auth_Rpc_V1_Request(serializedBytes: [0x12] + length + [0x41])  // method
            }
            expectProtobufCError(.malformedInput) {
                _ = try Auth_Rpc_V1_Metadata(serializedBytes: [0x32] + length)  // extra
            }
        }
    }

    @Test(
        "invalid UTF-8 in a string field throws invalidUTF8",
        arguments: [
            [0xFF],  // never valid
            [0xC3],  // truncated two-byte sequence
            [0xC0, 0x80],  // overlong encoding of U+0000
            [0xED, 0xA0, 0x80],  // UTF-16 surrogate U+D800
            [0xF4, 0x90, 0x80, 0x80],  // above U+10FFFF
            [0x61, 0x62, 0x80],  // stray continuation byte after ASCII
        ] as [[UInt8]]
    )
    func invalidUTF8(_ text: [UInt8]) {
        let hello: [UInt8] = [0x12, UInt8(text.count)] + text  // field 2 (service) LEN
        expectProtobufCError(.invalidUTF8, messageName: "auth.rpc.v1.Hello", fieldName: "service") {
            _ = try Auth_Rpc_V1_Hello(serializedBytes: hello)
        }
        // Nested: Frame{hello{service: …}} names the message that declares the field.
        let frame: [UInt8] = [0x0A, UInt8(hello.count)] + hello
        expectProtobufCError(.invalidUTF8, messageName: "auth.rpc.v1.Hello", fieldName: "service") {
            _ = try Auth_Rpc_V1_Frame(serializedBytes: frame)
        }
        // In an element of a repeated message field.
        let entry: [UInt8] = [0x12, UInt8(text.count)] + text  // MetadataEntry.value
        let metadata: [UInt8] = [0x32, 0x00, 0x32, UInt8(entry.count)] + entry
        expectProtobufCError(.invalidUTF8, messageName: "auth.rpc.v1.MetadataEntry", fieldName: "value") {
            _ = try Auth_Rpc_V1_Metadata(serializedBytes: metadata)
        }
    }

    /// Decodes `bytes` as several message types; any error must be a ProtobufCError (anything
    /// else fails the test by propagating). Returns whether the Frame decode succeeded.
    private func decodeAll(_ bytes: [UInt8]) throws -> Bool {
        let decoders: [() throws -> Void] = [
            { _ = try Auth_Rpc_V1_Request(serializedBytes: bytes) },
            { _ = try Auth_Rpc_V1_Response(serializedBytes: bytes) },
            { _ = try Auth_Rpc_V1_Metadata(serializedBytes: bytes) },
            { _ = try Auth_Rpc_V1_Status(serializedBytes: bytes) },
            { _ = try Auth_Rpc_V1_StatusDetails(serializedBytes: bytes) },
            { _ = try Auth_Rpc_V1_Hello(serializedBytes: bytes) },
            { _ = try Auth_Rpc_V1_GoAway(serializedBytes: bytes) },
            { _ = try Auth_Health_V1_HealthCheckResponse(serializedBytes: bytes) },
        ]
        for decode in decoders {
            do { try decode() } catch is ProtobufCError {}
        }
        do {
            _ = try Auth_Rpc_V1_Frame(serializedBytes: bytes)
            return true
        } catch is ProtobufCError {
            return false
        }
    }
}
