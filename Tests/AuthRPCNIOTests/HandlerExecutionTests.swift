import AuthProtobuf
import AuthRPC
import NIOPosix
import Synchronization
import Testing

@testable import AuthRPCNIO

let threadProbeMethod = MethodDescriptor(service: "auth.test.v1.Test", method: "ThreadProbe")
let inlineThreadProbeMethod = MethodDescriptor(service: "auth.test.v1.Test", method: "InlineThreadProbe")

@Suite struct HandlerExecutionTests {
    /// A handler does not start on the event loop that read its request unless its route
    /// says so: CPU work before its first suspension (signing, hashing) must not hold up the
    /// loop's other connections.
    @Test func handlersStartOffTheEventLoopUnlessDeclaredInline() async throws {
        // SERVING: started off any event loop; NOT_SERVING: started on one.
        @Sendable func probe(_: HealthRequest, _: ServerContext) -> HealthResponse {
            HealthResponse(status: MultiThreadedEventLoopGroup.currentEventLoop == nil ? .serving : .notServing)
        }
        var router = RPCRouter()
        router.register(threadProbeMethod, allowedCallers: .anyAuthenticated) {
            (request: HealthRequest, context: ServerContext) in probe(request, context)
        }
        router.register(inlineThreadProbeMethod, allowedCallers: .anyAuthenticated) {
            (request: HealthRequest, context: ServerContext) in probe(request, context)
        }
        router.setExecution(.onEventLoopUntilFirstSuspension, for: inlineThreadProbeMethod)
        #expect(router.route(forPath: threadProbeMethod.path)?.execution == .offEventLoop)

        let server = try RPCServer(
            configuration: RPCServerConfiguration(serviceName: "test-server", secret: testSecret),
            router: router,
            logger: quietLogger()
        )
        let port = try await server.bind()
        let running = Task { try await server.run() }
        let (client, transport) = makeClient(port: port)
        for _ in 0..<20 {
            let offLoop: HealthResponse = try await client.unary(threadProbeMethod, request: HealthRequest())
            #expect(offLoop.status == .serving)
            let inline: HealthResponse = try await client.unary(inlineThreadProbeMethod, request: HealthRequest())
            #expect(inline.status == .notServing)
        }
        await transport.shutdown()

        // Requests that arrive in one read start off the loop too (in a few tasks, not one
        // each), and each is answered once.
        let raw = try await authenticatedRawConnection(port: port)
        let callIDs = Array(UInt64(1)...64)
        try await raw.send(callIDs.map { try requestFrame($0, threadProbeMethod) })
        var answered: [UInt64] = []
        while answered.count < callIDs.count {
            guard case .response(let response) = try await raw.receiveFrame()?.kind else {
                Issue.record("expected a Response")
                break
            }
            #expect(response.status == nil)
            #expect(try HealthResponse(serializedBytes: response.payload).status == .serving)
            answered.append(response.callID)
        }
        #expect(answered.sorted() == callIDs)
        server.beginShutdown()
        try await running.value
    }
}

/// A lane gathers the results of handlers that end while it still starts calls, to hand them to
/// the event loop in one hop; after it has finished starting them, each result goes on its own.
@Suite struct FinishedCallsTests {
    @Test func collectsUntilClosedThenRefuses() {
        let finished = FinishedCalls()
        #expect(finished.collect(callID: 1, result: .success([1])))
        #expect(finished.collect(callID: 3, result: .failure(RPCError(code: .internal, message: "x"))))
        let collected = finished.close()
        #expect(collected.map(\.callID) == [1, 3])
        #expect((try? collected[0].result.get()) == [1])
        guard case .failure(let error) = collected[1].result else {
            Issue.record("expected the error collected")
            return
        }
        #expect(error.code == .internal)
        // A handler that ends later (it suspended) is sent by its own hop.
        #expect(!finished.collect(callID: 5, result: .success([])))
        #expect(finished.close().map(\.callID) == [1, 3])
    }
}
