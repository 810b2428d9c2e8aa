import Foundation
import Synchronization

/// The shared sets, made at most once per test process.
private let sharedSets = Mutex<[String: Task<TestCertificates, any Error>]>([:])

/// Certificates for mutual-TLS tests, made by `scripts/lib/make-dev-certs.sh` (the same script
/// `scripts/run-local.sh` uses) in a temporary folder: a CA and one certificate per name, whose
/// subjectAltName is `DNS:<name>`.
public struct TestCertificates: Sendable {
    public let directory: URL

    /// The set `name` (a CA and a certificate for each of `names`), in the git-ignored
    /// `.build/test-certificates/<name>`: made once, then reused by every test and every later run
    /// (the script keeps existing files), so tests do not start dozens of `openssl` processes
    /// beside each other. Do not `remove()` a shared set.
    public static func shared(_ name: String, names: [String]) async throws -> TestCertificates {
        let task = sharedSets.withLock { sets in
            if let task = sets[name] { return task }
            let directory = packageRoot.appendingPathComponent(".build/test-certificates/\(name)")
            let task = Task { try await make(names: names, in: directory) }
            sets[name] = task
            return task
        }
        return try await task.value
    }

    private static var packageRoot: URL {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// Makes a new CA and a certificate for each of `names` (in a new temporary folder unless
    /// `directory` is given; existing files there are kept). Waits for the script without
    /// blocking a thread (tests run on the few threads of Swift's cooperative pool).
    public static func make(names: [String], in directory: URL? = nil) async throws -> TestCertificates {
        let directory =
            directory
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("auth-certs-\(UUID().uuidString)")
        let script = packageRoot.appendingPathComponent("scripts/lib/make-dev-certs.sh")
        let result = try await ChildProcess.run(
            URL(fileURLWithPath: "/bin/bash"),
            [script.path, directory.path] + names
        )
        guard result.status == 0 else {
            throw ServiceProcessError(message: "make-dev-certs.sh failed: \(result.standardError)")
        }
        return TestCertificates(directory: directory)
    }

    public var caPath: String { directory.appendingPathComponent("ca.pem").path }
    public func certificatePath(_ name: String) -> String { directory.appendingPathComponent("\(name).pem").path }
    public func keyPath(_ name: String) -> String { directory.appendingPathComponent("\(name).key").path }

    public var caPEM: [UInt8] { Self.read(caPath) }
    public func certificatePEM(_ name: String) -> [UInt8] { Self.read(certificatePath(name)) }
    public func keyPEM(_ name: String) -> [UInt8] { Self.read(keyPath(name)) }

    /// The `AUTH_RPC_TLS_*` variables for `name`: file paths, or with `inline` the PEM text
    /// itself (as a Secret's value in an environment variable; also readable by another user).
    public func environment(for name: String, inline: Bool = false) -> [String: String] {
        if inline {
            return [
                "AUTH_RPC_TLS_CERT": String(decoding: certificatePEM(name), as: UTF8.self),
                "AUTH_RPC_TLS_KEY": String(decoding: keyPEM(name), as: UTF8.self),
                "AUTH_RPC_TLS_CA": String(decoding: caPEM, as: UTF8.self),
            ]
        }
        return [
            "AUTH_RPC_TLS_CERT": certificatePath(name), "AUTH_RPC_TLS_KEY": keyPath(name), "AUTH_RPC_TLS_CA": caPath,
        ]
    }

    public func remove() {
        try? FileManager.default.removeItem(at: directory)
    }

    private static func read(_ path: String) -> [UInt8] {
        Array(FileManager.default.contents(atPath: path) ?? Data())
    }
}
