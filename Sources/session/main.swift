import AuthServiceRuntime
import Foundation
import SessionService

// The session service: access tokens, rotating refresh tokens, JWKS, revocation (docs/session.md).
await ServiceMain.run(.session, serviceNames: ["auth.session.v1.Session"]) { router, dependencies in
    let configuration = try SessionServiceConfiguration(
        environment: ProcessInfo.processInfo.environment,
        production: dependencies.configuration.environment == .production
    )
    router.register(
        try await SessionService.start(
            database: dependencies.database,
            configuration: configuration,
            logger: dependencies.logger
        )
    )
}
