import AuthConfiguration
import AuthServiceRuntime
import Foundation
import Testing

/// Every numeric `AUTH_*` variable a service reads is range-checked at start, and the refusal
/// names the variable and the allowed range (README, "Configuration").
@Suite struct ServiceConfigurationTests {
    let secret = Data(repeating: 7, count: 32).base64EncodedString()

    func configuration(_ extra: [String: String]) throws -> ServiceConfiguration {
        try ServiceConfiguration(service: .session, environment: ["AUTH_RPC_SECRET": secret].merging(extra) { $1 })
    }

    @Test(arguments: [
        ("AUTH_SESSION_PORT", "65536", "0...65535"),
        ("AUTH_SESSION_PORT", "-1", "0...65535"),
        ("AUTH_DB_POOL_SIZE", "0", "1...200"),
        ("AUTH_DB_POOL_MIN_OPEN", "11", "0...10"),
        ("AUTH_DB_POOL_MIN_OPEN", "-1", "0...10"),
        ("AUTH_DB_STATEMENT_TIMEOUT_MS", "0", "1...3600000"),
        ("AUTH_DB_START_TIMEOUT_SECONDS", "3601", "0...3600"),
        ("AUTH_RPC_MAX_FRAME_BYTES", "1023", "1024...67108864"),
        ("AUTH_RPC_MAX_CONCURRENT_CALLS", "0", "1...100000"),
        ("AUTH_RPC_IDLE_TIMEOUT_SECONDS", "0", "1...86400"),
        ("AUTH_RPC_IDLE_TIMEOUT_SECONDS", "9223372036854775807", "1...86400"),
        ("AUTH_RPC_READ_TIMEOUT_SECONDS", "3601", "1...3600"),
        ("AUTH_RPC_READ_TIMEOUT_SECONDS", "ten", "1...3600"),
        ("AUTH_RPC_MAX_CONNECTIONS", "0", "1...65536"),
        ("AUTH_RPC_MAX_UNAUTHENTICATED_PER_PEER", "lots", "1...65536"),
        ("AUTH_SESSION_METRICS_PORT", "65536", "0...65535"),
    ])
    func outOfRangeValuesNameTheVariableAndTheRange(variable: String, value: String, range: String) {
        #expect {
            try configuration([variable: value])
        } throws: { error in
            let error = try #require(error as? ConfigurationError)
            return error.variable == variable && error.description.contains(range)
        }
    }

    @Test func eachServiceReadsItsOwnMetricsPort() throws {
        #expect(try configuration([:]).metricsPort == nil)
        #expect(try configuration(["AUTH_SESSION_METRICS_PORT": "9103"]).metricsPort == 9103)
        // Another service's variable is not this one's.
        #expect(try configuration(["AUTH_IDENTITY_METRICS_PORT": "9101"]).metricsPort == nil)
        let identity = try ServiceConfiguration(
            service: .identity,
            environment: ["AUTH_RPC_SECRET": secret, "AUTH_IDENTITY_METRICS_PORT": "0"]
        )
        #expect(identity.metricsPort == 0)
        let otp = try ServiceConfiguration(
            service: .otpDispatch,
            environment: ["AUTH_RPC_SECRET": secret, "AUTH_OTP_METRICS_PORT": "9102"]
        )
        #expect(otp.metricsPort == 9102)
    }

    @Test func thePoolOpensItsWholeSizeUnlessToldOtherwise() throws {
        #expect(try configuration([:]).databasePoolMinOpen == 10)
        #expect(try configuration(["AUTH_DB_POOL_SIZE": "4"]).databasePoolMinOpen == 4)
        #expect(try configuration(["AUTH_DB_POOL_SIZE": "4", "AUTH_DB_POOL_MIN_OPEN": "0"]).databasePoolMinOpen == 0)
        #expect(throws: ConfigurationError.self) {
            try configuration(["AUTH_DB_POOL_SIZE": "4", "AUTH_DB_POOL_MIN_OPEN": "5"])
        }
    }

    @Test func enumeratedValuesNameTheChoices() {
        #expect {
            try configuration(["AUTH_ENVIRONMENT": "staging"])
        } throws: { error in
            "\(error)".contains("development") && "\(error)".contains("production")
        }
        #expect {
            try configuration(["AUTH_LOG_LEVEL": "verbose"])
        } throws: { error in
            "\(error)".contains("AUTH_LOG_LEVEL") && "\(error)".contains("trace")
        }
    }

    @Test func boundsAreAccepted() throws {
        let low = try configuration([
            "AUTH_SESSION_PORT": "0", "AUTH_DB_START_TIMEOUT_SECONDS": "0", "AUTH_RPC_IDLE_TIMEOUT_SECONDS": "1",
            "AUTH_RPC_READ_TIMEOUT_SECONDS": "1", "AUTH_RPC_MAX_FRAME_BYTES": "1024",
        ])
        #expect(low.port == 0)
        #expect(low.databaseStartTimeout == .zero)
        #expect(low.rpcLimits.idleTimeout == .seconds(1))
        let high = try configuration([
            "AUTH_SESSION_PORT": "65535", "AUTH_DB_START_TIMEOUT_SECONDS": "3600",
            "AUTH_RPC_IDLE_TIMEOUT_SECONDS": "86400", "AUTH_RPC_READ_TIMEOUT_SECONDS": "3600",
        ])
        #expect(high.rpcLimits.idleTimeout == .seconds(86_400))
        #expect(high.databaseStartTimeout == .seconds(3_600))
        #expect(try configuration([:]).databaseStartTimeout == .seconds(60))
    }

    @Test func rpcLimitsHaveTheDocumentedDefaults() throws {
        let limits = try configuration([:]).rpcLimits
        #expect(limits.maxFrameSize == 1_048_576)
        #expect(limits.maxConcurrentCalls == 256)
        #expect(limits.idleTimeout == .seconds(300))
        #expect(limits.readTimeout == .seconds(10))
        #expect(limits.maxConnections == 1024)
        #expect(limits.maxUnauthenticatedConnectionsPerPeer == 16)
        #expect(limits.maxHelloFrameSize == 1024)
    }

    @Test func connectionCapsAreRead() throws {
        let limits = try configuration([
            "AUTH_RPC_MAX_CONNECTIONS": "3", "AUTH_RPC_MAX_UNAUTHENTICATED_PER_PEER": "2",
        ]).rpcLimits
        #expect(limits.maxConnections == 3)
        #expect(limits.maxUnauthenticatedConnectionsPerPeer == 2)
    }
}
