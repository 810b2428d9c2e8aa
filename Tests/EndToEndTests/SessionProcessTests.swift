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
        let session = try ServiceProcess(
            executable: "session",
            environment: [
                "AUTH_RPC_SECRET": secret,
                // Port 1 on loopback: nothing listens there.
                "AUTH_DATABASE_URL": "host=127.0.0.1 port=1 dbname=auth connect_timeout=2",
                "AUTH_MASTER_KEY": "ZTJlLXRlc3QtbWFzdGVyLWtleS0zMi1ieXRlcy0hISE=",
                "AUTH_SESSION_PORT": "0",
                "AUTH_DB_START_TIMEOUT_SECONDS": "1",
            ]
        )
        let status = await session.waitForExit()
        if status == nil { await session.terminate() }
        #expect(status == 1)
        // Each failed attempt logged (the error text spans lines), then the give-up.
        #expect(session.log.contains("db.attempt=1 "))
        #expect(session.log.contains("The database is not reachable; trying again"))
        #expect(session.log.contains("not reachable after"))
        #expect(session.log.contains("AUTH_DB_START_TIMEOUT_SECONDS"))
        #expect(!session.log.contains("RPC server listening"))
    }

    /// A bad setting of session's own is refused at once, before the database is tried.
    @Test func aBadSettingStopsTheStartAtOnce() async throws {
        let session = try ServiceProcess(
            executable: "session",
            environment: [
                "AUTH_RPC_SECRET": secret,
                "AUTH_DATABASE_URL": "host=127.0.0.1 port=1 dbname=auth connect_timeout=2",
                "AUTH_MASTER_KEY": "ZTJlLXRlc3QtbWFzdGVyLWtleS0zMi1ieXRlcy0hISE=",
                "AUTH_SESSION_REFRESH_GRACE_SECONDS": "301",
                "AUTH_DB_START_TIMEOUT_SECONDS": "60",
            ]
        )
        let status = await session.waitForExit(timeout: .seconds(20))
        if status == nil { await session.terminate() }
        #expect(status == 2)
        #expect(
            session.log.contains(
                "session: configuration error: AUTH_SESSION_REFRESH_GRACE_SECONDS: must be a whole number of seconds in 0...300"
            )
        )
        #expect(!session.log.contains("The database is not reachable"))
    }

    @Test func schedulesTheCleanUpAndRewrapsForAuthctl() async throws {
        let session = try ServiceProcess(
            executable: "session",
            environment: [
                "AUTH_RPC_SECRET": secret,
                "AUTH_DATABASE_URL": try await PostgresTestDatabase.connectionString(),
                // The key ServiceProcessesTests uses: session's keys live in the shared test database.
                "AUTH_MASTER_KEY": "ZTJlLXRlc3QtbWFzdGVyLWtleS0zMi1ieXRlcy0hISE=",
                "AUTH_SESSION_PORT": "0",
                "AUTH_SESSION_CLEANUP_INTERVAL_SECONDS": "600",
            ]
        )
        let port = try await session.listeningPort()
        _ = try await session.waitForLog(#"session\.cleanup_interval_s=600 .*Dead-session clean-up scheduled"#)

        let rewrap = try ServiceProcess(
            executable: "authctl",
            arguments: ["keys", "rewrap", "--target", "127.0.0.1:\(port)"],
            environment: ["AUTH_RPC_SECRET": secret],
            unprivileged: true
        )
        _ = try await rewrap.waitForLog(#"re-wrapped 0 signing keys; \d+ already under the current master key"#)
        #expect(await rewrap.waitForExit() == 0)

        // Another caller name is refused (and the refusal is logged by session).
        let other = try ServiceProcess(
            executable: "authctl",
            arguments: ["keys", "rewrap", "--target", "127.0.0.1:\(port)", "--caller", "gateway"],
            environment: ["AUTH_RPC_SECRET": secret]
        )
        _ = try await other.waitForLog("caller_not_allowed")
        #expect(await other.waitForExit() == 2)
        _ = try await session.waitForLog(#"rpc\.caller=gateway .*Refused a caller"#)
        #expect(await session.terminate() == 0)
    }
}
