import AuthAPI
import AuthProtobuf
import AuthRPC
import Foundation
import Testing

@testable import OTPService

@Suite struct TestDestinationTests {
    @Test func testDestinationsHaveFixedCodesPassEveryLimitAndAreNeverSent() async throws {
        try await withOTPService(configure: {
            $0.testDestinations = ["+15550109999": "123456", "review@example.com": "654321"]
            $0.startsPerDestinationPerHour = 2
        }) { otp in
            for _ in 0..<5 {
                let started = try await otp.start("+1 555 010 9999")
                // Wrong codes neither count nor lock.
                for _ in 0..<6 {
                    let error = await expectRPCError(.unauthenticated, "invalid_code") {
                        try await otp.check(started.verificationID, "000000")
                    }
                    #expect(error?.attemptsRemaining == 5)
                }
                _ = try await otp.check(started.verificationID, "123456")
            }
            let review = try await otp.start("review@example.com")
            otp.clock.advance(seconds: 60)
            _ = try await otp.resend(review.verificationID)
            let status = try await otp.client.getDeliveryStatus(.init(verificationID: review.verificationID))
            #expect(status.state == .notSentTestDestination)
            _ = try await otp.check(review.verificationID, "654321")
            // Nothing was written to the outbox.
            let messages = try await otp.query("SELECT count(*) FROM @messages")
            #expect(try messages[0][0].int == 0)
        }
    }

    @Test func theListIsOffByDefaultAndParsedStrictly() throws {
        let secret = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldC0xMjM0NTY3OA=="
        #expect(try OTPServiceConfiguration(environment: ["AUTH_OTP_SECRET": secret]).testDestinations.isEmpty)
        let parsed = try OTPServiceConfiguration(environment: [
            "AUTH_OTP_SECRET": secret, "AUTH_OTP_TEST_DESTINATIONS": "+1 555 010 9999=123456, Review@Example.com=654321",
        ])
        #expect(parsed.testDestinations == ["+15550109999": "123456", "review@example.com": "654321"])
        #expect(throws: OTPConfigurationError.self) {
            try OTPServiceConfiguration(environment: ["AUTH_OTP_SECRET": secret, "AUTH_OTP_TEST_DESTINATIONS": "+15550109999=12"])
        }
    }
}
