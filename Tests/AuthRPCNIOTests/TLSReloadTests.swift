import AuthRPC
import AuthTestSupport
import Foundation
import Logging
import ServiceLifecycle
import Testing

@testable import AuthRPCNIO

/// Certificates renewed in place (issue 23 §4b): the server's TLS files are rewritten while it
/// runs; ``RPCTLSFileWatcher`` loads them for new connections, established ones keep theirs, and
/// a file that does not parse keeps the material in use.
@Suite(.timeLimit(.minutes(2))) struct TLSReloadTests {
    /// Waits (bounded) until `logs` holds `text`.
    func waitForLog(_ logs: CapturedLog, _ text: String) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while !logs.contains(text), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        return logs.contains(text)
    }

    @Test func renewedFilesReachNewConnectionsAndEstablishedOnesKeepWorking() async throws {
        let fixture = try await TLSFixture.make()
        // The server's files, in a folder of the test's own: first our CA's session certificate.
        let folder = try RenewableTLSFolder()
        defer { folder.remove() }
        let files = RPCTLSFileWatcher.Files(
            certificate: folder.certificatePath,
            privateKey: folder.keyPath,
            trustRoots: folder.caPath
        )
        try folder.install(fixture.ca, name: "session")
        let serverTLS = try fixture.tls("session")
        let logs = CapturedLog()
        let watcher = RPCTLSFileWatcher(
            configuration: serverTLS,
            files: files,
            interval: .milliseconds(50),
            expectedName: "session",
            logger: logs.logger(level: .info)
        )
        let watching = Task { try await watcher.run() }
        defer { watching.cancel() }
        try await withTLSServer(fixture, tls: serverTLS) { port, _ in
            // A caller of our CA and one of the other CA.
            let ours = try fixture.tls("gateway")
            let theirs = try fixture.tls("gateway", from: fixture.otherCA, trusting: fixture.otherCA)
            let (established, establishedTransport) = tlsClient(port: port, caller: "gateway", tls: ours)
            #expect(try await established.health().status == .serving)
            let (refusedBefore, refusedTransport) = tlsClient(port: port, caller: "gateway", tls: theirs)
            let before = await rpcError { _ = try await refusedBefore.health() }
            #expect(before != nil)
            await refusedTransport.shutdown()

            // Renewed by the other CA (its certificate, key and CA).
            try folder.install(fixture.otherCA, name: "session")
            #expect(try await waitForLog(logs, "RPC TLS certificate reloaded"), "\(logs.lines)")
            // A new connection gets the new certificate: the other CA's caller now gets in ...
            let (renewed, renewedTransport) = tlsClient(port: port, caller: "gateway", tls: theirs)
            #expect(try await renewed.health().status == .serving)
            await renewedTransport.shutdown()
            // ... and a new connection of our CA's caller no longer does ...
            let (late, lateTransport) = tlsClient(port: port, caller: "gateway", tls: ours)
            let after = await rpcError { _ = try await late.health() }
            #expect(after != nil)
            await lateTransport.shutdown()
            // ... while the connection made before the renewal still works: nothing was dropped.
            for _ in 0..<3 { #expect(try await established.health().status == .serving) }
            await establishedTransport.shutdown()

            // A certificate file that does not parse: the material in use is kept.
            try Data("-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n".utf8)
                .write(to: URL(fileURLWithPath: files.certificate))
            #expect(try await waitForLog(logs, "do not parse; the certificate in use is kept"), "\(logs.lines)")
            let (still, stillTransport) = tlsClient(port: port, caller: "gateway", tls: theirs)
            #expect(try await still.health().status == .serving)
            await stillTransport.shutdown()
        }
        #expect(serverTLS.dnsNames == ["session"])
    }

    @Test func aRenewedCertificateForAnotherServiceIsNotLoaded() async throws {
        let fixture = try await TLSFixture.make()
        let folder = try RenewableTLSFolder()
        defer { folder.remove() }
        let files = RPCTLSFileWatcher.Files(
            certificate: folder.certificatePath,
            privateKey: folder.keyPath,
            trustRoots: folder.caPath
        )
        let configuration = try fixture.tls("session")
        let logs = CapturedLog()
        let watcher = RPCTLSFileWatcher(
            configuration: configuration,
            files: files,
            interval: .seconds(60),
            expectedName: "session",
            logger: logs.logger(level: .info)
        )
        // identity's certificate written where session's should be.
        watcher.check([fixture.ca.certificatePEM("identity"), fixture.ca.keyPEM("identity"), fixture.ca.caPEM])
        #expect(logs.contains("does not name this service"))
        #expect(configuration.dnsNames == ["session"])
        watcher.check([fixture.otherCA.certificatePEM("session"), fixture.otherCA.keyPEM("session"), nil])
        #expect(logs.contains("cannot be read"))
        watcher.check([
            fixture.otherCA.certificatePEM("session"), fixture.otherCA.keyPEM("session"), fixture.otherCA.caPEM,
        ])
        #expect(logs.contains("RPC TLS certificate reloaded"))
        #expect(
            configuration.certificateChain.first
                == (try fixture.tls("session", from: fixture.otherCA)).certificateChain.first
        )
    }
}
