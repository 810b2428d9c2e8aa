/// Which new spans are recorded (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`, as the
/// OpenTelemetry SDK specification defines them). A span that is not sampled still carries its
/// trace on, flagged not sampled, so the services downstream do not record it either.
public enum TraceSampler: Sendable, Hashable {
    case alwaysOn
    case alwaysOff
    /// Records the fraction `ratio` of traces, chosen by trace id (every process of a trace
    /// makes the same choice).
    case traceIDRatio(Double)
    /// A span with a parent follows the parent's choice; a root span asks `root`.
    indirect case parentBased(root: TraceSampler)

    /// Whether a span of `traceID` whose parent is `parent` (nil: a root span) is recorded.
    public func shouldSample(traceID: W3CTraceContext.TraceID, parent: W3CTraceContext?) -> Bool {
        switch self {
        case .alwaysOn: return true
        case .alwaysOff: return false
        case .traceIDRatio(let ratio):
            guard ratio < 1 else { return true }
            guard ratio > 0 else { return false }
            // The lower 63 bits of the id against the ratio's share of them.
            return Double(traceID.low & (UInt64.max >> 1)) < ratio * Double(UInt64.max >> 1)
        case .parentBased(let root):
            if let parent { return parent.sampled }
            return root.shouldSample(traceID: traceID, parent: nil)
        }
    }

    /// The sampler `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` name; nil when the name
    /// or the argument is not one the specification defines.
    public init?(name: String?, argument: String?) {
        let ratio = argument.map { Double($0) } ?? 1.0
        switch name ?? "parentbased_always_on" {
        case "always_on": self = .alwaysOn
        case "always_off": self = .alwaysOff
        case "traceidratio":
            guard let ratio, (0...1).contains(ratio) else { return nil }
            self = .traceIDRatio(ratio)
        case "parentbased_always_on": self = .parentBased(root: .alwaysOn)
        case "parentbased_always_off": self = .parentBased(root: .alwaysOff)
        case "parentbased_traceidratio":
            guard let ratio, (0...1).contains(ratio) else { return nil }
            self = .parentBased(root: .traceIDRatio(ratio))
        default: return nil
        }
    }
}
