import AuthServiceRuntime
import Foundation
import SessionService

// The session service: access tokens, rotating refresh tokens, JWKS, revocation (docs/session.md).
await ServiceMain.run(.session, serviceNames: ["auth.session.v1.Session"]) { router, dependencies in
    let configuration = try SessionServiceConfiguration(
        environment: ProcessInfo.processInfo.environment,
        production: dependencies.configuration.environment == .production
    )
    let service = try await SessionService.start(
        database: dependencies.database,
        configuration: configuration,
        logger: dependencies.logger
    )
    router.register(service)
    // Deletes dead sessions every AUTH_SESSION_CLEANUP_INTERVAL_SECONDS, one replica at a time.
    dependencies.addService(SessionMaintenance(service: service, logger: dependencies.logger))
}
