import AuthConfiguration
import AuthServiceRuntime
import IdentityService

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The identity service: users, passwords, provider ID-token sign-in, profiles, deletion and the
// audit trail (docs/identity.md).

// Identity's own settings are checked before anything else: a bad value stops the start at once
// (status 2), without waiting for the database first.
let configuration: IdentityServiceConfiguration
do {
    configuration = try IdentityServiceConfiguration(environment: ProcessInfo.processInfo.environment)
} catch {
    StandardStreams.exitWithConfigurationError("identity", error)
}

await ServiceMain.run(.identity, serviceNames: ["auth.identity.v1.Identity"]) { router, dependencies in
    let service = try await IdentityService.start(
        database: dependencies.database,
        configuration: configuration,
        logger: dependencies.logger
    )
    router.register(service)
    // Stops the hashing threads and the JWKS HTTP client once the server has drained.
    dependencies.addService(service.lifecycle)
    dependencies.logger.info(
        "Identity ready",
        metadata: [
            "identity.password_policy": "\(configuration.passwordPolicyMode.rawValue)",
            "identity.scrypt": "\(configuration.scryptParameters)",
            "identity.hash_concurrency": "\(configuration.hashConcurrency)",
            "identity.providers": "\(configuration.providers.keys.map(\.rawValue).sorted().joined(separator: ","))",
            "identity.browser_providers":
                "\(configuration.oauth.clients.keys.map(\.rawValue).sorted().joined(separator: ","))",
        ]
    )
}
