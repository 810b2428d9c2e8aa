import AuthConfiguration
import AuthRPCNIO
import AuthServiceRuntime
import AuthTestSupport
import Foundation
import Testing

/// `AUTH_RPC_TLS_*` and the plaintext rules, read at start: every refusal names the variable.
@Suite struct ServiceConfigurationTLSTests {
    let base = [
        "AUTH_DATABASE_URL": "host=127.0.0.1",
        "AUTH_RPC_SECRET": Data(repeating: 7, count: 32).base64EncodedString(),
    ]

    func configuration(_ extra: [String: String], service: AuthServiceName = .session) throws -> ServiceConfiguration {
        try ServiceConfiguration(service: service, environment: base.merging(extra) { $1 })
    }

    func refusal(
        _ extra: [String: String],
        service: AuthServiceName = .session,
        without: [String] = []
    ) -> ConfigurationError? {
        var environment = base.merging(extra) { $1 }
        for name in without { environment[name] = nil }
        do {
            _ = try ServiceConfiguration(service: service, environment: environment)
            return nil
        } catch let error as ConfigurationError {
            return error
        } catch {
            Issue.record("unexpected error \(error)")
            return nil
        }
    }

    @Test func filesOrInlinePEMTurnOnMutualTLS() async throws {
        let certificates = try await TestCertificates.shared(
            "ca",
            names: ["session", "identity", "gateway", "authctl"]
        )
        let fromFiles = try configuration(certificates.environment(for: "session"))
        #expect(fromFiles.rpcTLS?.dnsNames == ["session"])
        #expect(fromFiles.rpcSecret.isEmpty)
        let inline = try configuration(certificates.environment(for: "session", inline: true))
        #expect(inline.rpcTLS?.dnsNames == ["session"])
        // Without AUTH_RPC_SECRET too.
        let noSecret = try ServiceConfiguration(
            service: .session,
            environment: ["AUTH_DATABASE_URL": "x"].merging(certificates.environment(for: "session")) { $1 }
        )
        #expect(noSecret.rpcTLS != nil)
    }

    @Test func eachProblemNamesItsVariable() async throws {
        let certificates = try await TestCertificates.shared(
            "ca",
            names: ["session", "identity", "gateway", "authctl"]
        )
        let good = certificates.environment(for: "session")
        // One of three set: the missing ones are named.
        #expect(refusal(["AUTH_RPC_TLS_CERT": good["AUTH_RPC_TLS_CERT"]!])?.variable == "AUTH_RPC_TLS_KEY")
        #expect(refusal(good, without: ["AUTH_RPC_TLS_CA"])?.variable == "AUTH_RPC_TLS_CA")
        // Not a file, not PEM.
        #expect(
            refusal(good.merging(["AUTH_RPC_TLS_KEY": "/nonexistent/key.pem"]) { $1 })?.variable == "AUTH_RPC_TLS_KEY"
        )
        #expect(
            refusal(
                good.merging(["AUTH_RPC_TLS_CA": "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"]
                ) { $1 }
            )?.variable == "AUTH_RPC_TLS_CA"
        )
        // A key that does not belong to the certificate.
        #expect(
            refusal(good.merging(["AUTH_RPC_TLS_KEY": certificates.keyPath("gateway")]) { $1 })?.variable
                == "AUTH_RPC_TLS_KEY"
        )
        // A certificate that names another service.
        let other = refusal(certificates.environment(for: "gateway"))
        #expect(other?.variable == "AUTH_RPC_TLS_CERT")
        #expect(other?.problem.contains("session") == true)
    }

    /// Issue 19, item 10: `AUTH_RPC_MESH_MTLS=true` used to let production run plaintext RPC,
    /// where a caller is whatever a holder of the one shared secret claims.
    @Test func productionRefusesPlaintextEvenBehindAMesh() throws {
        #expect(refusal(["AUTH_ENVIRONMENT": "production"])?.variable == "AUTH_RPC_TLS_CERT")
        #expect(
            refusal(["AUTH_ENVIRONMENT": "production", "AUTH_RPC_MESH_MTLS": "true"])?.variable == "AUTH_RPC_MESH_MTLS"
        )
        #expect(refusal(["AUTH_RPC_MESH_MTLS": "true"])?.variable == "AUTH_RPC_MESH_MTLS")
        // Development: plaintext needs the secret.
        #expect(refusal([:], without: ["AUTH_RPC_SECRET"])?.variable == "AUTH_RPC_SECRET")
    }
}
