import AuthProtobuf
import Testing

@testable import AuthRPC

/// The per-call state of ``ServerConnectionStateMachine``: slots, cancellation, deadlines and
/// draining, without I/O and with made-up instants.
@Suite struct ServerCallStateTests {
    func request(_ id: UInt64) -> Auth_Rpc_V1_Frame {
        Auth_Rpc_V1_Frame(kind: .request(Auth_Rpc_V1_Request(callID: id, method: "/a.b.v1.S/M")))
    }

    func cancel(_ id: UInt64) -> Auth_Rpc_V1_Frame {
        Auth_Rpc_V1_Frame(kind: .cancel(Auth_Rpc_V1_Cancel(callID: id)))
    }

    func active(maxConcurrentCalls: Int) -> ServerConnectionStateMachine {
        var machine = ServerConnectionStateMachine(maxConcurrentCalls: maxConcurrentCalls)
        _ = machine.frameReceived(
            Auth_Rpc_V1_Frame(kind: .hello(Auth_Rpc_V1_Hello(protocolVersion: 1, service: "gateway")))
        )
        _ = machine.helloVerified(.success("gateway"))
        return machine
    }

    func isRejectedForLimit(_ action: ServerConnectionStateMachine.FrameAction) -> Bool {
        guard case .rejectCall(_, let error) = action else { return false }
        return error.reason == "too_many_concurrent_calls"
    }

    @Test func cancelledCallHoldsItsSlotUntilItsHandlerEnds() {
        var machine = active(maxConcurrentCalls: 1)
        _ = machine.frameReceived(request(1))
        guard case .cancelCall(1) = machine.frameReceived(cancel(1)) else {
            Issue.record("expected cancelCall")
            return
        }
        #expect(machine.callState(1) == .abandoned)
        #expect(machine.openCalls.isEmpty)
        // The handler has not ended: no room for another call yet.
        #expect(isRejectedForLimit(machine.frameReceived(request(2))))
        // A second Cancel of the same call changes nothing.
        guard case .none = machine.frameReceived(cancel(1)) else {
            Issue.record("a repeated Cancel must be ignored")
            return
        }
        #expect(machine.callFinished(callID: 1, now: .now) == .drop)
        guard case .startCall = machine.frameReceived(request(3)) else {
            Issue.record("the slot must be free once the handler ended")
            return
        }
    }

    @Test func callAnsweredAtItsDeadlineHoldsItsSlotUntilItsHandlerEnds() {
        let start = ContinuousClock.now
        var machine = active(maxConcurrentCalls: 2)
        _ = machine.frameReceived(request(1))
        _ = machine.frameReceived(request(2))
        machine.setDeadline(start + .seconds(1), forCall: 1)
        machine.setDeadline(start + .seconds(3), forCall: 2)
        #expect(machine.nextDeadline == start + .seconds(1))
        #expect(machine.deadlinesPassed(now: start + .milliseconds(999)).expired.isEmpty)
        #expect(machine.deadlinesPassed(now: start + .seconds(1)) == .init(expired: [1], close: false))
        // Answered once: not again, and the next deadline is the other call's.
        #expect(machine.deadlinesPassed(now: start + .seconds(2)).expired.isEmpty)
        #expect(machine.nextDeadline == start + .seconds(3))
        #expect(machine.callState(1) == .abandoned)
        #expect(isRejectedForLimit(machine.frameReceived(request(3))))
        // The handler ends later: nothing more is sent, the slot frees.
        #expect(machine.callFinished(callID: 1, now: .now) == .drop)
        guard case .startCall = machine.frameReceived(request(4)) else {
            Issue.record("the slot must be free once the handler ended")
            return
        }
    }

    @Test func drainingConnectionClosesWhenItsLastCallIsCancelled() {
        var machine = active(maxConcurrentCalls: 4)
        _ = machine.frameReceived(request(1))
        _ = machine.frameReceived(request(2))
        #expect(machine.beginGracefulShutdown()?.closeNow == false)
        guard case .cancelCall(1) = machine.frameReceived(cancel(1)) else {
            Issue.record("expected cancelCall while a call still runs")
            return
        }
        guard case .cancelCallThenClose(2) = machine.frameReceived(cancel(2)) else {
            Issue.record("cancelling the last running call of a draining connection must close it")
            return
        }
        #expect(machine.state == .closed)
    }

    /// A handler that ends after its call's deadline, before the deadline timer has fired, gets
    /// the timer's answer, not its own: the rule does not depend on which comes first.
    @Test func handlerEndingPastItsDeadlineIsAnsweredDeadlineExceeded() {
        let start = ContinuousClock.now
        var machine = active(maxConcurrentCalls: 4)
        _ = machine.frameReceived(request(1))
        _ = machine.frameReceived(request(2))
        _ = machine.frameReceived(request(3))
        machine.setDeadline(start + .seconds(1), forCall: 1)
        machine.setDeadline(start + .seconds(1), forCall: 2)
        #expect(machine.callFinished(callID: 1, now: start + .milliseconds(999)) == .send(.handlerResult, close: false))
        #expect(machine.callFinished(callID: 2, now: start + .seconds(1)) == .send(.deadlineExceeded, close: false))
        // Without a deadline, never late.
        #expect(machine.callFinished(callID: 3, now: start + .seconds(3600)) == .send(.handlerResult, close: false))
        // The last call of a draining connection, late: answered, then the connection closes.
        _ = machine.frameReceived(request(4))
        machine.setDeadline(start + .seconds(1), forCall: 4)
        #expect(machine.beginGracefulShutdown()?.closeNow == false)
        #expect(machine.callFinished(callID: 4, now: start + .seconds(2)) == .send(.deadlineExceeded, close: true))
        #expect(machine.state == .closed)
    }

    @Test func drainingConnectionClosesWhenItsLastCallTimesOut() {
        let start = ContinuousClock.now
        var machine = active(maxConcurrentCalls: 4)
        _ = machine.frameReceived(request(1))
        _ = machine.frameReceived(request(2))
        machine.setDeadline(start + .seconds(1), forCall: 2)
        #expect(machine.beginGracefulShutdown()?.closeNow == false)
        #expect(machine.callFinished(callID: 1, now: .now) == .send(.handlerResult, close: false))
        #expect(machine.deadlinesPassed(now: start + .seconds(1)) == .init(expired: [2], close: true))
        #expect(machine.state == .closed)
    }

    @Test func drainingConnectionClosesWhenTheLastRunningCallEndsEvenIfAnAbandonedOneRuns() {
        var machine = active(maxConcurrentCalls: 4)
        _ = machine.frameReceived(request(1))
        _ = machine.frameReceived(request(2))
        _ = machine.frameReceived(cancel(1))
        #expect(machine.beginGracefulShutdown()?.closeNow == false)
        #expect(machine.callFinished(callID: 2, now: .now) == .send(.handlerResult, close: true))
        // The abandoned handler is cancelled with the connection.
        #expect(machine.connectionClosed() == [1])
    }

    @Test func peerGoAwayWithOnlyAbandonedCallsClosesAtOnce() {
        var machine = active(maxConcurrentCalls: 4)
        _ = machine.frameReceived(request(1))
        _ = machine.frameReceived(cancel(1))
        guard
            case .closeWhenIdle(closeNow: true) = machine.frameReceived(
                Auth_Rpc_V1_Frame(kind: .goAway(Auth_Rpc_V1_GoAway(lastCallID: 1, code: .ok, reason: "client_closing")))
            )
        else {
            Issue.record("nothing runs: the connection closes now")
            return
        }
    }
}
