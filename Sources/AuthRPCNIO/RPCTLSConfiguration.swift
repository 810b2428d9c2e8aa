import AuthRPC
import NIOCore
import NIOSSL
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Mutual TLS for RPC connections: this end's certificate and key, and the CA that signs every
/// service's certificate. TLS 1.3 only. A service's name is a DNS name in its certificate's
/// subjectAltName (docs/protocol.md §1); the common name is not used.
///
/// The material can be replaced while the process runs (``replace(with:)``: certificates renewed
/// in place, issue 23 §4b): every copy of a configuration shares it, and connections made after a
/// replacement use the new material while established ones keep theirs.
public struct RPCTLSConfiguration: Sendable {
    /// The material and the TLS contexts made from it (once per material, then reused by every
    /// connection).
    private final class Current: Sendable {
        struct State {
            var material: Material
            /// Moved on by each replacement: a context made from an older material is not cached.
            var generation: UInt64 = 0
            var server: NIOSSLContext?
            var clients: [Bool: NIOSSLContext] = [:]
        }

        let state: Mutex<State>

        init(_ material: Material) {
            state = Mutex(State(material: material))
        }
    }

    struct Material: @unchecked Sendable {
        // NIOSSLCertificate and NIOSSLPrivateKey are immutable wrappers of BoringSSL objects.
        var certificateChain: [NIOSSLCertificate]
        var privateKey: NIOSSLPrivateKey
        var trustRoots: [NIOSSLCertificate]
    }

    private let current: Current

    public var certificateChain: [NIOSSLCertificate] { current.state.withLock { $0.material.certificateChain } }
    public var privateKey: NIOSSLPrivateKey { current.state.withLock { $0.material.privateKey } }
    public var trustRoots: [NIOSSLCertificate] { current.state.withLock { $0.material.trustRoots } }

    public init(certificateChain: [NIOSSLCertificate], privateKey: NIOSSLPrivateKey, trustRoots: [NIOSSLCertificate]) {
        current = Current(Material(certificateChain: certificateChain, privateKey: privateKey, trustRoots: trustRoots))
    }

    /// Uses `other`'s material from now on, for every copy of this configuration: new
    /// connections get it, established ones keep theirs.
    public func replace(with other: RPCTLSConfiguration) {
        let material = other.current.state.withLock { $0.material }
        current.state.withLock { $0 = Current.State(material: material, generation: $0.generation &+ 1) }
    }

    /// When this end's own certificate (the chain's first) stops being valid.
    public var notValidAfter: Date {
        Date(timeIntervalSince1970: TimeInterval(certificateChain.first?.notValidAfter ?? 0))
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

    /// The server context of the current material (made once per material).
    func serverContext() throws -> NIOSSLContext {
        try context(cached: \.server, make: Self.makeServerContext)
    }

    /// The client context of the current material (made once per material and verification).
    func clientContext(verifyServerName: Bool) throws -> NIOSSLContext {
        try context(cached: \.clients[verifyServerName]) {
            try Self.makeClientContext($0, verifyServerName: verifyServerName)
        }
    }

    /// The cached context at `slot`, or one made from a single snapshot of the material (never
    /// a certificate of one material with the key of another) and cached unless a replacement
    /// came in between.
    private func context(
        cached slot: WritableKeyPath<Current.State, NIOSSLContext?>,
        make: (Material) throws -> NIOSSLContext
    ) throws -> NIOSSLContext {
        let (cached, material, generation) = current.state.withLock { ($0[keyPath: slot], $0.material, $0.generation) }
        if let cached { return cached }
        let context = try make(material)
        current.state.withLock { state in
            if state.generation == generation, state[keyPath: slot] == nil { state[keyPath: slot] = context }
        }
        return context
    }

    func makeServerContext() throws -> NIOSSLContext {
        try Self.makeServerContext(current.state.withLock { $0.material })
    }

    private static func makeServerContext(_ material: Material) throws -> NIOSSLContext {
        var configuration = TLSConfiguration.makeServerConfigurationWithMTLS(
            certificateChain: material.certificateChain.map { .certificate($0) },
            privateKey: .privateKey(material.privateKey),
            trustRoots: .certificates(material.trustRoots)
        )
        configuration.minimumTLSVersion = .tlsv13
        configuration.certificateVerification = .noHostnameVerification
        return try NIOSSLContext(configuration: configuration)
    }

    /// - Parameter verifyServerName: whether the server's certificate must name the server
    ///   the client means to reach (given as the handler's `serverHostname`).
    private static func makeClientContext(_ material: Material, verifyServerName: Bool) throws -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv13
        configuration.certificateChain = material.certificateChain.map { .certificate($0) }
        configuration.privateKey = .privateKey(material.privateKey)
        configuration.trustRoots = .certificates(material.trustRoots)
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
