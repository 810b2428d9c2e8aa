import AuthCrypto
import AuthRPC
import AuthRPCNIO
import AuthText
import Logging

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `AUTH_RPC_SECRET`: base64 of at least 32 bytes (plaintext mode).
public func readRPCSecret(_ variables: [String: String]) throws -> [UInt8] {
    let reader = EnvironmentReader(variables: variables)
    guard let secretText = reader.string("AUTH_RPC_SECRET") else {
        throw ConfigurationError(
            variable: "AUTH_RPC_SECRET",
            problem:
                "is required without TLS (AUTH_RPC_TLS_*): base64 of at least 32 random bytes, the same for every service (e.g. `openssl rand -base64 32`)"
        )
    }
    // AuthCrypto's strict decoder: padded standard base64, nothing else (Foundation's accepts
    // non-zero unused bits). Surrounding whitespace (a mounted file's newline) is ignored.
    guard let secret = Base64.decode(secretText.trimmingWhitespace()), secret.count >= 32
    else {
        throw ConfigurationError(
            variable: "AUTH_RPC_SECRET",
            problem: "must be standard base64 (with = padding) of at least 32 bytes"
        )
    }
    return secret
}

extension RPCTLSConfiguration {
    /// The variables of mutual TLS. Each holds PEM text (it contains `-----BEGIN`) or the path
    /// of a file holding it, as a Kubernetes Secret mounts it.
    public static let certificateVariable = "AUTH_RPC_TLS_CERT"
    public static let keyVariable = "AUTH_RPC_TLS_KEY"
    public static let caVariable = "AUTH_RPC_TLS_CA"

    /// Reads `AUTH_RPC_TLS_CERT`, `AUTH_RPC_TLS_KEY` and `AUTH_RPC_TLS_CA`: nil when none is
    /// set; all three, parsed and checked, when any is. With `expectedName`, the certificate must
    /// name it (a DNS name in its subjectAltName). Errors name the variable.
    public init?(environment variables: [String: String], expectedName: String?) throws {
        let reader = EnvironmentReader(variables: variables)
        let names = [Self.certificateVariable, Self.keyVariable, Self.caVariable]
        let values = names.map { reader.string($0) }
        guard values.contains(where: { $0 != nil }) else { return nil }
        var pem: [[UInt8]] = []
        for (name, value) in zip(names, values) {
            guard let value else {
                throw ConfigurationError(
                    variable: name,
                    problem: "is required when any AUTH_RPC_TLS_* variable is set (PEM text or a file path)"
                )
            }
            pem.append(try Self.pemOrFile(value, variable: name))
        }
        do {
            try self.init(certificatePEM: pem[0], privateKeyPEM: pem[1], trustRootsPEM: pem[2])
        } catch let error as RPCTLSConfigurationError {
            let variable =
                switch error.part {
                case .certificate: Self.certificateVariable
                case .privateKey: Self.keyVariable
                case .trustRoots: Self.caVariable
                }
            throw ConfigurationError(variable: variable, problem: error.problem)
        }
        if let expectedName, !dnsNames.contains(expectedName) {
            throw ConfigurationError(
                variable: Self.certificateVariable,
                problem:
                    "the certificate must name this service: subjectAltName DNS \(expectedName) (it names \(dnsNames.isEmpty ? "none" : dnsNames.joined(separator: ", ")))"
            )
        }
    }

    static func pemOrFile(_ value: String, variable: String) throws -> [UInt8] {
        if value.contains("-----BEGIN") { return Array(value.utf8) }
        guard let data = FileManager.default.contents(atPath: value) else {
            throw ConfigurationError(variable: variable, problem: "is neither PEM text nor a readable file: \(value)")
        }
        return Array(data)
    }
}
