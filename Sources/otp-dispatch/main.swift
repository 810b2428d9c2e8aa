import AuthConfiguration
import AuthServiceRuntime
import OTPService

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The otp-dispatch service: one-time codes by SMS and email, their limits, and the outbox
// that delivers them (docs/otp.md).

// Its own settings are checked before anything else: a bad value stops the start at once
// (status 2), without waiting for the database first.
let environment = ProcessInfo.processInfo.environment
let configuration: OTPServiceConfiguration
do {
    configuration = try OTPServiceConfiguration(environment: environment)
} catch {
    StandardStreams.exitWithConfigurationError("otp-dispatch", error)
}

await ServiceMain.run(.otpDispatch, serviceNames: ["auth.otp.v1.OTP"]) { router, dependencies in
    let service = try await OTPService.start(
        database: dependencies.database,
        configuration: configuration,
        logger: dependencies.logger
    )
    router.register(service)
    // Sends the outbox (LISTEN/NOTIFY and a periodic sweep), and removes expired verifications.
    if configuration.dispatchWorkers > 0 {
        let providers = ProviderFactory(configuration: configuration, logger: dependencies.logger)
        dependencies.addService(service.makeDispatcher(providers: providers.providerSet(), closing: providers))
    } else {
        dependencies.logger.notice("Not sending messages: AUTH_OTP_DISPATCH_WORKERS=0 (other replicas send the outbox)")
    }
    dependencies.addService(OTPPurge(service: service, logger: dependencies.logger))
    dependencies.addService(
        PeriodicTask(name: "Outbox metrics", every: .seconds(15), logger: dependencies.logger) {
            try await service.recordOutboxBacklog()
        }
    )
}
