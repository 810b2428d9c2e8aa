import AuthConfiguration
import AuthText

/// What the standard `OTEL_*` variables ask of a process's traces (the OpenTelemetry SDK
/// specification's names and defaults, except the protocol: `http/json` is the only one built
/// in). docs/deployment.md, "Traces", has the table.
public struct TracingConfiguration: Sendable {
    /// Where spans are POSTed: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as given, or
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`.
    public var tracesURL: String
    /// `OTEL_EXPORTER_OTLP_(TRACES_)HEADERS`: `name=value` pairs, comma-separated, values
    /// percent-decoded (e.g. an API key of the collector).
    public var headers: [(String, String)]
    /// `OTEL_EXPORTER_OTLP_(TRACES_)CERTIFICATE`: the CA file an https collector is checked
    /// against (the system's trust store when unset).
    public var certificatePath: String?
    /// `OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT`, milliseconds: one export request. 10 s.
    public var exportTimeout: Duration
    /// `OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`. Parent-based, always on.
    public var sampler: TraceSampler
    /// `OTEL_BSP_SCHEDULE_DELAY`, milliseconds. 5 s.
    public var scheduleDelay: Duration
    /// `OTEL_BSP_MAX_QUEUE_SIZE`. 2,048.
    public var maxQueueSize: Int
    /// `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` (at most the queue size). 512.
    public var maxBatchSize: Int
    /// `service.name` (`OTEL_SERVICE_NAME`, else the process's name) and the pairs of
    /// `OTEL_RESOURCE_ATTRIBUTES`.
    public var resourceAttributes: [(String, String)]

    /// The configuration `environment` asks for; nil when traces are off: no
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` nor `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (or empty),
    /// `OTEL_SDK_DISABLED=true`, or `OTEL_TRACES_EXPORTER=none`.
    ///
    /// - Throws: ``ConfigurationError`` naming the variable whose value is not allowed.
    public init?(serviceName: String, environment: [String: String]) throws {
        let reader = EnvironmentReader(variables: environment)
        if reader.string("OTEL_SDK_DISABLED")?.lowercased() == "true" { return nil }
        switch reader.string("OTEL_TRACES_EXPORTER")?.lowercased() {
        case nil, "otlp": break
        case "none": return nil
        default:
            throw ConfigurationError(variable: "OTEL_TRACES_EXPORTER", problem: "must be `otlp` or `none`")
        }
        func either(_ name: String) -> (variable: String, value: String)? {
            let specific = "OTEL_EXPORTER_OTLP_TRACES_" + name.dropFirst("OTEL_EXPORTER_OTLP_".count)
            if let value = reader.string(specific) { return (specific, value) }
            return reader.string(name).map { (name, $0) }
        }
        if let url = reader.string("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            tracesURL = try Self.checkedURL(url, variable: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        } else if let base = reader.string("OTEL_EXPORTER_OTLP_ENDPOINT") {
            let checked = try Self.checkedURL(base, variable: "OTEL_EXPORTER_OTLP_ENDPOINT")
            tracesURL = (checked.hasSuffix("/") ? String(checked.dropLast()) : checked) + "/v1/traces"
        } else {
            return nil
        }
        if let (variable, value) = either("OTEL_EXPORTER_OTLP_PROTOCOL"), value != "http/json" {
            throw ConfigurationError(
                variable: variable,
                problem:
                    "must be `http/json`: traces are sent as OTLP's JSON over HTTP (http/protobuf and grpc are not built in; every OTLP/HTTP collector takes JSON)"
            )
        }
        headers = []
        if let (variable, value) = either("OTEL_EXPORTER_OTLP_HEADERS") {
            headers = try Self.pairs(value, variable: variable)
        }
        certificatePath = either("OTEL_EXPORTER_OTLP_CERTIFICATE")?.value
        if let (variable, _) = either("OTEL_EXPORTER_OTLP_TIMEOUT") {
            exportTimeout = try reader.milliseconds(variable, default: .seconds(10), in: 1...600_000)
        } else {
            exportTimeout = .seconds(10)
        }
        let samplerName = reader.string("OTEL_TRACES_SAMPLER")
        let samplerArgument = reader.string("OTEL_TRACES_SAMPLER_ARG")
        guard let sampler = TraceSampler(name: samplerName, argument: samplerArgument) else {
            throw ConfigurationError(
                variable: samplerArgument != nil && samplerName?.hasSuffix("traceidratio") == true
                    ? "OTEL_TRACES_SAMPLER_ARG" : "OTEL_TRACES_SAMPLER",
                problem:
                    "must be always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio (with OTEL_TRACES_SAMPLER_ARG a ratio in 0...1)"
            )
        }
        self.sampler = sampler
        scheduleDelay = try reader.milliseconds("OTEL_BSP_SCHEDULE_DELAY", default: .seconds(5), in: 1...600_000)
        maxQueueSize = try reader.integer("OTEL_BSP_MAX_QUEUE_SIZE", default: 2_048, in: 1...1_000_000)
        maxBatchSize = try reader.integer(
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
            default: min(512, maxQueueSize),
            in: 1...maxQueueSize
        )
        let named = reader.string("OTEL_SERVICE_NAME") ?? serviceName
        var attributes = [("service.name", named)]
        if let text = reader.string("OTEL_RESOURCE_ATTRIBUTES") {
            attributes += try Self.pairs(text, variable: "OTEL_RESOURCE_ATTRIBUTES").filter { $0.0 != "service.name" }
        }
        resourceAttributes = attributes
    }

    private static func checkedURL(_ text: String, variable: String) throws -> String {
        guard text.hasPrefix("http://") || text.hasPrefix("https://"), text.count > 8, !text.contains(" ") else {
            throw ConfigurationError(variable: variable, problem: "must be an http:// or https:// URL")
        }
        return text
    }

    /// `key=value,key=value`, values percent-decoded (the W3C Baggage form the specification uses).
    private static func pairs(_ text: String, variable: String) throws -> [(String, String)] {
        try text.split(separator: ",").map { item in
            let parts = item.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, let key = Optional(parts[0].trimmingWhitespace()), !key.isEmpty,
                let value = FormURLEncoding.decodeStrictly(parts[1].trimmingWhitespace())
            else {
                throw ConfigurationError(variable: variable, problem: "must be key=value pairs separated by commas")
            }
            return (key, value)
        }
    }
}
