import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization

/// A small HTTP server for tests that stand in for a provider (a webhook receiver, an
/// imitation of Twilio): it records every request and answers what the test's responder says.
/// It listens on loopback, on port 0 (the real port in ``port``) or a given one.
public final class HTTPReceiver: Sendable {
    /// One request as received.
    public struct Received: Sendable {
        public var method: String
        public var path: String
        /// Header names lower-cased; the last value of a repeated header.
        public var headers: [String: String]
        public var body: [UInt8]
        public var bodyText: String { String(decoding: body, as: UTF8.self) }
    }

    /// What to answer: a status and a body. `index` counts the requests received before this one.
    public typealias Responder = @Sendable (_ request: Received, _ index: Int) async -> (status: Int, body: String)

    private struct Waiter {
        var condition: @Sendable ([Received]) -> Bool
        var continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var requests: [Received] = []
        var waiters: [UInt64: Waiter] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())
    private let portBox = Mutex(0)

    /// The port it listens on.
    public var port: Int { portBox.withLock { $0 } }

    /// Every request received so far, in order.
    public var requests: [Received] { state.withLock { $0.requests } }

    private init() {}

    /// Runs `body` with a receiver listening on `port` (0: any free port), and stops it afterwards.
    public static func with<R>(
        port: Int = 0,
        respond: @escaping Responder = { _, _ in (200, "{}") },
        _ body: (HTTPReceiver) async throws -> R
    ) async throws -> R {
        let receiver = HTTPReceiver()
        let router = Router()
        let handler: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, _ in
            let bytes = try await request.body.collect(upTo: 1 << 20)
            var headers: [String: String] = [:]
            for field in request.headers { headers[field.name.canonicalName] = field.value }
            let received = Received(
                method: request.method.rawValue,
                path: request.uri.path,
                headers: headers,
                body: Array(bytes.readableBytesView)
            )
            let index = receiver.append(received)
            let (status, text) = await respond(received, index)
            // Conditions may look at what the responder recorded: check them again.
            receiver.recheck()
            return Response(
                status: .init(code: status),
                headers: [.contentType: "application/json"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: text))
            )
        }
        router.post("**", use: handler)
        router.get("**", use: handler)
        var logger = Logger(label: "auth.tests.http-receiver")
        logger.logLevel = .critical
        let running = AsyncStream<Int>.makeStream()
        let application = Application(
            router: router,
            configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: port)),
            onServerRunning: { channel in running.continuation.yield(channel.localAddress?.port ?? 0) },
            logger: logger
        )
        let group = ServiceGroup(services: [application], logger: logger)
        let task = Task { try await group.run() }
        var iterator = running.stream.makeAsyncIterator()
        guard let bound = await iterator.next() else {
            task.cancel()
            throw ServiceProcessError(message: "the HTTP receiver did not start")
        }
        receiver.portBox.withLock { $0 = bound }
        return try await finishing(group, task) { try await body(receiver) }
    }

    private func append(_ received: Received) -> Int {
        let (index, due) = state.withLock { state -> (Int, [CheckedContinuation<Bool, Never>]) in
            state.requests.append(received)
            var due: [CheckedContinuation<Bool, Never>] = []
            for (id, waiter) in state.waiters where waiter.condition(state.requests) {
                due.append(waiter.continuation)
                state.waiters[id] = nil
            }
            return (state.requests.count - 1, due)
        }
        for continuation in due { continuation.resume(returning: true) }
        return index
    }

    private func recheck() {
        let due = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            var due: [CheckedContinuation<Bool, Never>] = []
            for (id, waiter) in state.waiters where waiter.condition(state.requests) {
                due.append(waiter.continuation)
                state.waiters[id] = nil
            }
            return due
        }
        for continuation in due { continuation.resume(returning: true) }
    }

    /// Waits until `condition` holds for the requests received (checked at once and on every
    /// new request and after each answer); false if it still does not after `timeout`.
    public func wait(
        timeout: Duration = .seconds(60),
        until condition: @escaping @Sendable ([Received]) -> Bool
    ) async -> Bool {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                    let met = self.state.withLock { state -> Bool in
                        if condition(state.requests) || Task.isCancelled { return true }
                        state.waiters[id] = Waiter(condition: condition, continuation: continuation)
                        return false
                    }
                    if met { continuation.resume(returning: !Task.isCancelled) }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                let waiter = self.state.withLock { $0.waiters.removeValue(forKey: id) }
                waiter?.continuation.resume(returning: false)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            // The other child: the sleeper ends on cancellation; a pending waiter is resumed.
            let waiter = self.state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.continuation.resume(returning: false)
            return first
        }
    }
}
