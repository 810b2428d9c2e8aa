import AuthProtobuf
import Testing

@Suite("auth.rpc.v1 envelope round trips")
struct EnvelopeRoundTripTests {
    @Test("every Frame kind, fully populated", arguments: Samples.frameKinds)
    func frameKind(_ kind: Auth_Rpc_V1_Frame.Kind) throws {
        let frame = Auth_Rpc_V1_Frame(kind: kind)
        #expect(try roundTrip(frame) == frame)
    }

    @Test("every Frame kind with default contents is still present", arguments: Samples.emptyFrameKinds)
    func emptyFrameKind(_ kind: Auth_Rpc_V1_Frame.Kind) throws {
        let frame = Auth_Rpc_V1_Frame(kind: kind)
        let decoded = try roundTrip(frame)
        #expect(decoded.kind == kind)
        #expect(try frame.serializedBytes().count == 2)  // tag + zero length
    }

    @Test("a Frame with no kind encodes to nothing and decodes back")
    func frameWithoutKind() throws {
        let frame = Auth_Rpc_V1_Frame()
        #expect(try frame.serializedBytes() == [])
        #expect(try roundTrip(frame).kind == nil)
        let decoded = try Auth_Rpc_V1_Frame(serializedBytes: UnsafeRawBufferPointer(start: nil, count: 0))
        #expect(decoded == frame)
    }

    @Test("every message type on its own")
    func everyMessage() throws {
        for kind in Samples.frameKinds {
            switch kind {
            case .hello(let m): #expect(try roundTrip(m) == m)
            case .helloAck(let m): #expect(try roundTrip(m) == m)
            case .request(let m): #expect(try roundTrip(m) == m)
            case .response(let m): #expect(try roundTrip(m) == m)
            case .cancel(let m): #expect(try roundTrip(m) == m)
            case .ping(let m): #expect(try roundTrip(m) == m)
            case .pong(let m): #expect(try roundTrip(m) == m)
            case .goAway(let m): #expect(try roundTrip(m) == m)
            case .challenge(let m): #expect(try roundTrip(m) == m)
            }
        }
        #expect(try roundTrip(Samples.metadata) == Samples.metadata)
        #expect(try roundTrip(Samples.status) == Samples.status)
        #expect(try roundTrip(Samples.status.details!) == Samples.status.details!)
        let entry = Auth_Rpc_V1_MetadataEntry(key: "k", value: "v")
        #expect(try roundTrip(entry) == entry)
        let retry = Auth_Rpc_V1_RetryInfo(retryAfterSeconds: .max)
        #expect(try roundTrip(retry) == retry)
        let attempts = Auth_Rpc_V1_AttemptsInfo(attemptsRemaining: 3)
        #expect(try roundTrip(attempts) == attempts)
        let violation = Auth_Rpc_V1_FieldViolation(field: "f", reason: "r", description: "d")
        #expect(try roundTrip(violation) == violation)
    }

    @Test("extreme scalar values")
    func extremeScalars() throws {
        for value in [Int64.min, -1, 0, 1, .max] {
            let message = Auth_Session_V1_RotateSigningKeyResponse(signsFrom: value)
            #expect(try roundTrip(message).signsFrom == value)
        }
        for value in [UInt64.min, 1, 1 << 63, .max] {
            #expect(try roundTrip(Auth_Rpc_V1_Ping(payload: value)).payload == value)
        }
        for value in [UInt32.min, 1, .max] {
            #expect(try roundTrip(Auth_Rpc_V1_HelloAck(maxFrameSize: value)).maxFrameSize == value)
        }
    }

    @Test("every StatusCode", arguments: Auth_Rpc_V1_StatusCode.allKnownCases)
    func statusCode(_ code: Auth_Rpc_V1_StatusCode) throws {
        let status = Auth_Rpc_V1_Status(code: code, message: "m")
        let decoded = try roundTrip(status)
        #expect(decoded.code == code)
        #expect(Auth_Rpc_V1_StatusCode(rawValue: code.rawValue) == code)
        let goAway = Auth_Rpc_V1_GoAway(code: code)
        #expect(try roundTrip(goAway).code == code)
    }

    @Test("StatusCode numbers are gRPC's")
    func statusCodeNumbers() {
        #expect(Auth_Rpc_V1_StatusCode.allKnownCases.map(\.rawValue) == Array(0...16))
        #expect(Auth_Rpc_V1_StatusCode.ok.rawValue == 0)
        #expect(Auth_Rpc_V1_StatusCode.invalidArgument.rawValue == 3)
        #expect(Auth_Rpc_V1_StatusCode.internal.rawValue == 13)
        #expect(Auth_Rpc_V1_StatusCode.unauthenticated.rawValue == 16)
        #expect(Auth_Rpc_V1_StatusCode() == .ok)
        #expect(Auth_Rpc_V1_Status().code == .ok)
    }

    @Test("unrecognized enum values survive a round trip", arguments: [Int32.min, -5, -1, 17, 99, .max])
    func unrecognizedEnum(_ number: Int32) throws {
        let code = Auth_Rpc_V1_StatusCode(rawValue: number)
        #expect(code == .unrecognized(number))
        #expect(code.rawValue == number)
        let decoded = try roundTrip(Auth_Rpc_V1_Status(code: code))
        #expect(decoded.code == .unrecognized(number))
        #expect(decoded.code.rawValue == number)
        let health = try roundTrip(Auth_Health_V1_HealthCheckResponse(status: .unrecognized(number)))
        #expect(health.status.rawValue == number)
    }

    @Test("enum equality and hashing go by number")
    func enumEquality() {
        #expect(Auth_Rpc_V1_StatusCode.unrecognized(3) == .invalidArgument)
        #expect(Auth_Rpc_V1_StatusCode.unrecognized(0) == Auth_Rpc_V1_StatusCode())
        #expect(Auth_Rpc_V1_StatusCode.unrecognized(3) != .unrecognized(4))
        let set: Set<Auth_Rpc_V1_StatusCode> = [.unrecognized(3), .invalidArgument, .unrecognized(99)]
        #expect(set.count == 2)
    }

    @Test("repeated fields keep order, count and empty elements", arguments: [0, 1, 2, 40, 1000])
    func repeatedFields(_ count: Int) throws {
        let entries = (0..<count).map { i in
            let value = i.isMultiple(of: 3) ? "" : String(repeating: "v", count: i)
            return Auth_Rpc_V1_MetadataEntry(key: "key-\(i)", value: value)
        }
        let metadata = Auth_Rpc_V1_Metadata(requestID: "r", extra: entries)
        let decoded = try roundTrip(metadata)
        #expect(decoded.extra.count == count)
        #expect(decoded == metadata)

        let violations = (0..<count).map { Auth_Rpc_V1_FieldViolation(field: "f\($0)") }
        let details = Auth_Rpc_V1_StatusDetails(fieldViolations: violations)
        #expect(try roundTrip(details) == details)
    }

    @Test("an empty message field is present; an unset one is absent")
    func emptyVersusAbsent() throws {
        let absent = Auth_Rpc_V1_Response(callID: 1)
        let empty = Auth_Rpc_V1_Response(callID: 1, status: Auth_Rpc_V1_Status())
        #expect(absent != empty)
        #expect(try roundTrip(absent).status == nil)
        #expect(try roundTrip(empty).status == Auth_Rpc_V1_Status())

        let details = Auth_Rpc_V1_StatusDetails(retry: Auth_Rpc_V1_RetryInfo(), attempts: nil)
        let decoded = try roundTrip(details)
        #expect(decoded.retry == Auth_Rpc_V1_RetryInfo())
        #expect(decoded.attempts == nil)

        let request = try roundTrip(Auth_Rpc_V1_Request(metadata: Auth_Rpc_V1_Metadata()))
        #expect(request.metadata == Auth_Rpc_V1_Metadata())
        #expect(try roundTrip(Auth_Rpc_V1_Request()).metadata == nil)
    }

    @Test(
        "unicode strings",
        arguments: [
            "", "a", "héllo wörld", "日本語のテキスト", "🙂👍🏽🇸🇪",
            "e\u{301}", "\u{FEFF}bom", "\u{10FFFF}",
            "tab\tnew\nline", String(repeating: "ü", count: 10_000),
        ]
    )
    func unicodeStrings(_ text: String) throws {
        let status = Auth_Rpc_V1_Status(message: text, reason: text)
        let decoded = try roundTrip(status)
        #expect(decoded.message == text)
        #expect(Array(decoded.message.utf8) == Array(text.utf8))
        let entry = try roundTrip(Auth_Rpc_V1_MetadataEntry(key: text, value: text))
        #expect(entry.value == text)
    }

    @Test("bytes with zero bytes are kept whole")
    func bytesWithZeros() throws {
        let payloads: [[UInt8]] = [[0], [0, 0, 0], [1, 0, 2], [0xFF, 0, 0xFF], Array(0...255)]
        for payload in payloads {
            let request = Auth_Rpc_V1_Request(callID: 1, payload: payload)
            #expect(try roundTrip(request).payload == payload)
            let hello = Auth_Rpc_V1_Hello(nonce: payload, mac: payload.reversed())
            #expect(try roundTrip(hello) == hello)
        }
    }

    @Test("large payloads", arguments: [1 << 20, (4 << 20) + 3])
    func largePayload(_ size: Int) throws {
        var random = SplitMix64(seed: UInt64(size))
        var payload = random.bytes(count: size)
        payload[0] = 0
        payload[size - 1] = 0
        let frame = Auth_Rpc_V1_Frame(kind: .request(Auth_Rpc_V1_Request(callID: 5, method: "/m", payload: payload)))
        let bytes = try frame.serializedBytes()
        #expect(bytes.count > size)
        let decoded = try Auth_Rpc_V1_Frame(serializedBytes: bytes)
        #expect(decoded == frame)
    }

    @Test("many large strings spread over several arena chunks")
    func manyStrings() throws {
        let entries = (0..<200).map { i in
            let letter = Character(UnicodeScalar(65 + i % 26)!)
            return Auth_Rpc_V1_MetadataEntry(key: "k\(i)", value: String(repeating: letter, count: 97 * i))
        }
        let frame = Auth_Rpc_V1_Frame(
            kind: .request(Auth_Rpc_V1_Request(metadata: Auth_Rpc_V1_Metadata(requestID: "x", extra: entries)))
        )
        #expect(try roundTrip(frame) == frame)
    }

    @Test("withSerializedBytes hands over the same bytes as serializedBytes and passes the result through")
    func withSerializedBytes() throws {
        let frame = Auth_Rpc_V1_Frame(kind: Samples.frameKinds[2])
        let copied = try frame.serializedBytes()
        let (count, first) = try frame.withSerializedBytes { buffer in (buffer.count, [UInt8](buffer)) }
        #expect(count == copied.count)
        #expect(first == copied)
        let decoded = try frame.withSerializedBytes { try Auth_Rpc_V1_Frame(serializedBytes: $0) }
        #expect(decoded == frame)
    }

    @Test("memberwise and default initializers agree")
    func initializers() {
        let explicit = Auth_Rpc_V1_Request(callID: 0, method: "", timeoutUS: 0, metadata: nil, payload: [])
        #expect(Auth_Rpc_V1_Request() == explicit)
        var request = Auth_Rpc_V1_Request()
        request.callID = 3
        request.metadata = Auth_Rpc_V1_Metadata(endUserIP: "192.0.2.1")
        #expect(request == Auth_Rpc_V1_Request(callID: 3, metadata: Auth_Rpc_V1_Metadata(endUserIP: "192.0.2.1")))
        #expect(Auth_Rpc_V1_Frame.protoMessageName == "auth.rpc.v1.Frame")
        #expect(Auth_Health_V1_HealthCheckRequest.protoMessageName == "auth.health.v1.HealthCheckRequest")
    }
}
