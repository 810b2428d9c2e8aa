import AuthProtobuf
import Testing

@testable import AuthRPC

@Suite struct RPCErrorTests {
    @Test func statusRoundTripKeepsEveryDetail() throws {
        let error = RPCError(
            code: .unauthenticated,
            message: "Wrong code.",
            reason: "invalid_code",
            retryAfterSeconds: 60,
            attemptsRemaining: 3,
            fieldViolations: [.init(field: "code", reason: "mismatch", description: "no")]
        )
        let bytes = try error.status.serializedBytes()
        let decoded = try #require(RPCError(status: try Auth_Rpc_V1_Status(serializedBytes: bytes)))
        #expect(decoded == error)
        #expect(error.status.code == .unauthenticated)
        #expect(error.status.code.rawValue == 16)
    }

    @Test func zeroValuedDetailsSurvive() throws {
        let error = RPCError(code: .resourceExhausted, message: "m", attemptsRemaining: 0)
        let decoded = try #require(RPCError(status: error.status))
        #expect(decoded.attemptsRemaining == 0)
        #expect(decoded.retryAfterSeconds == nil)
    }

    @Test func okStatusIsNoError() {
        #expect(RPCError(status: Auth_Rpc_V1_Status()) == nil)
    }

    @Test func unknownErrorsDoNotLeakText() {
        struct Secret: Error { let password = "hunter2" }
        let converted = RPCError(converting: Secret())
        #expect(converted.code == .internal)
        #expect(!converted.message.contains("hunter2"))
    }

    @Test func codeNames() {
        #expect(RPCError.Code.deadlineExceeded.description == "DEADLINE_EXCEEDED")
        #expect(RPCError.Code.unauthenticated.rawValue == 16)
        #expect(RPCError.Code(rawValue: 99).description == "CODE_99")
    }
}
