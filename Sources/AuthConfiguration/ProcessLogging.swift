import AuthRPC
import Logging

/// How every process logs: to standard error, one line per event.
public enum ProcessLogging {
    /// Logs to standard error, one line per event, at `level`.
    ///
    /// Every line logged while serving an RPC carries the caller's `request_id` and
    /// `traceparent` (from ``ServerContext/current``), so one request of the gateway can be
    /// followed through every service. `metadataProvider` adds more (the gateway's own request).
    public static func bootstrap(
        service: String,
        level: Logger.Level,
        metadataProvider: Logger.MetadataProvider? = nil
    ) -> Logger {
        let providers = [Self.rpcCallMetadata] + (metadataProvider.map { [$0] } ?? [])
        let provider = providers.count == 1 ? providers[0] : Logger.MetadataProvider.multiplex(providers)!
        LoggingSystem.bootstrap(
            { label, provider in
                var handler = StreamLogHandler.standardError(label: label, metadataProvider: provider)
                handler.logLevel = level
                return handler
            },
            metadataProvider: provider
        )
        var logger = Logger(label: service)
        logger.logLevel = level
        return logger
    }

    /// `request_id` and `traceparent` of the RPC call the current task serves, if any.
    public static let rpcCallMetadata = Logger.MetadataProvider {
        guard let context = ServerContext.current else { return [:] }
        var metadata: Logger.Metadata = [:]
        if !context.metadata.requestID.isEmpty { metadata["request_id"] = "\(context.metadata.requestID)" }
        if !context.metadata.traceparent.isEmpty { metadata["traceparent"] = "\(context.metadata.traceparent)" }
        return metadata
    }
}
