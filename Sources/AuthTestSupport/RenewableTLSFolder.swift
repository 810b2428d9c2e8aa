import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A service's three TLS files (certificate, key, CA) in a folder of the test's own, renewed as
/// the kubelet renews a Secret volume: each set is written into a new folder and the symbolic
/// link `current` is switched to it with one `rename`, so a reader never sees a new
/// certificate beside an old CA. (Written in place one by one, a watcher's read between two
/// writes could load such a mix, a state no renewal in production passes through.)
public struct RenewableTLSFolder: Sendable {
    public let folder: URL
    /// The paths a service is given (`AUTH_RPC_TLS_CERT`, `_KEY`, `_CA`), through `current`.
    public let certificatePath: String
    public let keyPath: String
    public let caPath: String

    /// Makes the folder (empty until the first ``install(_:name:)``); ``remove()`` deletes it.
    public init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let current = folder.appendingPathComponent("current")
        certificatePath = current.appendingPathComponent("tls.crt").path
        keyPath = current.appendingPathComponent("tls.key").path
        caPath = current.appendingPathComponent("ca.crt").path
    }

    /// Installs `name`'s certificate and key of `certificates`, and their CA, all at once.
    public func install(_ certificates: TestCertificates, name: String) throws {
        let version = folder.appendingPathComponent("v-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: version, withIntermediateDirectories: true)
        try Data(certificates.certificatePEM(name)).write(to: version.appendingPathComponent("tls.crt"))
        try Data(certificates.keyPEM(name)).write(to: version.appendingPathComponent("tls.key"))
        try Data(certificates.caPEM).write(to: version.appendingPathComponent("ca.crt"))
        let link = folder.appendingPathComponent("current.new")
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: version.path)
        guard rename(link.path, folder.appendingPathComponent("current").path) == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
    }

    public func remove() {
        try? FileManager.default.removeItem(at: folder)
    }
}
