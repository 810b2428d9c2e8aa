import AuthConfiguration
import AuthGateway
import AuthTracing
import Hummingbird

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

// The gateway: the HTTP/JSON API the apps call (docs/gateway.md).
let configuration: ProcessConfiguration
let gatewayConfiguration: GatewayConfiguration
do {
    configuration = try ProcessConfiguration(service: .gateway)
    gatewayConfiguration = try GatewayConfiguration(environment: ProcessInfo.processInfo.environment)
} catch {
    StandardStreams.exitWithConfigurationError("gateway", error)
}
let logger = ProcessLogging.bootstrap(
    service: "gateway",
    level: configuration.logLevel,
    metadataProvider: GatewayApplication.logMetadata
)
var application = GatewayApplication(configuration: configuration, gateway: gatewayConfiguration, logger: logger)
do {
    application.tracing = try ProcessTracing.bootstrap(
        serviceName: "gateway",
        environment: ProcessInfo.processInfo.environment,
        logger: logger
    )
} catch {
    StandardStreams.exitWithConfigurationError("gateway", error)
}
do {
    try await application.makeApplication().runService()
} catch {
    logger.critical("Gateway stopped with an error", metadata: ["error": "\(error)"])
    exit(1)
}
