import Logging
import ServiceLifecycle
import Tracing

/// A process's traces (docs/deployment.md, "Traces"): spans of the swift-distributed-tracing
/// API, exported as OTLP (JSON over HTTP) to the collector `OTEL_EXPORTER_OTLP_ENDPOINT`
/// names; off when it is unset (``TracingConfiguration``).
public enum ProcessTracing {
    /// Installs ``OTLPTracer`` as the process's `InstrumentationSystem` when `environment` asks
    /// for traces, and returns the exporter to run in the process's `ServiceGroup` (at
    /// shutdown it sends what is left); nil when traces are off, leaving the no-op tracer.
    ///
    /// Call it once, before anything makes an HTTP client (async-http-client reads the tracer
    /// when a client is made).
    ///
    /// - Throws: ``ConfigurationError`` for a malformed `OTEL_*` value.
    public static func bootstrap(
        serviceName: String,
        environment: [String: String],
        logger: Logger
    ) throws -> (any Service)? {
        guard let configuration = try TracingConfiguration(serviceName: serviceName, environment: environment) else {
            return nil
        }
        let exporter = try OTLPSpanExporter(configuration: configuration, logger: logger)
        InstrumentationSystem.bootstrap(OTLPTracer(sampler: configuration.sampler, exporter: exporter))
        logger.info(
            "Exporting traces by OTLP",
            metadata: [
                "otel.url": "\(configuration.tracesURL)",
                "otel.sampler": "\(configuration.sampler)",
            ]
        )
        return exporter
    }
}
