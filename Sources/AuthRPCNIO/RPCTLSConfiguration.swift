import AuthRPC
import NIOCore
import NIOSSL

/// Mutual TLS for RPC connections: this end's certificate and key, and the CA that signs every
/// service's certificate. TLS 1.3 only. A service's name is a DNS name in its certificate's
/// subjectAltName (docs/protocol.md §1); the common name is not used.
public struct RPCTLSConfiguration: Sendable {
    public let certificateChain: [NIOSSLCertificate]
    public let privateKey: NIOSSLPrivateKey
    public let trustRoots: [NIOSSLCertificate]

    public init(certificateChain: [NIOSSLCertificate], privateKey: NIOSSLPrivateKey, trustRoots: [NIOSSLCertificate]) {
        self.certificateChain = certificateChain
        self.privateKey = privateKey
        self.trustRoots = trustRoots
    }

    /// Parses PEM text: the certificate (chain, leaf first), its private key, and the CA
    /// certificate(s). Throws ``RPCTLSConfigurationError`` naming the part that is wrong.
    public init(certificatePEM: [UInt8], privateKeyPEM: [UInt8], trustRootsPEM: [UInt8]) throws {
        let chain: [NIOSSLCertificate]
        do { chain = try NIOSSLCertificate.fromPEMBytes(certificatePEM) } catch {
            throw RPCTLSConfigurationError(part: .certificate, problem: "is not a PEM certificate (\(error))")
        }
        guard !chain.isEmpty else {
            throw RPCTLSConfigurationError(part: .certificate, problem: "holds no PEM certificate")
        }
        let key: NIOSSLPrivateKey
        do { key = try NIOSSLPrivateKey(bytes: privateKeyPEM, format: .pem) } catch {
            throw RPCTLSConfigurationError(part: .privateKey, problem: "is not a PEM private key (\(error))")
        }
        let roots: [NIOSSLCertificate]
        do { roots = try NIOSSLCertificate.fromPEMBytes(trustRootsPEM) } catch {
            throw RPCTLSConfigurationError(part: .trustRoots, problem: "is not a PEM certificate (\(error))")
        }
        guard !roots.isEmpty else {
            throw RPCTLSConfigurationError(part: .trustRoots, problem: "holds no PEM certificate")
        }
        self.init(certificateChain: chain, privateKey: key, trustRoots: roots)
        // Surface a key that does not match the certificate now, not at the first connection.
        do { _ = try makeServerContext() } catch {
            throw RPCTLSConfigurationError(
                part: .privateKey,
                problem: "does not match the certificate or cannot be used (\(error))"
            )
        }
    }

    /// The DNS names in this end's own certificate (the names it can prove).
    public var dnsNames: [String] { certificateChain.first?.rpcDNSNames ?? [] }

    func makeServerContext() throws -> NIOSSLContext {
        var configuration = TLSConfiguration.makeServerConfigurationWithMTLS(
            certificateChain: certificateChain.map { .certificate($0) },
            privateKey: .privateKey(privateKey),
            trustRoots: .certificates(trustRoots)
        )
        configuration.minimumTLSVersion = .tlsv13
        configuration.certificateVerification = .noHostnameVerification
        return try NIOSSLContext(configuration: configuration)
    }

    /// - Parameter verifyServerName: whether the server's certificate must name the server
    ///   the client means to reach (given as the handler's `serverHostname`).
    func makeClientContext(verifyServerName: Bool) throws -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv13
        configuration.certificateChain = certificateChain.map { .certificate($0) }
        configuration.privateKey = .privateKey(privateKey)
        configuration.trustRoots = .certificates(trustRoots)
        configuration.certificateVerification = verifyServerName ? .fullVerification : .noHostnameVerification
        return try NIOSSLContext(configuration: configuration)
    }
}

/// A TLS setting that cannot be used.
public struct RPCTLSConfigurationError: Error, CustomStringConvertible {
    public enum Part: Sendable { case certificate, privateKey, trustRoots }
    public let part: Part
    public let problem: String

    public var description: String { problem }
}

/// How the server reads the names of a connection's verified client certificate.
typealias PeerCertificateNames = @Sendable (ChannelHandlerContext) -> [String]

/// The subjectAltName DNS names of the peer certificate the TLS handler below verified.
func verifiedPeerCertificateNames(_ context: ChannelHandlerContext) -> [String] {
    guard let certificate = try? context.pipeline.syncOperations.nioSSL_peerCertificate() else { return [] }
    return certificate.rpcDNSNames
}

func isTLSError(_ error: any Error) -> Bool {
    error is NIOSSLError || error is BoringSSLError || error is NIOSSLExtraError
}

extension NIOSSLCertificate {
    /// The DNS names of the subjectAltName extension, in order.
    /// (`_subjectAlternativeNames` is swift-nio-ssl's underscored but public accessor.)
    var rpcDNSNames: [String] {
        _subjectAlternativeNames().compactMap { name in
            guard name.nameType == .dnsName else { return nil }
            return name.contents.withUnsafeBufferPointer { String(decoding: $0, as: UTF8.self) }
        }
    }
}
