import AuthProtobuf
import Testing

@Suite("encoding errors")
struct EncodingErrorTests {
    @Test("a string with an embedded NUL throws embeddedNUL", arguments: ["\0", "a\0", "\0b", "a\0b", "é\0ü"])
    func embeddedNUL(_ text: String) {
        expectProtobufCError(.embeddedNUL, messageName: "auth.rpc.v1.Hello", fieldName: "service") {
            _ = try Auth_Rpc_V1_Hello(service: text).serializedBytes()
        }
        // Deep inside: Frame -> Request -> Metadata -> MetadataEntry.value
        let frame = Auth_Rpc_V1_Frame(
            kind: .request(
                .init(metadata: .init(extra: [.init(key: "ok", value: "fine"), .init(key: "k", value: text)]))
            )
        )
        expectProtobufCError(.embeddedNUL, messageName: "auth.rpc.v1.MetadataEntry", fieldName: "value") {
            try frame.withSerializedBytes { _ in _ = Issue.record("body must not run") }
        }
    }

    @Test("bytes may contain NUL; only strings are refused")
    func bytesMayContainNUL() throws {
        #expect(try roundTrip(Auth_Rpc_V1_Hello(nonce: [0, 0])).nonce == [0, 0])
    }

    @Test("error descriptions name the type and field, never the contents")
    func descriptionsHideContents() {
        let secret = "s3cr3t-token-value"
        do {
            _ = try Auth_Rpc_V1_Metadata(requestID: "\(secret)\0").serializedBytes()
            Issue.record("expected an error")
        } catch {
            let text = "\(error)"
            #expect(!text.contains(secret))
            #expect(text.contains("auth.rpc.v1.Metadata.request_id"))
            #expect(text.contains("embeddedNUL"))
        }
        let invalid: [UInt8] = [0x12, 0x05] + Array("s3cr\u{FF}".utf8.prefix(4)) + [0xFF]
        do {
            _ = try Auth_Rpc_V1_Hello(serializedBytes: invalid)
            Issue.record("expected an error")
        } catch {
            #expect(!"\(error)".contains("s3cr"))
            #expect("\(error)".contains("auth.rpc.v1.Hello.service"))
        }
    }

    @Test("an encode that throws half-way frees everything (checked by the ASan/LSan run)")
    func throwHalfWay() {
        // The big strings and payload push the arena past its stack chunk into several heap
        // chunks before the NUL in the last entry aborts the encode.
        let entries = (0..<50).map {
            Auth_Rpc_V1_MetadataEntry(key: "k\($0)", value: String(repeating: "v", count: 3000))
        }
        let request = Auth_Rpc_V1_Request(
            callID: 1,
            method: String(repeating: "m", count: 100_000),
            metadata: Auth_Rpc_V1_Metadata(
                requestID: String(repeating: "r", count: 10_000),
                extra: entries + [Auth_Rpc_V1_MetadataEntry(key: "bad", value: "x\0y")]
            ),
            payload: [UInt8](repeating: 7, count: 1 << 20)
        )
        for _ in 0..<20 {
            expectProtobufCError(.embeddedNUL, fieldName: "value") {
                _ = try Auth_Rpc_V1_Frame(kind: .request(request)).serializedBytes()
            }
        }
    }

    @Test("an error thrown by the body propagates and frees the arena")
    func bodyThrows() {
        struct BodyError: Error {}
        let frame = Auth_Rpc_V1_Frame(kind: .request(.init(payload: [UInt8](repeating: 1, count: 100_000))))
        #expect(throws: BodyError.self) {
            try frame.withSerializedBytes { _ in throw BodyError() }
        }
    }
}
