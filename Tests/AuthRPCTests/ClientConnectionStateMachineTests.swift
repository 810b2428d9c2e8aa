import AuthProtobuf
import Testing

@testable import AuthRPC

@Suite struct ClientConnectionStateMachineTests {
    @Test func callsWaitForHelloAck() {
        var machine = ClientConnectionStateMachine<String>(maxConcurrentCalls: 10)
        guard case .unavailable = machine.startCall("a") else {
            Issue.record("no call before HelloAck")
            return
        }
        let accepted = machine.helloAckReceived(Auth_Rpc_V1_HelloAck(maxConcurrentCalls: 2))
        #expect(accepted)
        #expect(machine.maxConcurrentCalls == 2)
        guard case .send(let first) = machine.startCall("a"), case .send(let second) = machine.startCall("b") else {
            Issue.record("two calls fit")
            return
        }
        #expect((first, second) == (1, 2))
        guard case .unavailable = machine.startCall("c") else {
            Issue.record("the server's limit applies")
            return
        }
        do {
            let value = machine.responseReceived(callID: 1)
            #expect(value == "a")
        }
        do {
            let value = machine.responseReceived(callID: 1)
            #expect(value == nil)
        }
    }

    @Test func goAwayHandsBackUnstartedCalls() {
        var machine = ClientConnectionStateMachine<String>(maxConcurrentCalls: 10)
        _ = machine.helloAckReceived(Auth_Rpc_V1_HelloAck())
        for name in ["a", "b", "c"] { _ = machine.startCall(name) }
        do {
            let value = machine.goAwayReceived(lastCallID: 1)
            #expect(value == ["b", "c"])
        }
        #expect(machine.state == .goingAway)
        #expect(!machine.hasCapacity)
        #expect(!machine.isDrained)
        do {
            let value = machine.responseReceived(callID: 1)
            #expect(value == "a")
        }
        #expect(machine.isDrained)
    }

    @Test func closeFailsEverythingOpen() {
        var machine = ClientConnectionStateMachine<String>(maxConcurrentCalls: 10)
        _ = machine.helloAckReceived(Auth_Rpc_V1_HelloAck())
        _ = machine.startCall("a")
        _ = machine.startCall("b")
        do {
            let value = machine.cancel(callID: 2)
            #expect(value == "b")
        }
        do {
            let value = machine.closed()
            #expect(value == ["a"])
        }
        #expect(machine.openCallCount == 0)
    }
}
