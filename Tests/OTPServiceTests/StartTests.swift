import AuthAPI
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import Foundation
import Testing

@testable import OTPService

@Suite struct StartTests {
    @Test func startReturnsTheVerificationAndQueuesItsMessage() async throws {
        try await withOTPService { otp in
            let sms = try await otp.start("+919999999999", locale: "hi-IN")
            #expect(sms.channel == .sms)
            #expect(sms.maskedDestination == "+91******9999")
            #expect(sms.expiresIn == 600)
            #expect(sms.resendAfter == 60)
            #expect(sms.attemptsRemaining == 5)
            #expect(UUID(uuidString: sms.verificationID) != nil)
            let email = try await otp.start("Asha.Rao@Example.COM")
            #expect(email.channel == .email)
            #expect(email.maskedDestination == "a***@example.com")
            // One message each, in the outbox, written with the verification.
            let rows = try await otp.query(
                "SELECT channel, destination, state, locale FROM @messages ORDER BY channel DESC"
            )
            #expect(rows.count == 2)
            #expect(try rows[0][1].string == "+919999999999")
            #expect(try rows[0][3].string == "hi-IN")
            #expect(try rows[1][1].string == "asha.rao@example.com")
            #expect(try rows.allSatisfy { try $0[2].string == "queued" })
        }
    }

    @Test func idsAreRandomVersion4UUIDs() {
        let ids = (0..<1000).map { _ in CodeMAC.newID() }
        #expect(Set(ids).count == 1000)
        #expect(ids.allSatisfy { $0.uuidString.lowercased().dropFirst(14).first == "4" })
    }

    @Test func invalidRequestsListEveryBadField() async throws {
        try await withOTPService { otp in
            let error = await expectRPCError(.invalidArgument, "invalid_argument") {
                try await otp.client.start(
                    Auth_Otp_V1_StartRequest(
                        destination: "0999",
                        purpose: .unspecified,
                        locale: "en_US!",
                        clientIP: "1.2.3"
                    )
                )
            }
            #expect(
                Set(error?.fieldViolations.map(\.field) ?? []) == ["destination", "purpose", "locale", "client_ip"]
            )
            for bad in [
                "+0123456789", "+12", "asha@", "@example.com", "a b@example.com", "asha@example", "+91999999999x",
            ] {
                await expectRPCError(.invalidArgument, "invalid_argument") { try await otp.start(bad) }
            }
        }
    }

    @Test func startsPerDestinationPerHour() async throws {
        try await withOTPService { otp in
            for _ in 0..<10 {
                _ = try await otp.start("+15550100001")
                otp.clock.advance(seconds: 60)
            }
            let refused = await expectRPCError(.resourceExhausted, "rate_limited") {
                try await otp.start("+15550100001")
            }
            // The first start leaves the hour 3600 s after it: 600 s have passed since then.
            #expect(refused?.retryAfterSeconds == 3_000)
            // Other destinations are not affected.
            _ = try await otp.start("+15550100002")
            otp.clock.advance(seconds: 3_000)
            _ = try await otp.start("+15550100001")
        }
    }

    @Test func startsPerClientIPPerHour() async throws {
        try await withOTPService(configure: { $0.startsPerIPPerHour = 3 }) { otp in
            for index in 0..<3 { _ = try await otp.start("user\(index)@example.com", clientIP: "198.51.100.9") }
            let refused = await expectRPCError(.resourceExhausted, "rate_limited") {
                try await otp.start("other@example.com", clientIP: "198.51.100.9")
            }
            #expect(refused?.retryAfterSeconds == 3_600)
            _ = try await otp.start("other@example.com", clientIP: "198.51.100.10")
        }
    }

    /// Issue 19, item 2: an IPv6 client rotating addresses inside its /64 was a new client with
    /// each address, and got around the per-IP budget.
    @Test func anIPv6ClientIsCountedByItsSlash64() async throws {
        try await withOTPService(configure: { $0.startsPerIPPerHour = 2 }) { otp in
            _ = try await otp.start("v6-1@example.com", clientIP: "2001:db8:1:2::1")
            _ = try await otp.start("v6-2@example.com", clientIP: "2001:db8:1:2:aaaa:bbbb:cccc:dddd")
            await expectRPCError(.resourceExhausted, "rate_limited") {
                try await otp.start("v6-3@example.com", clientIP: "2001:db8:1:2::3")
            }
            // The next /64 is another client; the verification keeps the full address.
            let other = try await otp.start("v6-4@example.com", clientIP: "2001:db8:1:3::1")
            let rows = try await otp.query(
                "SELECT client_ip FROM @verifications WHERE id = $1",
                [.uuid(UUID(uuidString: other.verificationID)!)]
            )
            #expect(try rows[0][0].string == "2001:db8:1:3::1")
        }
    }

    /// Concurrent starts cannot overshoot a limit: they count under the destination's and the
    /// client IP's locks, taken in that order (so two starts never wait for each other in a
    /// cycle).
    @Test func concurrentStartsStopExactlyAtTheLimits() async throws {
        try await withOTPService(maxConnections: 12, configure: { $0.startsPerIPPerHour = 7 }) { otp in
            // One destination, many addresses: its limit (10) holds.
            let sameDestination = try await Self.startConcurrently(24) { index in
                try await otp.start("+15550100077", clientIP: "198.51.100.\(index + 1)")
            }
            #expect(sameDestination.started == 10)
            #expect(sameDestination.refused == ["rate_limited": 14])
            // One address, many destinations, and some destinations shared: the address's limit holds.
            let sameAddress = try await Self.startConcurrently(24) { index in
                try await otp.start("user\(index % 12)@example.com", clientIP: "203.0.113.200")
            }
            #expect(sameAddress.started == 7)
            #expect(sameAddress.refused == ["rate_limited": 17])
            let events = try await otp.query(
                "SELECT count(*) FROM @limit_events WHERE kind = 'start_ip' AND key = '203.0.113.200'"
            )
            #expect(try events[0][0].int == 7)
        }
    }

    /// Runs `count` starts at once; how many started, and the reasons of the refusals.
    private static func startConcurrently(
        _ count: Int,
        _ start: @escaping @Sendable (Int) async throws -> Auth_Otp_V1_StartResponse
    ) async throws -> (started: Int, refused: [String: Int]) {
        try await withThrowingTaskGroup(of: String?.self) { group in
            for index in 0..<count {
                group.addTask {
                    do {
                        _ = try await start(index)
                        return nil
                    } catch let error as RPCError {
                        return error.reason
                    }
                }
            }
            var started = 0
            var refused: [String: Int] = [:]
            for try await reason in group {
                if let reason { refused[reason, default: 0] += 1 } else { started += 1 }
            }
            return (started, refused)
        }
    }

    @Test func callingCodeAllowAndDenyLists() async throws {
        try await withOTPService(configure: { $0.smsDeniedCallingCodes = ["7"] }) { otp in
            await expectRPCError(.failedPrecondition, "destination_not_allowed") { try await otp.start("+79991234567") }
            _ = try await otp.start("+919999912345")
            _ = try await otp.start("anyone@example.com")
        }
        try await withOTPService(configure: { $0.smsAllowedCallingCodes = ["91", "44"] }) { otp in
            await expectRPCError(.failedPrecondition, "destination_not_allowed") { try await otp.start("+15550100003") }
            _ = try await otp.start("+447700900123")
        }
    }

    /// More than N SMS codes to a calling code in the last hour with fewer than X % verified:
    /// new SMS starts there are throttled until the ratio recovers; other countries and email
    /// are not affected.
    @Test func smsPumpingGuard() async throws {
        try await withOTPService(configure: {
            $0.pumpingMinimumSent = 10
            $0.pumpingMinimumVerifiedPercent = 20
        }) { otp in
            var started: [Auth_Otp_V1_StartResponse] = []
            for index in 0..<11 {
                started.append(try await otp.start("+23480000000\(String(format: "%02d", index))"))
            }
            let refused = await expectRPCError(.resourceExhausted, "country_throttled") {
                try await otp.start("+2348000000099")
            }
            // All 11 started in one minute (the clock stands still): they leave the hour, and the
            // guard looks again, when that whole minute is more than an hour old.
            #expect(refused?.retryAfterSeconds == 3_660)
            _ = try await otp.start("+919999912345")
            let email = try await otp.start("pumped@example.com")
            // 3 of 11 verified (27 %): the ratio recovers.
            for verification in started.prefix(3) {
                _ = try await otp.check(
                    verification.verificationID,
                    try await otp.queuedCode(verification.verificationID)
                )
            }
            // A right email code is not an SMS: it counts for nothing.
            _ = try await otp.check(email.verificationID, try await otp.queuedCode(email.verificationID))
            let counted = try await otp.query(
                "SELECT calling_code, sum(started)::int, sum(verified)::int FROM @pumping_counts GROUP BY 1 ORDER BY 1"
            )
            #expect(
                try counted.map { try [$0[0].string, String($0[1].int), String($0[2].int)] } == [
                    ["234", "11", "3"], ["91", "1", "0"],
                ]
            )
            _ = try await otp.start("+2348000000099")
        }
    }

    /// The guard counts per minute: the codes of a minute stop counting when that whole minute
    /// is more than an hour old, not a second earlier; starts from many concurrent calls are all
    /// counted (they spread over the counters' shards).
    @Test func smsPumpingGuardWindowMovesByTheMinute() async throws {
        try await withOTPService(configure: {
            $0.pumpingMinimumSent = 10
            $0.pumpingMinimumVerifiedPercent = 20
        }) { otp in
            otp.clock.advance(seconds: 30)  // mid-minute
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<11 {
                    group.addTask { _ = try await otp.start("+23480000001\(String(format: "%02d", index))") }
                }
                try await group.waitForAll()
            }
            let counted = try await otp.query("SELECT sum(started)::int, sum(verified)::int FROM @pumping_counts")
            #expect(try counted[0][0].int == 11)
            #expect(try counted[0][1].int == 0)
            otp.clock.advance(seconds: 3_600 + 60 - 30 - 1)  // the minute's last second of the hour
            let refused = await expectRPCError(.resourceExhausted, "country_throttled") {
                try await otp.start("+2348000000299")
            }
            #expect(refused?.retryAfterSeconds == 1)
            otp.clock.advance(seconds: 1)
            _ = try await otp.start("+2348000000299")
        }
    }

    @Test func destinationsParseAndMask() throws {
        let indian = try #require(Destination(parsing: "+919999999999"))
        #expect(indian.normalized == "+919999999999")
        #expect(indian.callingCode == "91")
        #expect(indian.masked == "+91******9999")
        #expect(Destination(parsing: "+15550100001")?.callingCode == "1")
        #expect(Destination(parsing: "+15550100001")?.masked == "+1******0001")
        #expect(Destination(parsing: "+2348000000001")?.callingCode == "234")
        #expect(Destination(parsing: "+447700900123")?.callingCode == "44")
        #expect(Destination(parsing: "Zed@Mail.Example.org")?.masked == "z***@mail.example.org")
        #expect(Destination(parsing: "+1234567") == nil)
        #expect(Destination(parsing: "+1234567890123456") == nil)
        // Issue 20: the rules identity applies too (this copy accepted both).
        #expect(Destination(parsing: "+911234567890") == nil)
        #expect(Destination(parsing: "a!b@example.com") == nil)
        #expect(Destination(parsing: "+91 (999) 99-99.999") == nil)
    }
}
