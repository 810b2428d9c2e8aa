import AuthProtobuf
import AuthRPC
import AuthTestSupport
import Foundation
import Testing

@testable import IdentityService

/// The account-check budget (issue 23 §4): answers that tell whether an account exists cost one
/// of the client IP's checks, counted in PostgreSQL under a lock per address.
@Suite struct AccountCheckBudgetTests {
    func exists(_ fixture: IdentityFixture, ip: String, check: Bool = true) async throws -> Bool {
        try await fixture.client.contactExists(
            Auth_Identity_V1_ContactExistsRequest(
                email: "nobody-\(UUID())@example.com",
                clientIP: ip,
                accountCheck: check
            )
        ).exists
    }

    @Test func concurrentChecksNeverOvershootTheBudget() async throws {
        try await withIdentityService(maxConnections: 12, configure: { $0.accountChecksPerHour = 5 }) { fixture in
            let outcomes = await withTaskGroup(of: String.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        do {
                            _ = try await exists(fixture, ip: "198.51.100.7")
                            return "answered"
                        } catch let error as RPCError {
                            return error.reason
                        } catch {
                            return "\(error)"
                        }
                    }
                }
                var outcomes: [String] = []
                for await outcome in group { outcomes.append(outcome) }
                return outcomes
            }
            #expect(outcomes.filter { $0 == "answered" }.count == 5, "\(outcomes)")
            #expect(outcomes.filter { $0 == "rate_limited" }.count == 15, "\(outcomes)")
            // Another address has its own budget; a check-free call costs nothing.
            let otherAddress = try await exists(fixture, ip: "198.51.100.8")
            let checkFree = try await exists(fixture, ip: "198.51.100.7", check: false)
            #expect(!otherAddress && !checkFree)
        }
    }

    @Test func aCheckFreesUpAnHourAfterItWasMadeAndSignUpSpendsOne() async throws {
        let clock = ManualClock()
        try await withIdentityService(clock: clock, configure: { $0.accountChecksPerHour = 2 }) { fixture in
            _ = try await exists(fixture, ip: "2001:db8:1:2::1")
            clock.advance(seconds: 600)
            // The same /64: one client.
            _ = try await exists(fixture, ip: "2001:db8:1:2::99")
            let refused = await #expect(throws: RPCError.self) {
                try await fixture.client.signUp(
                    Auth_Identity_V1_SignUpRequest(
                        displayName: "Asha",
                        email: "asha-budget@example.com",
                        password: goodPassword,
                        clientIP: "2001:db8:1:2::5",
                        accountCheck: true
                    )
                )
            }
            #expect(refused?.reason == "rate_limited")
            #expect(refused?.retryAfterSeconds == 3_000)
            #expect(try await fixture.query("SELECT 1 FROM @users").count == 0)
            // The first check leaves the window after an hour: one check again.
            clock.advance(seconds: 3_000)
            _ = try await exists(fixture, ip: "2001:db8:1:2::1")
            await expectRPCError(.resourceExhausted, "rate_limited") {
                try await exists(fixture, ip: "2001:db8:1:2::1")
            }
            // No address is stored: only hashes.
            let stored = try await fixture.query("SELECT ip_hash FROM @account_checks")
            #expect(try stored.allSatisfy { try $0[0].bytes.count == 32 })
        }
    }
}
