import AuthProtobuf
import Testing

@testable import AuthRPC

@Suite struct ServerConnectionStateMachineTests {
    func hello() -> Auth_Rpc_V1_Frame {
        Auth_Rpc_V1_Frame(kind: .hello(Auth_Rpc_V1_Hello(protocolVersion: 1, service: "gateway")))
    }

    func request(_ id: UInt64) -> Auth_Rpc_V1_Frame {
        Auth_Rpc_V1_Frame(kind: .request(Auth_Rpc_V1_Request(callID: id, method: "/a.b.v1.S/M")))
    }

    func active(maxConcurrentCalls: Int = 2) -> ServerConnectionStateMachine {
        var machine = ServerConnectionStateMachine(maxConcurrentCalls: maxConcurrentCalls)
        guard case .verifyHello = machine.frameReceived(hello()) else {
            Issue.record("expected verifyHello")
            return machine
        }
        guard case .sendHelloAck = machine.helloVerified(.success("gateway")) else {
            Issue.record("expected sendHelloAck")
            return machine
        }
        return machine
    }

    @Test func firstFrameMustBeHello() {
        var machine = ServerConnectionStateMachine(maxConcurrentCalls: 2)
        guard case .closeWithError(let error) = machine.frameReceived(request(1)) else {
            Issue.record("a request before Hello must close the connection")
            return
        }
        #expect(error.reason == "hello_required")
        #expect(machine.state == .closed)
    }

    @Test func refusedCredentialCloses() {
        var machine = ServerConnectionStateMachine(maxConcurrentCalls: 2)
        _ = machine.frameReceived(hello())
        let refusal = RPCError(code: .unauthenticated, message: "no", reason: "invalid_service_credential")
        guard case .refuse(let error) = machine.helloVerified(.failure(refusal)) else {
            Issue.record("expected refuse")
            return
        }
        #expect(error == refusal)
        #expect(machine.state == .closed)
    }

    @Test func callsStartAndFinish() {
        var machine = active()
        guard case .startCall(let started) = machine.frameReceived(request(1)) else {
            Issue.record("expected startCall")
            return
        }
        #expect(started.callID == 1)
        #expect(machine.authenticatedCaller == "gateway")
        #expect(machine.callFinished(callID: 1, now: .now) == .send(.handlerResult, close: false))
        #expect(machine.callFinished(callID: 1, now: .now) == .drop)
    }

    @Test func callIDsMustIncrease() {
        var machine = active()
        _ = machine.frameReceived(request(5))
        guard case .closeWithError(let error) = machine.frameReceived(request(5)) else {
            Issue.record("a repeated call id must close the connection")
            return
        }
        #expect(error.reason == "protocol_violation")
    }

    @Test func concurrencyLimitRejectsWithoutClosing() {
        var machine = active(maxConcurrentCalls: 2)
        _ = machine.frameReceived(request(1))
        _ = machine.frameReceived(request(2))
        guard case .rejectCall(let id, let error) = machine.frameReceived(request(3)) else {
            Issue.record("the third call must be rejected")
            return
        }
        #expect(id == 3)
        #expect(error.code == .resourceExhausted)
        #expect(machine.state == .active)
        #expect(machine.callFinished(callID: 1, now: .now) == .send(.handlerResult, close: false))
        guard case .startCall = machine.frameReceived(request(4)) else {
            Issue.record("a call fits again once one finished")
            return
        }
    }

    @Test func cancelledCallSendsNothing() {
        var machine = active()
        _ = machine.frameReceived(request(1))
        guard
            case .cancelCall(let id) = machine.frameReceived(
                Auth_Rpc_V1_Frame(kind: .cancel(Auth_Rpc_V1_Cancel(callID: 1)))
            )
        else {
            Issue.record("expected cancelCall")
            return
        }
        #expect(id == 1)
        #expect(machine.callFinished(callID: 1, now: .now) == .drop)
    }

    @Test func gracefulShutdownLetsOpenCallsFinishAndRefusesNewOnes() {
        var machine = active(maxConcurrentCalls: 10)
        _ = machine.frameReceived(request(1))
        _ = machine.frameReceived(request(2))
        let shutdown = machine.beginGracefulShutdown()
        #expect(shutdown?.lastCallID == 2)
        #expect(shutdown?.closeNow == false)
        guard case .rejectCall(_, let error) = machine.frameReceived(request(3)) else {
            Issue.record("a call after GOAWAY must be refused")
            return
        }
        #expect(error.code == .unavailable)
        #expect(error.reason == "going_away")
        #expect(machine.callFinished(callID: 1, now: .now) == .send(.handlerResult, close: false))
        #expect(machine.callFinished(callID: 2, now: .now) == .send(.handlerResult, close: true))
        #expect(machine.state == .closed)
    }

    @Test func gracefulShutdownWithoutCallsClosesAtOnce() {
        var machine = active()
        #expect(machine.beginGracefulShutdown()?.closeNow == true)
        #expect(machine.beginGracefulShutdown() == nil)
    }

    @Test func pingIsAnswered() {
        var machine = active()
        guard
            case .sendPong(let payload) = machine.frameReceived(
                Auth_Rpc_V1_Frame(kind: .ping(Auth_Rpc_V1_Ping(payload: 42)))
            )
        else {
            Issue.record("expected sendPong")
            return
        }
        #expect(payload == 42)
    }

    @Test func serverOnlyFramesFromClientClose() {
        var machine = active()
        guard
            case .closeWithError = machine.frameReceived(
                Auth_Rpc_V1_Frame(kind: .response(Auth_Rpc_V1_Response(callID: 1)))
            )
        else {
            Issue.record("a Response from a client must close the connection")
            return
        }
        var empty = active()
        guard case .closeWithError = empty.frameReceived(Auth_Rpc_V1_Frame()) else {
            Issue.record("a frame with nothing set must close the connection")
            return
        }
    }
}
