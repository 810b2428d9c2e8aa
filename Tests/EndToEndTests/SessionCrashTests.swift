import AuthAPI
import AuthCrypto
import AuthProtobuf
import AuthRPC
import AuthRPCNIO
import AuthTestSupport
import Foundation
import Synchronization
import Testing

/// Issue 23 §2: session killed with `kill -9` under 200 concurrent refresh chains. Each refresh
/// either answered a token pair that works, or failed, and then its refresh token still works
/// within the grace window (the refresh was not committed, or it was and the grace window gives
/// its answer again): no family is revoked by the retry.
@Suite(.serialized, .timeLimit(.minutes(3))) struct SessionCrashTests {
    let secret = SecureRandom.bytes(count: 32)

    @Test func aRefreshCutByACrashIsRetriedWithinTheGraceWindow() async throws {
        try await PostgresTestDatabase.withFreshDatabase(prefix: "session_crash") { databaseURL, _ in
            let environment = [
                "AUTH_RPC_SECRET": Data(secret).base64EncodedString(),
                "AUTH_DATABASE_URL": databaseURL,
                "AUTH_MASTER_KEY": ProcessEnvironment.masterKey,
                "AUTH_SESSION_PORT": "0",
                "AUTH_SESSION_REFRESH_GRACE_SECONDS": "60",
                "AUTH_SESSION_KEY_PUBLISH_DELAY_SECONDS": "0",
                "AUTH_LOG_LEVEL": "info",
            ]
            let first = try ServiceProcess(executable: "session", environment: environment)
            let (rpc, transport) = loopbackClient(
                port: try await first.listeningPort(),
                caller: "gateway",
                secret: secret,
                connections: 4,
                defaultTimeout: .seconds(30)
            )
            let client = Auth_Session_V1_Session.Client(wrapping: rpc)
            let lanes = 200
            var issued: [String] = []
            for _ in 0..<lanes {
                let pair = try await client.issue(
                    .init(userID: UUID().uuidString.lowercased(), amr: ["pwd"], clientIP: "203.0.113.9")
                )
                issued.append(try #require(pair.tokens?.refreshToken))
            }
            final class Chains: Sendable {
                /// Each lane's newest refresh token it was given (issued or refreshed).
                let latest: Mutex<[String]>
                let refreshed = Atomic<Int>(0)
                let cut = Atomic<Int>(0)
                init(_ tokens: [String]) { latest = Mutex(tokens) }
            }
            let chains = Chains(issued)
            // Every lane refreshes its chain until a refresh fails (the kill).
            let load = Task {
                await withTaskGroup(of: Void.self) { group in
                    for lane in 0..<lanes {
                        group.addTask {
                            for _ in 0..<1_000 {
                                let token = chains.latest.withLock { $0[lane] }
                                do {
                                    let answer = try await client.refresh(
                                        .init(refreshToken: token, clientIP: "203.0.113.9")
                                    )
                                    guard let next = answer.tokens?.refreshToken else { return }
                                    chains.latest.withLock { $0[lane] = next }
                                    chains.refreshed.add(1, ordering: .relaxed)
                                } catch {
                                    chains.cut.add(1, ordering: .relaxed)
                                    return
                                }
                            }
                        }
                    }
                }
            }
            let deadline = ContinuousClock.now + .seconds(60)
            while chains.refreshed.load(ordering: .relaxed) < 400, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
            await first.kill()
            await load.value
            await transport.shutdown()
            let cut = chains.cut.load(ordering: .relaxed)
            print(
                "session crash test: \(chains.refreshed.load(ordering: .relaxed)) refreshes answered, \(cut) cut by kill -9"
            )
            #expect(cut > 0, "no refresh was in flight at the kill: the test proved nothing")

            // A new process: each lane's newest token refreshes (a cut refresh is retried with the
            // token it presented), and what that gives refreshes again: no family was revoked.
            let second = try ServiceProcess(executable: "session", environment: environment)
            let (rpc2, transport2) = loopbackClient(
                port: try await second.listeningPort(),
                caller: "gateway",
                secret: secret,
                connections: 4,
                defaultTimeout: .seconds(30)
            )
            let again = Auth_Session_V1_Session.Client(wrapping: rpc2)
            let failures = await withTaskGroup(of: String?.self) { group in
                for lane in 0..<lanes {
                    let token = chains.latest.withLock { $0[lane] }
                    group.addTask {
                        do {
                            let retried = try await again.refresh(.init(refreshToken: token, clientIP: "203.0.113.9"))
                            let next = retried.tokens?.refreshToken ?? ""
                            _ = try await again.refresh(.init(refreshToken: next, clientIP: "203.0.113.9"))
                            return nil
                        } catch let error as RPCError {
                            return "lane \(lane): \(error.reason)"
                        } catch {
                            return "lane \(lane): \(error)"
                        }
                    }
                }
                var failures: [String] = []
                for await failure in group { if let failure { failures.append(failure) } }
                return failures
            }
            #expect(failures.isEmpty, "\(failures.prefix(5))")
            await transport2.shutdown()
            #expect(await second.terminate() == 0)
        }
    }
}
