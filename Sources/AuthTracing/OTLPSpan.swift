import Synchronization
import Tracing

/// A span of ``OTLPTracer``. A sampled span is recorded until it ends, then handed to the
/// exporter once; an unsampled one records nothing and only carries its trace context on.
public final class OTLPSpan: Span {
    public let context: ServiceContext
    let kind: SpanKind
    /// The parent's span id (a span of this process or the remote caller's); nil for a root.
    let parentSpanID: UInt64?
    let startNanoseconds: UInt64
    private let exporter: OTLPSpanExporter?
    private let state: Mutex<State>

    private struct State {
        var name: String
        var attributes = SpanAttributes()
        var status: SpanStatus?
        var events: [SpanEvent] = []
        var ended = false
    }

    init(
        name: String,
        kind: SpanKind,
        context: ServiceContext,
        parentSpanID: UInt64?,
        startNanoseconds: UInt64,
        exporter: OTLPSpanExporter?
    ) {
        self.context = context
        self.kind = kind
        self.parentSpanID = parentSpanID
        self.startNanoseconds = startNanoseconds
        self.exporter = exporter
        self.state = Mutex(State(name: name))
    }

    public var operationName: String {
        get { state.withLock { $0.name } }
        set { state.withLock { $0.name = newValue } }
    }

    public var attributes: SpanAttributes {
        get { state.withLock { $0.attributes } }
        set {
            guard exporter != nil else { return }
            state.withLock { $0.attributes = newValue }
        }
    }

    public var isRecording: Bool {
        exporter != nil && !state.withLock { $0.ended }
    }

    public func setStatus(_ status: SpanStatus) {
        guard exporter != nil else { return }
        state.withLock { state in
            // OpenTelemetry: once OK, a span's status stays OK.
            if state.status?.code != .ok { state.status = status }
        }
    }

    public func addEvent(_ event: SpanEvent) {
        guard exporter != nil else { return }
        state.withLock { $0.events.append(event) }
    }

    /// An `exception` event with the error's type only: an error's text can hold what a span
    /// must not (a database error names the row's values).
    public func recordError<Instant: TracerInstant>(
        _ error: any Error,
        attributes: SpanAttributes,
        at instant: @autoclosure () -> Instant
    ) {
        guard exporter != nil else { return }
        var attributes = attributes
        attributes["exception.type"] = String(reflecting: type(of: error))
        addEvent(SpanEvent(name: "exception", at: instant(), attributes: attributes))
    }

    /// Links are not exported.
    public func addLink(_ link: SpanLink) {}

    public func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
        guard let exporter else { return }
        let ended: State? = state.withLock { state in
            guard !state.ended else { return nil }
            state.ended = true
            return state
        }
        guard let ended, let trace = context.traceContext else { return }
        exporter.enqueue(
            FinishedSpan(
                trace: trace,
                parentSpanID: parentSpanID,
                name: ended.name,
                kind: kind,
                startNanoseconds: startNanoseconds,
                endNanoseconds: instant().nanosecondsSinceEpoch,
                attributes: ended.attributes,
                status: ended.status,
                events: ended.events
            )
        )
    }
}

/// What an ended span leaves for the exporter.
struct FinishedSpan: Sendable {
    var trace: W3CTraceContext
    var parentSpanID: UInt64?
    var name: String
    var kind: SpanKind
    var startNanoseconds: UInt64
    var endNanoseconds: UInt64
    var attributes: SpanAttributes
    var status: SpanStatus?
    var events: [SpanEvent]
}
