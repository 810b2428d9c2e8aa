import AuthAPI
import AuthTestSupport
import Foundation
import Testing

@testable import OTPService

@Suite struct OTPPurgeTests {
    @Test func purgeRemovesExpiredVerificationsButNotUnsentMessages() async throws {
        try await withOTPService(configure: { $0.purgeRetention = .seconds(3_600) }) { otp in
            let provider = ScriptedProvider(name: "log")
            let dispatcher = otp.service.makeDispatcher(providers: ProviderSet(sms: [provider], email: [provider]))
            _ = try await otp.start("sent@example.com")
            #expect(try await dispatcher.deliverDue() == 1)
            _ = try await otp.start("stuck@example.com")
            _ = try await otp.start("+919999900077")
            #expect(try await otp.query("SELECT * FROM @pumping_counts").count == 1)
            // Every code expired 10 minutes after start; one hour of retention after that.
            otp.clock.advance(seconds: 600 + 3_599)
            var purged = try await otp.service.purge()
            #expect(purged.verifications == 0)
            // The limit events (a start per destination and per IP, each) are past every window,
            // and so are the pumping guard's counts.
            #expect(purged.events == 6)
            #expect(try await otp.query("SELECT * FROM @pumping_counts").isEmpty)
            otp.clock.advance(seconds: 2)
            purged = try await otp.service.purge()
            #expect(purged.verifications == 1)
            #expect(purged.events == 0)
            let left = try await otp.query(
                "SELECT v.destination, m.state FROM @verifications v JOIN @messages m ON m.verification_id = v.id ORDER BY 1"
            )
            #expect(left.count == 2)
            #expect(try left[0][0].string == "+919999900077")
            #expect(try left[1][0].string == "stuck@example.com")
        }
    }

    @Test func thePurgeRunsOnItsSchedule() async throws {
        try await withOTPService(configure: { $0.purgeInterval = .seconds(600) }) { otp in
            let clock = TestSleepClock()
            let purge = OTPPurge(service: otp.service, clock: clock, logger: testLogger)
            let task = Task { try await purge.run() }
            await clock.waitForSleeps(1)
            clock.advance(by: .seconds(600))
            await clock.waitForSleeps(2)
            task.cancel()
            _ = await task.result
            #expect(clock.sleepsStarted == 2)
        }
    }
}
