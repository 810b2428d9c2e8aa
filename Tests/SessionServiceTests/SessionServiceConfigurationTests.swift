import AuthConfiguration
import Foundation
import Testing

@testable import SessionService

@Suite struct SessionServiceConfigurationTests {
    let key = Data((0..<32).map { UInt8($0) }).base64EncodedString()

    @Test func productionWithoutMasterKeyRefusesToStart() {
        #expect {
            try SessionServiceConfiguration(environment: ["AUTH_ENVIRONMENT": "production"])
        } throws: { error in
            let error = error as? ConfigurationError
            return error?.variable == "AUTH_MASTER_KEY" && error?.problem.contains("production") == true
        }
    }

    @Test func developmentWithoutMasterKeyNamesTheRunScript() {
        #expect {
            try SessionServiceConfiguration(environment: [:])
        } throws: { error in
            (error as? ConfigurationError)?.problem.contains("run-local.sh") == true
        }
    }

    @Test(arguments: [
        "", "not base64!", Data(repeating: 1, count: 16).base64EncodedString(),
        Data(repeating: 1, count: 33).base64EncodedString(),
        // Strict base64 (AuthCrypto's): no missing padding, no whitespace inside, no non-zero
        // unused bits (Foundation's decoder accepts the last one as the same 32 bytes).
        "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE",
        "AQEBAQEBAQEBAQEBAQEB AQEBAQEBAQEBAQEBAQEBAQE=",
        "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQF=",
    ])
    func malformedMasterKeysAreRefused(value: String) {
        #expect(throws: ConfigurationError.self) {
            try SessionServiceConfiguration(environment: ["AUTH_MASTER_KEY": value])
        }
    }

    @Test func defaultsAndOverrides() throws {
        let defaults = try SessionServiceConfiguration(environment: [
            "AUTH_MASTER_KEY": key, "AUTH_ENVIRONMENT": "production",
        ])
        #expect(defaults.accessTokenLifetime == .seconds(900))
        #expect(defaults.refreshTokenLifetime == .seconds(7 * 86_400))
        #expect(defaults.sessionLifetime == .seconds(30 * 86_400))
        #expect(defaults.refreshGraceWindow == .seconds(10))
        #expect(defaults.signingKeyPublishDelay == .seconds(600))
        #expect(defaults.schema == "session")
        #expect("\(defaults.masterKey)" == "MasterKey(redacted)")

        let custom = try SessionServiceConfiguration(
            environment: [
                "AUTH_MASTER_KEY": key,
                "AUTH_SESSION_ISSUER": "https://auth.example.com",
                "AUTH_SESSION_AUDIENCE": "https://api.example.com",
                "AUTH_SESSION_ACCESS_TOKEN_SECONDS": "300",
                "AUTH_SESSION_REFRESH_GRACE_SECONDS": "0",
                "AUTH_SESSION_KEY_PUBLISH_DELAY_SECONDS": "3600",
            ]
        )
        #expect(custom.issuer == "https://auth.example.com")
        #expect(custom.audience == "https://api.example.com")
        #expect(custom.accessTokenLifetime == .seconds(300))
        #expect(custom.refreshGraceWindow == .zero)
        #expect(custom.signingKeyPublishDelay == .seconds(3600))
    }

    @Test func outOfRangeValuesNameTheirVariable() {
        #expect {
            try SessionServiceConfiguration(
                environment: ["AUTH_MASTER_KEY": key, "AUTH_SESSION_REFRESH_GRACE_SECONDS": "3600"]
            )
        } throws: { error in
            (error as? ConfigurationError)?.variable == "AUTH_SESSION_REFRESH_GRACE_SECONDS"
        }
    }

    @Test(arguments: [
        ("AUTH_SESSION_ACCESS_TOKEN_SECONDS", "59", "60...86400"),
        ("AUTH_SESSION_REFRESH_TOKEN_SECONDS", "299", "300...31536000"),
        ("AUTH_SESSION_LIFETIME_SECONDS", "31536001", "300...31536000"),
        ("AUTH_SESSION_REFRESH_GRACE_SECONDS", "301", "0...300"),
        ("AUTH_SESSION_KEY_PUBLISH_DELAY_SECONDS", "604801", "0...604800"),
        ("AUTH_SESSION_CLEANUP_INTERVAL_SECONDS", "59", "60...604800"),
        ("AUTH_SESSION_CLEANUP_RETENTION_SECONDS", "-1", "0...31536000"),
    ])
    func refusalsNameTheRange(variable: String, value: String, range: String) {
        #expect {
            try SessionServiceConfiguration(environment: ["AUTH_MASTER_KEY": key, variable: value])
        } throws: { error in
            let error = error as? ConfigurationError
            return error?.variable == variable && error?.problem.contains(range) == true
        }
    }

    @Test func cleanupAndPreviousMasterKey() throws {
        let defaults = try SessionServiceConfiguration(environment: ["AUTH_MASTER_KEY": key])
        #expect(defaults.deadSessionSweepInterval == .seconds(3_600))
        #expect(defaults.deadSessionRetention == .seconds(7 * 86_400))
        #expect(defaults.previousMasterKey == nil)
        let custom = try SessionServiceConfiguration(
            environment: [
                "AUTH_MASTER_KEY": key, "AUTH_MASTER_KEY_PREVIOUS": Data(repeating: 9, count: 32).base64EncodedString(),
                "AUTH_SESSION_CLEANUP_INTERVAL_SECONDS": "600", "AUTH_SESSION_CLEANUP_RETENTION_SECONDS": "0",
                "AUTH_ENVIRONMENT": "production",
            ]
        )
        #expect(custom.previousMasterKey != nil)
        #expect(custom.deadSessionSweepInterval == .seconds(600))
        #expect(custom.deadSessionRetention == .zero)
        #expect {
            try SessionServiceConfiguration(
                environment: ["AUTH_MASTER_KEY": key, "AUTH_MASTER_KEY_PREVIOUS": "short"]
            )
        } throws: { error in
            (error as? ConfigurationError)?.variable == "AUTH_MASTER_KEY_PREVIOUS"
        }
    }
}
