import Tracing

/// Spans of RPC calls (docs/protocol.md, "Traces"): one `client` span around each call a
/// client makes and one `server` span around each call a server runs, named by the method's
/// path, joined by the W3C trace context in the call's metadata (`traceparent`, `tracestate`).
///
/// With no tracer installed (`InstrumentationSystem`'s no-op default) nothing is recorded and
/// the metadata keeps the trace context it was given (the gateway's, or the served call's).
enum RPCTracing {
    /// Whether a tracer is installed, read at the first call: the executables install theirs at
    /// start, before any call (`ProcessTracing`). Without one, calls skip the span machinery
    /// altogether: its task-local context and no-op span cost ~4 µs of CPU per call on both
    /// sides together (`rpc-benchmark --rpc-only`, docs/benchmarks.md).
    static let isTracing = !(InstrumentationSystem.tracer is NoOpTracer)

    static func annotate(_ span: any Span, _ method: MethodDescriptor) {
        span.attributes["rpc.system"] = "auth-rpc"
        span.attributes["rpc.service"] = method.service
        span.attributes["rpc.method"] = method.method
    }

    /// Records `code` (the RPC status's name) and, for a failure, the error status.
    static func finish(_ span: any Span, code: RPCError.Code?) {
        span.attributes["rpc.auth.status_code"] = code.map { "\($0)" } ?? "ok"
        if let code { span.setStatus(SpanStatus(code: .error, message: "\(code)")) }
    }
}

/// Writes W3C trace context into ``RPCMetadata``.
struct RPCMetadataInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout RPCMetadata) {
        switch key.lowercased() {
        case "traceparent": carrier.traceparent = value
        case "tracestate": carrier.tracestate = value
        default: break
        }
    }
}

/// Reads W3C trace context from ``RPCMetadata``.
struct RPCMetadataExtractor: Extractor {
    func extract(key: String, from carrier: RPCMetadata) -> String? {
        let value: String
        switch key.lowercased() {
        case "traceparent": value = carrier.traceparent
        case "tracestate": value = carrier.tracestate
        default: return nil
        }
        return value.isEmpty ? nil : value
    }
}
