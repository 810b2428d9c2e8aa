import AuthConfiguration
import Testing

@testable import AuthGateway

@Suite struct GatewayConfigurationTests {
    @Test func theOldPerReplicaAccountCheckBudgetIsRefused() {
        let error = #expect(throws: ConfigurationError.self) {
            _ = try GatewayConfiguration(environment: ["AUTH_GATEWAY_ACCOUNT_CHECKS_PER_HOUR": "30"])
        }
        #expect(error?.variable == "AUTH_GATEWAY_ACCOUNT_CHECKS_PER_HOUR")
        #expect(error?.problem.contains("AUTH_IDENTITY_ACCOUNT_CHECKS_PER_HOUR") == true)
    }

    @Test func theRedirectAllowListIsIdentitysList() throws {
        let configuration = try GatewayConfiguration(environment: [
            "AUTH_OAUTH_REDIRECT_URLS": "laten://auth/confirmed, https://app.example.com/done"
        ])
        #expect(configuration.redirectAllowList.allows("laten://auth/confirmed?screen=home"))
        #expect(configuration.redirectAllowList.allows("https://app.example.com/done"))
        #expect(!configuration.redirectAllowList.allows("https://app.example.com/done/more"))
        #expect(!configuration.redirectAllowList.allows("laten://auth/confirmed#fragment"))
        #expect(throws: ConfigurationError.self) {
            _ = try GatewayConfiguration(environment: ["AUTH_OAUTH_REDIRECT_URLS": "https://*.example.com/"])
        }
    }
}
