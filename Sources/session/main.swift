import AuthConfiguration
import AuthServiceRuntime
import AuthText
import SessionService

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The session service: access tokens, rotating refresh tokens, JWKS, revocation (docs/session.md).

// Session's own settings are checked before anything else, like the ones every service reads:
// a bad value stops the start at once (status 2), without waiting for the database first.
let environment = ProcessInfo.processInfo.environment
let configuration: SessionServiceConfiguration
do {
    configuration = try SessionServiceConfiguration(environment: environment)
} catch {
    StandardStreams.exitWithConfigurationError("session", error)
}

await ServiceMain.run(.session, serviceNames: ["auth.session.v1.Session"]) { router, dependencies in
    let service = try await SessionService.start(
        database: dependencies.database,
        configuration: configuration,
        logger: dependencies.logger
    )
    router.register(service)
    // Deletes dead sessions every AUTH_SESSION_CLEANUP_INTERVAL_SECONDS, one replica at a time.
    dependencies.addService(SessionMaintenance(service: service, logger: dependencies.logger))
}
