import Tracing

/// The process's tracer when traces are on (``ProcessTracing``): spans identified and
/// propagated as W3C Trace Context, sampled by ``TraceSampler``, exported by
/// ``OTLPSpanExporter``.
public struct OTLPTracer: Tracer {
    public typealias Span = OTLPSpan

    let sampler: TraceSampler
    let exporter: OTLPSpanExporter

    public func startSpan<Instant: TracerInstant>(
        _ operationName: String,
        context: @autoclosure () -> ServiceContext,
        ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant,
        function: String,
        file fileID: String,
        line: UInt
    ) -> OTLPSpan {
        var context = context()
        let parent = context.traceContext
        var random = SystemRandomNumberGenerator()
        let traceID = parent?.traceID ?? .random(using: &random)
        let sampled = sampler.shouldSample(traceID: traceID, parent: parent)
        context.traceContext = W3CTraceContext(
            traceID: traceID,
            spanID: random.next() | 1,
            sampled: sampled,
            traceState: parent?.traceState ?? ""
        )
        return OTLPSpan(
            name: operationName,
            kind: kind,
            context: context,
            parentSpanID: parent?.spanID,
            startNanoseconds: instant().nanosecondsSinceEpoch,
            exporter: sampled ? exporter : nil
        )
    }

    /// Asks the exporter to send what it holds now rather than at its next interval.
    public func forceFlush() {
        exporter.flushSoon()
    }

    public func inject<Carrier, Inject: Injector>(
        _ context: ServiceContext,
        into carrier: inout Carrier,
        using injector: Inject
    ) where Inject.Carrier == Carrier {
        guard let trace = context.traceContext else { return }
        injector.inject(trace.traceparent, forKey: "traceparent", into: &carrier)
        if !trace.traceState.isEmpty { injector.inject(trace.traceState, forKey: "tracestate", into: &carrier) }
    }

    public func extract<Carrier, Extract: Extractor>(
        _ carrier: Carrier,
        into context: inout ServiceContext,
        using extractor: Extract
    ) where Extract.Carrier == Carrier {
        guard let traceparent = extractor.extract(key: "traceparent", from: carrier),
            let trace = W3CTraceContext(
                traceparent: traceparent,
                traceState: extractor.extract(key: "tracestate", from: carrier) ?? ""
            )
        else { return }
        context.traceContext = trace
    }
}
