import AuthAPI
import AuthCrypto
import AuthPostgres
import AuthRPC
import AuthRPCNIO
import AuthTestSupport
import Foundation
import Synchronization
import Testing

/// Issue 23 §2: identity killed with `kill -9` during sign-ups leaves no half-made account (a
/// user without its `sign_up` audit row, an audit row without its user), and every sign-up it
/// acknowledged is there after a restart.
@Suite(.serialized, .timeLimit(.minutes(3))) struct IdentityCrashTests {
    let secret = SecureRandom.bytes(count: 32)

    @Test func aKilledIdentityLeavesNoHalfMadeAccount() async throws {
        try await PostgresTestDatabase.withFreshDatabase(prefix: "identity_crash") { databaseURL, _ in
            let environment = [
                "AUTH_RPC_SECRET": Data(secret).base64EncodedString(),
                "AUTH_DATABASE_URL": databaseURL,
                "AUTH_IDENTITY_PORT": "0",
                "AUTH_IDENTITY_SCRYPT_LOG_N": "10",
                "AUTH_LOG_LEVEL": "info",
            ]
            let run = Base64URL.encode(SecureRandom.bytes(count: 6)).lowercased().filter(\.isLetter)
            let first = try ServiceProcess(executable: "identity", environment: environment)
            let port = try await first.listeningPort()
            let (rpc, transport) = loopbackClient(port: port, caller: "gateway", secret: secret, connections: 4)
            let client = Auth_Identity_V1_Identity.Client(wrapping: rpc)
            final class Outcomes: Sendable {
                let acknowledged = Mutex<[String]>([])
                let cut = Atomic<Int>(0)
            }
            let outcomes = Outcomes()
            // 16 lanes of sign-ups until the process dies under them.
            let lanes = Task {
                await withTaskGroup(of: Void.self) { group in
                    for lane in 0..<16 {
                        group.addTask {
                            for n in 0..<200 {
                                let email = "crash-\(run)-\(lane)-\(n)@example.com"
                                do {
                                    _ = try await client.signUp(
                                        .init(displayName: "Crash Test", email: email, password: "Sunny-Meadow-31")
                                    )
                                    outcomes.acknowledged.withLock { $0.append(email) }
                                } catch {
                                    outcomes.cut.add(1, ordering: .relaxed)
                                    return
                                }
                            }
                        }
                    }
                }
            }
            // Killed once some sign-ups went through (bounded wait).
            let deadline = ContinuousClock.now + .seconds(60)
            while outcomes.acknowledged.withLock({ $0.count }) < 40, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
            await first.kill()
            await lanes.value
            await transport.shutdown()
            let done = outcomes.acknowledged.withLock { $0 }
            print(
                "identity crash test: \(done.count) sign-ups acknowledged before kill -9, \(outcomes.cut.load(ordering: .relaxed)) lanes cut"
            )
            #expect(done.count >= 40)
            #expect(done.count < 16 * 200, "the kill came after every sign-up: the test proved nothing")

            // A new process over the same database: every acknowledged account, each whole.
            let second = try ServiceProcess(executable: "identity", environment: environment)
            _ = try await second.listeningPort()
            let pool = PostgresPool(
                configuration: PostgresConfiguration(connectionString: databaseURL, maxConnections: 1),
                logger: PostgresTestDatabase.makeLogger()
            )
            let users = try await pool.query(
                """
                SELECT u.email, (SELECT count(*) FROM identity.audit_events a
                    WHERE a.user_id = u.id AND a.kind = 'sign_up')
                FROM identity.users u WHERE u.email LIKE \("crash-\(run)-%")
                """
            )
            var stored: [String: Int] = [:]
            for row in users { stored[try row[0].string] = try row[1].int }
            #expect(Set(done).isSubset(of: Set(stored.keys)), "an acknowledged sign-up is missing")
            #expect(stored.values.allSatisfy { $0 == 1 }, "a user without exactly one sign_up audit row: \(stored)")
            let orphans = try await pool.query(
                """
                SELECT count(*) FROM identity.audit_events a
                WHERE a.kind = 'sign_up' AND NOT EXISTS (SELECT 1 FROM identity.users u WHERE u.id = a.user_id)
                """
            )
            #expect(try orphans[0][0].int == 0)
            await pool.close()
            // The new process answers for them: an acknowledged account signs in.
            let (rpc2, transport2) = loopbackClient(
                port: try await second.listeningPort(),
                caller: "gateway",
                secret: secret
            )
            let again = Auth_Identity_V1_Identity.Client(wrapping: rpc2)
            let email = try #require(done.first)
            let signedIn = try await again.signInWithPassword(.init(email: email, password: "Sunny-Meadow-31"))
            #expect(signedIn.user?.email == email)
            await transport2.shutdown()
            #expect(await second.terminate() == 0)
        }
    }
}
