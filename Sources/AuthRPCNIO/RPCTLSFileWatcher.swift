import AuthText
import Logging
import ServiceLifecycle

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Certificates renewed in place (issue 23 §4b): cert-manager, or any operator, rewrites the
/// files `AUTH_RPC_TLS_CERT`, `_KEY` and `_CA` name; this service reads them every `interval` and,
/// when their bytes changed and parse, replaces the process's TLS material
/// (``RPCTLSConfiguration/replace(with:)``): new connections use it, established ones keep
/// theirs. A change that does not parse (a half-written file, a key that does not match) keeps
/// the material in use and logs an error; the next change is tried again.
public struct RPCTLSFileWatcher: Service {
    public struct Files: Sendable, Equatable {
        public var certificate: String
        public var privateKey: String
        public var trustRoots: String

        public init(certificate: String, privateKey: String, trustRoots: String) {
            self.certificate = certificate
            self.privateKey = privateKey
            self.trustRoots = trustRoots
        }
    }

    let configuration: RPCTLSConfiguration
    let files: Files
    let interval: Duration
    let expectedName: String?
    let logger: Logger

    /// - Parameter expectedName: a name the new certificate must carry (the service's own); nil
    ///   for a caller only (the gateway, authctl).
    public init(
        configuration: RPCTLSConfiguration,
        files: Files,
        interval: Duration,
        expectedName: String?,
        logger: Logger
    ) {
        self.configuration = configuration
        self.files = files
        self.interval = interval
        self.expectedName = expectedName
        self.logger = logger
    }

    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            var seen = read()
            while !Task.isCancelled {
                try await Task.sleep(for: interval)
                let now = read()
                guard now != seen else { continue }
                seen = now
                check(now)
            }
        }
    }

    /// The three files' bytes (nil for one that cannot be read right now).
    func read() -> [[UInt8]?] {
        [files.certificate, files.privateKey, files.trustRoots].map { path in
            FileManager.default.contents(atPath: path).map { Array($0) }
        }
    }

    /// Replaces the material with `contents` when it parses and names this service; logs the outcome.
    func check(_ contents: [[UInt8]?]) {
        guard let certificate = contents[0], let key = contents[1], let roots = contents[2] else {
            logger.error(
                "RPC TLS files changed but cannot be read; the certificate in use is kept",
                metadata: ["tls.certificate": "\(files.certificate)"]
            )
            return
        }
        do {
            let renewed = try RPCTLSConfiguration(certificatePEM: certificate, privateKeyPEM: key, trustRootsPEM: roots)
            if let expectedName, !renewed.dnsNames.contains(expectedName) {
                logger.error(
                    "The renewed RPC TLS certificate does not name this service; the certificate in use is kept",
                    metadata: ["tls.expected_name": "\(expectedName)", "tls.names": "\(renewed.dnsNames)"]
                )
                return
            }
            configuration.replace(with: renewed)
            logger.notice(
                "RPC TLS certificate reloaded: new connections use it",
                metadata: [
                    "tls.not_valid_after": "\(RFC3339.string(renewed.notValidAfter))",
                    "tls.certificate": "\(files.certificate)",
                ]
            )
        } catch {
            logger.error(
                "The changed RPC TLS files do not parse; the certificate in use is kept",
                metadata: ["error": "\(error)", "tls.certificate": "\(files.certificate)"]
            )
        }
    }
}
