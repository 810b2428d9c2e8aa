import AuthCrypto
import AuthTestSupport
import Foundation
import Testing

/// The `session` executable's start-up and operations as processes: it waits for an
/// unreachable database (then gives up with status 1), schedules its clean-up, and
/// `authctl keys rewrap` reaches it over TCP.
@Suite(.serialized) struct SessionProcessTests {
    let secret = Data(SecureRandom.bytes(count: 32)).base64EncodedString()

    @Test func waitsForTheDatabaseThenGivesUp() async throws {
        let session = try await ServiceProcess.run(
            "session",
            environment: [
                "AUTH_RPC_SECRET": secret,
                // Port 1 on loopback: nothing listens there.
                "AUTH_DATABASE_URL": ProcessEnvironment.unreachableDatabase,
                "AUTH_MASTER_KEY": ProcessEnvironment.masterKey,
                "AUTH_SESSION_PORT": "0",
                "AUTH_DB_START_TIMEOUT_SECONDS": "1",
            ]
        )
        #expect(session.status == 1)
        // Each failed attempt logged (the error text spans lines), then the give-up.
        #expect(session.log.contains("db.attempt=1 "))
        #expect(session.log.contains("The database is not reachable; trying again"))
        #expect(session.log.contains("not reachable after"))
        #expect(session.log.contains("AUTH_DB_START_TIMEOUT_SECONDS"))
        #expect(!session.log.contains("RPC server listening"))
    }

    /// A bad setting of session's own is refused at once, before the database is tried.
    @Test func aBadSettingStopsTheStartAtOnce() async throws {
        let session = try await ServiceProcess.run(
            "session",
            environment: [
                "AUTH_RPC_SECRET": secret,
                "AUTH_DATABASE_URL": ProcessEnvironment.unreachableDatabase,
                "AUTH_MASTER_KEY": ProcessEnvironment.masterKey,
                "AUTH_SESSION_REFRESH_GRACE_SECONDS": "301",
                "AUTH_DB_START_TIMEOUT_SECONDS": "60",
            ],
            timeout: .seconds(20)
        )
        #expect(session.status == 2)
        #expect(
            session.log.contains(
                "session: configuration error: AUTH_SESSION_REFRESH_GRACE_SECONDS: must be a whole number of seconds in 0...300"
            )
        )
        #expect(!session.log.contains("The database is not reachable"))
    }

    @Test func schedulesTheCleanUpAndRewrapsForAuthctl() async throws {
        let environment = try await ProcessEnvironment.services(
            secret: secret,
            ["AUTH_SESSION_PORT": "0", "AUTH_SESSION_CLEANUP_INTERVAL_SECONDS": "600"]
        )
        try await withServiceProcess("session", environment: environment) { session, port in
            _ = try await session.waitForLog(#"session\.cleanup_interval_s=600 .*Dead-session clean-up scheduled"#)

            let rewrap = try await ServiceProcess.run(
                "authctl",
                arguments: ["keys", "rewrap", "--target", "127.0.0.1:\(port)"],
                environment: ["AUTH_RPC_SECRET": secret],
                unprivileged: true
            )
            #expect(rewrap.status == 0)
            #expect(
                rewrap.log.contains(/re-wrapped 0 signing keys; \d+ already under the current master key/),
                "\(rewrap.log)"
            )

            // Another caller name is refused (and the refusal is logged by session).
            let other = try await ServiceProcess.run(
                "authctl",
                arguments: ["keys", "rewrap", "--target", "127.0.0.1:\(port)", "--caller", "gateway"],
                environment: ["AUTH_RPC_SECRET": secret]
            )
            #expect(other.status == 2)
            #expect(other.log.contains("caller_not_allowed"), "\(other.log)")
            _ = try await session.waitForLog(#"rpc\.caller=gateway .*Refused a caller"#)
        }
    }
}
