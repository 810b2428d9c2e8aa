import AuthProtobuf
import AuthRPC
import AuthTestSupport
import Logging
import Synchronization
import Testing

@testable import AuthRPCNIO

let stubbornMethod = MethodDescriptor(service: "auth.test.v1.Test", method: "Stubborn")

/// A handler that ignores cancellation and ends only when the test opens its gate: the kind
/// of work (a C call, a CPU loop) that cancelling cannot stop.
final class StubbornHandler: Sendable {
    let started = Atomic<Int>(0)
    let ended = Atomic<Int>(0)
    private let gate = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func open() {
        let waiters = gate.withLock { gate in
            gate.open = true
            defer { gate.waiters = [] }
            return gate.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func router() -> RPCRouter {
        var router = TestHandlers().router()
        router.register(stubbornMethod, allowedCallers: .anyAuthenticated) {
            (_: HealthRequest, _: ServerContext) -> HealthResponse in
            self.started.add(1, ordering: .relaxed)
            await withCheckedContinuation { continuation in
                let resumeNow = self.gate.withLock { gate in
                    if gate.open { return true }
                    gate.waiters.append(continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
            self.ended.add(1, ordering: .relaxed)
            return HealthResponse(status: .serving)
        }
        return router
    }

    /// Waits (bounded) until `count` handlers have started.
    func waitUntilStarted(_ count: Int) async throws {
        try await waitUntil { self.started.load(ordering: .relaxed) >= count }
    }

    /// Waits (bounded) until `count` handlers have ended.
    func waitUntilEnded(_ count: Int) async throws {
        try await waitUntil { self.ended.load(ordering: .relaxed) >= count }
    }

    /// Polls without blocking a thread (the raw connection's reads do block one).
    private func waitUntil(_ condition: () -> Bool) async throws {
        for _ in 0..<500 where !condition() {
            try await Task.sleep(for: .milliseconds(10))
        }
        try #require(condition())
    }
}

func withStubbornServer(
    limits: ConnectionLimits = ConnectionLimits(),
    grace: Duration = .seconds(60),
    logger: Logger = quietLogger(),
    _ body: (RPCServer, Int, StubbornHandler) async throws -> Void
) async throws {
    let handler = StubbornHandler()
    let server = try RPCServer(
        configuration: RPCServerConfiguration(
            serviceName: "test-server",
            secret: testSecret,
            limits: limits,
            shutdownGracePeriod: grace
        ),
        router: handler.router(),
        logger: logger
    )
    let port = try await server.bind()
    let running = Task { try await server.run() }
    defer { handler.open() }
    do {
        try await body(server, port, handler)
    } catch {
        handler.open()
        server.beginShutdown()
        try? await running.value
        throw error
    }
    handler.open()
    server.beginShutdown()
    try await running.value
}

func authenticatedRawConnection(port: Int) async throws -> RawFrameConnection {
    let (connection, answer) = try await RawFrameConnection.authenticated(
        port: port,
        service: "raw",
        secret: testSecret
    )
    guard case .helloAck = answer?.kind else {
        throw RPCError(code: .internal, message: "no HelloAck: \(String(describing: answer))", reason: "test")
    }
    return connection
}

func requestFrame(_ callID: UInt64, _ method: MethodDescriptor, _ value: String = "") throws -> Auth_Rpc_V1_Frame {
    Auth_Rpc_V1_Frame(
        kind: .request(
            Auth_Rpc_V1_Request(
                callID: callID,
                method: method.path,
                payload: try HealthRequest(service: value).serializedBytes()
            )
        )
    )
}

/// Sends echo calls one at a time from `firstCallID` on until one is served (a freed slot
/// reaches the server's state on its event loop a little after the handler ends); false after
/// about 200 refusals.
func echoIsServedSoon(on raw: RawFrameConnection, firstCallID: UInt64) async throws -> Bool {
    for callID in firstCallID..<(firstCallID + 200) {
        try await raw.send(requestFrame(callID, echoMethod, "1"))
        guard case .response(let response) = try await raw.receiveFrame()?.kind else {
            Issue.record("expected a Response")
            return false
        }
        #expect(response.callID == callID)
        if response.status == nil { return true }
    }
    return false
}

@Suite struct ServerCallLifecycleTests {
    @Test func cancelledCallKeepsItsSlotUntilItsHandlerEnds() async throws {
        try await withStubbornServer(limits: ConnectionLimits(maxConcurrentCalls: 1)) { _, port, handler in
            let raw = try await authenticatedRawConnection(port: port)
            try await raw.send(requestFrame(1, stubbornMethod))
            try await handler.waitUntilStarted(1)
            try await raw.send(Auth_Rpc_V1_Frame(kind: .cancel(Auth_Rpc_V1_Cancel(callID: 1))))
            try await raw.send(requestFrame(2, echoMethod, "1"))
            guard case .response(let refused) = try await raw.receiveFrame()?.kind else {
                Issue.record("expected a Response")
                return
            }
            #expect(refused.callID == 2)
            #expect(refused.status?.reason == "too_many_concurrent_calls")
            #expect(handler.ended.load(ordering: .relaxed) == 0)

            // The handler ends: the slot frees (the server learns it on its event loop, so
            // retry a few times), and nothing is ever sent for the cancelled call.
            handler.open()
            try await handler.waitUntilEnded(1)
            #expect(try await echoIsServedSoon(on: raw, firstCallID: 3))
            #expect(handler.ended.load(ordering: .relaxed) == 1)
        }
    }

    /// Off-loop handlers start when the read that carried their requests has been handled: a
    /// call cancelled in that same read ends without its handler, and frees its slot.
    @Test func callCancelledInTheReadThatCarriedItNeverStartsItsHandler() async throws {
        try await withStubbornServer(limits: ConnectionLimits(maxConcurrentCalls: 1)) { _, port, handler in
            let raw = try await authenticatedRawConnection(port: port)
            try await raw.send([
                requestFrame(1, stubbornMethod),
                Auth_Rpc_V1_Frame(kind: .cancel(Auth_Rpc_V1_Cancel(callID: 1))),
            ])
            // The slot frees once the server has ended the call on its event loop: retry.
            #expect(try await echoIsServedSoon(on: raw, firstCallID: 2))
            #expect(handler.started.load(ordering: .relaxed) == 0)
        }
    }

    @Test func drainingConnectionClosesAsSoonAsItsLastCallIsCancelled() async throws {
        try await withStubbornServer(grace: .seconds(3600)) { server, port, handler in
            let raw = try await authenticatedRawConnection(port: port)
            try await raw.send(requestFrame(1, stubbornMethod))
            try await handler.waitUntilStarted(1)
            server.beginShutdown()
            guard case .goAway(let goAway) = try await raw.receiveFrame()?.kind else {
                Issue.record("expected GoAway")
                return
            }
            #expect(goAway.reason == "going_away")
            #expect(goAway.lastCallID == 1)
            try await raw.send(Auth_Rpc_V1_Frame(kind: .cancel(Auth_Rpc_V1_Cancel(callID: 1))))
            // Closed now, not at the end of the hour-long grace period (the receive timeout is 30 s).
            let closed = await raw.isClosedByPeer()
            #expect(closed)
        }
    }
}

@Suite struct ClientCloseTests {
    /// docs/protocol.md §5: a closing client sends GoAway `client_closing`; open calls are
    /// still answered, then the connection closes.
    @Test func clientCloseLetsOpenCallsFinish() async throws {
        let log = CapturedLog()
        try await withStubbornServer(logger: log.logger(level: .debug)) { _, port, handler in
            let (client, transport) = makeClient(port: port)
            #expect(try await client.echo(1) == 1)
            let call = Task { () async throws -> HealthResponse in
                try await client.unary(
                    stubbornMethod,
                    request: HealthRequest(),
                    options: CallOptions(timeout: .seconds(30))
                )
            }
            try await handler.waitUntilStarted(1)
            let shutdown = Task { await transport.shutdown() }
            // Only once the server has the client's GoAway: a client that closes at once has
            // closed its side by then, and the call could not be answered.
            for _ in 0..<500
            where !log.records.withLock({ $0.contains { $0.message == "The client is closing the connection" } }) {
                try await Task.sleep(for: .milliseconds(10))
            }
            handler.open()
            let response = try await call.value
            #expect(response.status == .serving)
            await shutdown.value
        }
    }
}
