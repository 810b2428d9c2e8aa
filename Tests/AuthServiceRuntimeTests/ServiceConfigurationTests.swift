import AuthRPC
import Testing

@testable import AuthServiceRuntime

private let secret = ["AUTH_RPC_SECRET": "WlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlo="]

@Suite struct ServiceConfigurationTests {
    @Test func rpcLimitsHaveTheDocumentedDefaults() throws {
        let limits = try ServiceConfiguration(service: .identity, environment: secret).rpcLimits
        #expect(limits.maxFrameSize == 1_048_576)
        #expect(limits.maxConcurrentCalls == 256)
        #expect(limits.idleTimeout == .seconds(300))
        #expect(limits.readTimeout == .seconds(10))
        #expect(limits.maxConnections == 1024)
        #expect(limits.maxUnauthenticatedConnectionsPerPeer == 16)
        #expect(limits.maxHelloFrameSize == 1024)
    }

    @Test func connectionCapsAreRead() throws {
        let environment = secret.merging(["AUTH_RPC_MAX_CONNECTIONS": "3", "AUTH_RPC_MAX_UNAUTHENTICATED_PER_PEER": "2"]) { $1 }
        let limits = try ServiceConfiguration(service: .identity, environment: environment).rpcLimits
        #expect(limits.maxConnections == 3)
        #expect(limits.maxUnauthenticatedConnectionsPerPeer == 2)
    }

    /// Values that used to be accepted and trapped later (seconds → nanoseconds overflow in a
    /// timer) or made no sense are refused at start, naming the variable and its range.
    @Test(arguments: [
        ("AUTH_RPC_READ_TIMEOUT_SECONDS", "9223372036854775807", "1 to 3600"),
        ("AUTH_RPC_READ_TIMEOUT_SECONDS", "3601", "1 to 3600"),
        ("AUTH_RPC_IDLE_TIMEOUT_SECONDS", "10000000000", "1 to 86400"),
        ("AUTH_RPC_IDLE_TIMEOUT_SECONDS", "0", "1 to 86400"),
        ("AUTH_DB_STATEMENT_TIMEOUT_MS", "9223372036854775807", "1 to 3600000"),
        ("AUTH_RPC_MAX_FRAME_BYTES", "1023", "1024 to 67108864"),
        ("AUTH_RPC_MAX_CONCURRENT_CALLS", "-1", "1 to 100000"),
        ("AUTH_RPC_MAX_CONNECTIONS", "0", "1 to 65536"),
        ("AUTH_RPC_MAX_UNAUTHENTICATED_PER_PEER", "lots", "1 to 65536"),
    ])
    func outOfRangeValuesAreRefusedAtStart(variable: String, value: String, range: String) throws {
        let environment = secret.merging([variable: value]) { $1 }
        let error = try #require(throws: ConfigurationError.self) {
            try ServiceConfiguration(service: .session, environment: environment)
        }
        #expect(error.variable == variable)
        #expect(error.description.contains(variable))
        #expect(error.description.contains("from \(range)"))
    }
}
