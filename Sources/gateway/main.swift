import AuthGateway
import AuthServiceRuntime
import Foundation
import Hummingbird

// The gateway: the HTTP/JSON API the apps call.
let configuration: ServiceConfiguration
do {
    configuration = try ServiceConfiguration(service: .gateway)
} catch {
    FileHandle.standardError.write(Data("gateway: configuration error: \(error)\n".utf8))
    exit(2)
}
let logger = ServiceMain.bootstrapLogging(service: "gateway", level: configuration.logLevel)
do {
    try await GatewayApplication(configuration: configuration, logger: logger).makeApplication().runService()
} catch {
    logger.critical("Gateway stopped with an error", metadata: ["error": "\(error)"])
    exit(1)
}
