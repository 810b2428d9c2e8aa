import AuthProtobuf
import Testing

/// Encodes `message` and decodes the bytes again.
func roundTrip<M: ProtobufCMessage>(_ message: M) throws -> M {
    let bytes = try message.serializedBytes()
    return try M(serializedBytes: bytes)
}

/// Expects `body` to throw a ``ProtobufCError`` with the given code (and field, if given).
func expectProtobufCError(
    _ code: ProtobufCError.Code,
    messageName: String? = nil,
    fieldName: String? = nil,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Void
) {
    let error = #expect(throws: ProtobufCError.self, sourceLocation: sourceLocation) { try body() }
    guard let error else { return }
    #expect(error.code == code, sourceLocation: sourceLocation)
    if let messageName {
        #expect(error.messageName == messageName, sourceLocation: sourceLocation)
    }
    if let fieldName {
        #expect(error.fieldName == fieldName, sourceLocation: sourceLocation)
    }
}

/// SplitMix64: a small deterministic generator, so failures reproduce.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        self.state = seed
    }

    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func bytes(count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &self) }
    }
}

/// A sample of every frame kind with every field set, used by several suites.
///
/// Computed rather than stored: LeakSanitizer cannot follow Swift's tagged pointers inside
/// global constants and would report them as leaks.
enum Samples {
    static var metadata: Auth_Rpc_V1_Metadata {
        Auth_Rpc_V1_Metadata(
            requestID: "req-0001",
            traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            tracestate: "vendor=value",
            callerService: "gateway",
            endUserIP: "2001:db8::1",
            extra: [
                Auth_Rpc_V1_MetadataEntry(key: "a", value: "1"),
                Auth_Rpc_V1_MetadataEntry(key: "", value: ""),
                Auth_Rpc_V1_MetadataEntry(key: "unicode", value: "héllo wörld ✓"),
            ]
        )
    }

    static var status: Auth_Rpc_V1_Status {
        Auth_Rpc_V1_Status(
            code: .resourceExhausted,
            message: "too many attempts",
            reason: "rate_limited",
            details: Auth_Rpc_V1_StatusDetails(
                retry: Auth_Rpc_V1_RetryInfo(retryAfterSeconds: 30),
                attempts: Auth_Rpc_V1_AttemptsInfo(attemptsRemaining: 0),
                fieldViolations: [
                    Auth_Rpc_V1_FieldViolation(field: "phone", reason: "invalid_format", description: "not E.164"),
                    Auth_Rpc_V1_FieldViolation(field: "code", reason: "", description: ""),
                ]
            )
        )
    }

    static var frameKinds: [Auth_Rpc_V1_Frame.Kind] {
        [
            .hello(
                Auth_Rpc_V1_Hello(
                    protocolVersion: 2,
                    service: "gateway",
                    nonce: Array(0..<32),
                    mac: [UInt8](repeating: 0xAB, count: 32),
                    serverService: "session"
                )
            ),
            .challenge(Auth_Rpc_V1_Challenge(protocolVersion: 2, service: "session", nonce: Array(32..<64))),
            .helloAck(
                Auth_Rpc_V1_HelloAck(
                    protocolVersion: 1,
                    service: "session",
                    maxFrameSize: 4 << 20,
                    maxConcurrentCalls: 128,
                    idleTimeoutMS: 60_000
                )
            ),
            .request(
                Auth_Rpc_V1_Request(
                    callID: .max,
                    method: "/auth.health.v1.Health/Check",
                    timeoutUS: 2_500_000,
                    metadata: metadata,
                    payload: [0, 1, 0, 2, 0]
                )
            ),
            .response(Auth_Rpc_V1_Response(callID: 7, status: status, payload: [])),
            .cancel(Auth_Rpc_V1_Cancel(callID: 7)),
            .ping(Auth_Rpc_V1_Ping(payload: 0xDEAD_BEEF_CAFE_F00D)),
            .pong(Auth_Rpc_V1_Pong(payload: 1)),
            .goAway(Auth_Rpc_V1_GoAway(lastCallID: 99, code: .unavailable, message: "draining")),
        ]
    }

    /// The same kinds with every field at its default: each must still arrive as set.
    static var emptyFrameKinds: [Auth_Rpc_V1_Frame.Kind] {
        [
            .hello(.init()), .helloAck(.init()), .request(.init()), .response(.init()),
            .cancel(.init()), .ping(.init()), .pong(.init()), .goAway(.init()),
        ]
    }
}
