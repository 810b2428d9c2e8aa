import Logging
import OTel
import ServiceLifecycle
import Tracing

/// A process's traces (docs/deployment.md, "Traces"): OpenTelemetry spans exported by OTLP over
/// HTTP to the collector `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`)
/// names; off when neither is set. The other standard `OTEL_*` variables apply as the
/// OpenTelemetry specification defines them (`OTEL_EXPORTER_OTLP_PROTOCOL`, by default
/// `http/protobuf`; `OTEL_TRACES_SAMPLER`; `OTEL_BSP_*`; `OTEL_SERVICE_NAME` over the
/// process's own name; `OTEL_SDK_DISABLED=true` turns traces off).
///
/// Only traces: metrics stay on the Prometheus port, logs on standard output.
public enum ProcessTracing {
    /// Whether `environment` asks for traces.
    public static func isRequested(environment: [String: String]) -> Bool {
        let endpoint = [environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"], environment["OTEL_EXPORTER_OTLP_ENDPOINT"]]
            .contains { !($0 ?? "").isEmpty }
        let disabled = environment["OTEL_SDK_DISABLED"]?.lowercased() == "true"
        let noExporter = environment["OTEL_TRACES_EXPORTER"]?.lowercased() == "none"
        return endpoint && !disabled && !noExporter
    }

    /// Installs the OpenTelemetry tracer as the process's `InstrumentationSystem` when
    /// `environment` asks for traces (``isRequested(environment:)``), and returns the service
    /// that exports the spans (run it in the process's `ServiceGroup`: at shutdown it sends
    /// what is left); nil when traces are off, leaving the no-op tracer in place.
    ///
    /// Call it once, before anything makes an HTTP client (async-http-client reads the tracer
    /// when a client is made).
    ///
    /// - Throws: what OTel throws for a malformed `OTEL_*` value.
    public static func bootstrap(
        serviceName: String,
        environment: [String: String],
        logger: Logger
    ) throws -> (any Service)? {
        guard isRequested(environment: environment) else { return nil }
        var configuration = OTel.Configuration.default
        configuration.serviceName = serviceName
        configuration.diagnosticLogger = .custom(logger)
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        configuration.metrics.enabled = false
        configuration.logs.enabled = false
        let (tracer, service) = try OTel.makeTracingBackend(configuration: configuration)
        InstrumentationSystem.bootstrap(tracer)
        logger.info(
            "Exporting traces by OTLP",
            metadata: [
                "otel.endpoint":
                    "\(environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] ?? environment["OTEL_EXPORTER_OTLP_ENDPOINT"] ?? "")",
                "otel.protocol": "\(environment["OTEL_EXPORTER_OTLP_PROTOCOL"] ?? "http/protobuf")",
            ]
        )
        return service
    }
}
