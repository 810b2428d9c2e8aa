import AuthProtobuf
import Testing

@testable import AuthRPC

/// Answers docs/protocol.md gives to questions a client written from it had to guess (issue 8,
/// item 6): each is pinned here so the page and the code cannot drift apart silently.
@Suite struct DocumentedProtocolAnswersTests {
    /// §1: an empty body parses (a `Frame` with nothing set); before Hello it is `hello_required`.
    @Test func anEmptyFirstFrameIsHelloRequired() throws {
        var machine = ServerConnectionStateMachine(maxConcurrentCalls: 2)
        let empty = try Auth_Rpc_V1_Frame(serializedBytes: [])
        guard case .closeWithError(let error) = machine.frameReceived(empty) else {
            Issue.record("an empty first frame must close the connection")
            return
        }
        #expect(error.code == .unauthenticated)
        #expect(error.reason == "hello_required")
    }

    /// §3: call id 0 is a protocol violation, also as the first request.
    @Test func callIDZeroClosesTheConnection() {
        var machine = ServerConnectionStateMachine(maxConcurrentCalls: 2)
        _ = machine.frameReceived(
            Auth_Rpc_V1_Frame(kind: .hello(Auth_Rpc_V1_Hello(protocolVersion: 1, service: "gateway")))
        )
        _ = machine.helloVerified(.success("gateway"))
        let zero = Auth_Rpc_V1_Frame(kind: .request(Auth_Rpc_V1_Request(callID: 0, method: "/a.b.v1.S/M")))
        guard case .closeWithError(let error) = machine.frameReceived(zero) else {
            Issue.record("call id 0 must close the connection")
            return
        }
        #expect(error.code == .invalidArgument)
        #expect(error.reason == "protocol_violation")
        #expect(machine.state == .closed)
    }

    /// §3: a payload that does not decode as the request message is `malformed_request`
    /// (INVALID_ARGUMENT) for that call, and the handler does not run.
    @Test func anUndecodablePayloadIsMalformedRequest() async throws {
        let method = MethodDescriptor(service: "auth.health.v1.Health", method: "Check")
        var router = RPCRouter()
        router.register(method, allowedCallers: .anyAuthenticated) {
            (_: Auth_Health_V1_HealthCheckRequest, _) -> Auth_Health_V1_HealthCheckResponse in
            Issue.record("the handler must not run")
            return Auth_Health_V1_HealthCheckResponse()
        }
        let route = try #require(router.route(forPath: method.path))
        // Field 1 (`service`, a string) sent with the varint wire type.
        await #expect {
            _ = try await route.handler([0x08, 0x01], ServerContext(method: method))
        } throws: { error in
            let error = error as? RPCError
            return error?.code == .invalidArgument && error?.reason == "malformed_request"
        }
    }
}
