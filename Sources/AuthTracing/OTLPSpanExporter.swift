import AsyncHTTPClient
import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle
import Synchronization

/// Sends ended spans to an OTLP/HTTP collector in batches, as OpenTelemetry's batch span
/// processor does: every `scheduleDelay`, or as soon as `maxBatchSize` spans wait; at most
/// `maxQueueSize` wait (more are dropped and counted); at graceful shutdown what is left is sent.
/// A failed export is logged (at most once a minute) and its spans are dropped: traces are best
/// effort, never a reason to hold memory or slow a request.
public final class OTLPSpanExporter: Service, Sendable {
    let configuration: TracingConfiguration
    private let client: HTTPClient
    private let logger: Logger
    private let queue = Mutex(Queue())
    private let wakeUp = WakeUp()

    private struct Queue {
        var spans: [FinishedSpan] = []
        var dropped = 0
        var lastFailureLog: ContinuousClock.Instant?
    }

    init(configuration: TracingConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        var settings = HTTPClient.Configuration()
        // The exporter's own requests are never traced (each would make a span to export).
        settings.tracing.tracer = nil
        settings.redirectConfiguration = .disallow
        if let certificate = configuration.certificatePath {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .file(certificate)
            settings.tlsConfiguration = tls
        }
        self.client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: settings)
    }

    /// Takes an ended span; drops it when the queue is full.
    func enqueue(_ span: FinishedSpan) {
        let full = queue.withLock { queue -> Bool in
            guard queue.spans.count < configuration.maxQueueSize else {
                queue.dropped += 1
                return false
            }
            queue.spans.append(span)
            return queue.spans.count == configuration.maxBatchSize
        }
        if full { wakeUp.signal() }
    }

    func flushSoon() {
        wakeUp.signal()
    }

    public func run() async throws {
        try? await cancelWhenGracefulShutdown { () async throws -> Void in
            while true {
                await self.wakeUp.wait(atMost: self.configuration.scheduleDelay)
                try Task.checkCancellation()
                await self.exportWaiting()
            }
        }
        // Graceful shutdown: what the last requests' spans left.
        await exportWaiting()
        try? await client.shutdown()
    }

    /// Sends every waiting span, in batches of at most `maxBatchSize`.
    func exportWaiting() async {
        while true {
            let (batch, dropped) = queue.withLock { queue -> ([FinishedSpan], Int) in
                let batch = Array(queue.spans.prefix(configuration.maxBatchSize))
                queue.spans.removeFirst(batch.count)
                defer { queue.dropped = 0 }
                return (batch, queue.dropped)
            }
            if dropped > 0 {
                reportFailure("Dropped spans: the export queue was full", ["otel.dropped_spans": "\(dropped)"])
            }
            guard !batch.isEmpty else { return }
            await export(batch)
        }
    }

    private func export(_ batch: [FinishedSpan]) async {
        do {
            var request = HTTPClientRequest(url: configuration.tracesURL)
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            for (name, value) in configuration.headers { request.headers.add(name: name, value: value) }
            request.body = .bytes(
                ByteBuffer(
                    bytes: try OTLPJSON.exportRequest(
                        batch,
                        resource: configuration.resourceAttributes,
                        scope: "auth-backend"
                    )
                )
            )
            let response = try await client.execute(request, timeout: .init(configuration.exportTimeout))
            _ = try await response.body.collect(upTo: 1 << 20)
            guard (200..<300).contains(response.status.code) else {
                reportFailure(
                    "Trace export refused",
                    ["otel.status": "\(response.status.code)", "otel.spans": "\(batch.count)"]
                )
                return
            }
        } catch {
            reportFailure("Trace export failed", ["error": "\(error)", "otel.spans": "\(batch.count)"])
        }
    }

    /// Logs at warning, at most once a minute (a collector that is down must not flood the log).
    private func reportFailure(_ message: Logger.Message, _ metadata: Logger.Metadata) {
        let now = ContinuousClock.now
        let due = queue.withLock { queue -> Bool in
            if let last = queue.lastFailureLog, now - last < .seconds(60) { return false }
            queue.lastFailureLog = now
            return true
        }
        if due {
            logger.warning(message, metadata: metadata.merging(["otel.url": "\(configuration.tracesURL)"]) { $1 })
        }
    }
}

/// Wakes the exporter before its interval ends (a full batch, a flush).
final class WakeUp: Sendable {
    private let state = Mutex<(pending: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns at a signal (also one given since the last wait), after `limit`, or when the
    /// task is cancelled.
    func wait(atMost limit: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: limit) }
            group.addTask { await self.waitForSignal() }
            await group.next()
            group.cancelAll()
        }
    }

    private func waitForSignal() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.pending || Task.isCancelled {
                        state.pending = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
}
