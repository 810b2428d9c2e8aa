import AuthAPI
import AuthConfiguration
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import Foundation
import Testing

@testable import OTPService

@Suite struct TestDestinationTests {
    @Test func testDestinationsHaveFixedCodesPassEveryStartLimitAndAreNeverSent() async throws {
        try await withOTPService(configure: {
            $0.testDestinations = ["+15550109999": "123456", "review@example.com": "654321"]
            $0.startsPerDestinationPerHour = 2
        }) { otp in
            for _ in 0..<5 {
                let started = try await otp.start("+15550109999")
                _ = try await otp.check(started.verificationID, "123456")
            }
            let review = try await otp.start("review@example.com")
            otp.clock.advance(seconds: 60)
            _ = try await otp.resend(review.verificationID)
            let status = try await otp.operatorClient.getDeliveryStatus(.init(verificationID: review.verificationID))
            #expect(status.state == .notSentTestDestination)
            // The gateway reads it too (GET /v1/otp/{id}): pending, never sent, no resend budget.
            let seen = try await otp.client.getDeliveryStatus(.init(verificationID: review.verificationID))
            #expect(seen.state == .notSentTestDestination && seen.pending)
            #expect(seen.resendsRemaining == UInt32(otp.configuration.maxResends))
            _ = try await otp.check(review.verificationID, "654321")
            // Nothing was written to the outbox.
            let messages = try await otp.query("SELECT count(*) FROM @messages")
            #expect(try messages[0][0].int == 0)
        }
    }

    /// Issue 19, item 3: a test destination's wrong codes were never counted, so its fixed code
    /// (the same for everyone who knows the review account) could be guessed without limit.
    @Test func aTestDestinationsWrongCodesCountAndLockLikeAnyOther() async throws {
        try await withOTPService(configure: { $0.testDestinations = ["+15550109999": "123456"] }) { otp in
            let started = try await otp.start("+15550109999")
            for expected in [4, 3, 2, 1, 0] as [UInt32] {
                let error = await expectRPCError(.unauthenticated, "invalid_code") {
                    try await otp.check(started.verificationID, "000000")
                }
                #expect(error?.attemptsRemaining == expected)
            }
            let locked = await expectRPCError(.resourceExhausted, "too_many_attempts") {
                try await otp.start("+15550109999")
            }
            #expect(locked?.retryAfterSeconds == 900)
            otp.clock.advance(seconds: 900)
            let again = try await otp.start("+15550109999")
            _ = try await otp.check(again.verificationID, "123456")
        }
    }

    /// Issue 19, item 3: with `AUTH_ENVIRONMENT=production` otp-dispatch started with the `log`
    /// provider (every code in the log) and with test destinations.
    @Test func productionRefusesTheLogProviderTestDestinationsAndPlainHTTP() throws {
        let secret = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldC0xMjM0NTY3OA=="
        let webhookSecret = String(repeating: "w", count: 32)
        let good = [
            "AUTH_ENVIRONMENT": "production", "AUTH_OTP_SECRET": secret,
            "AUTH_OTP_SMS_PROVIDER": "webhook", "AUTH_OTP_EMAIL_PROVIDER": "webhook",
            "AUTH_OTP_WEBHOOK_URL": "https://sms.example.com/otp", "AUTH_OTP_WEBHOOK_SECRET": webhookSecret,
        ]
        func refusal(_ changes: [String: String?]) -> String? {
            var variables = good
            for (name, value) in changes { variables[name] = value }
            do {
                _ = try OTPServiceConfiguration(environment: variables)
                return nil
            } catch let error as ConfigurationError {
                return error.variable
            } catch {
                return "\(error)"
            }
        }
        #expect(refusal([:]) == nil)
        // The log provider, by default or by name, for either channel or as a fallback.
        #expect(refusal(["AUTH_OTP_SMS_PROVIDER": nil]) == "AUTH_OTP_SMS_PROVIDER")
        #expect(refusal(["AUTH_OTP_EMAIL_PROVIDER": "log"]) == "AUTH_OTP_EMAIL_PROVIDER")
        #expect(refusal(["AUTH_OTP_SMS_FALLBACK_PROVIDER": "log"]) == "AUTH_OTP_SMS_FALLBACK_PROVIDER")
        // Plain HTTP and a short webhook secret.
        #expect(refusal(["AUTH_OTP_WEBHOOK_URL": "http://sms.example.com/otp"]) == "AUTH_OTP_WEBHOOK_URL")
        #expect(refusal(["AUTH_OTP_WEBHOOK_SECRET": "short"]) == "AUTH_OTP_WEBHOOK_SECRET")
        #expect(refusal(["AUTH_OTP_TWILIO_BASE_URL": "http://api.twilio.test"]) == "AUTH_OTP_TWILIO_BASE_URL")
        // Test destinations only when explicitly allowed.
        #expect(refusal(["AUTH_OTP_TEST_DESTINATIONS": "+15550109999=123456"]) == "AUTH_OTP_TEST_DESTINATIONS")
        #expect(
            refusal(["AUTH_OTP_TEST_DESTINATIONS": "+15550109999=123456", "AUTH_OTP_ALLOW_TEST_DESTINATIONS": "true"])
                == nil
        )
        // Development keeps its conveniences.
        #expect(
            refusal([
                "AUTH_ENVIRONMENT": "development", "AUTH_OTP_SMS_PROVIDER": nil,
                "AUTH_OTP_WEBHOOK_URL": "http://127.0.0.1:9/otp",
                "AUTH_OTP_WEBHOOK_SECRET": "short", "AUTH_OTP_TEST_DESTINATIONS": "+15550109999=123456",
            ]) == nil
        )
    }

    @Test func theListIsOffByDefaultAndParsedStrictly() throws {
        let secret = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldC0xMjM0NTY3OA=="
        #expect(try OTPServiceConfiguration(environment: ["AUTH_OTP_SECRET": secret]).testDestinations.isEmpty)
        let parsed = try OTPServiceConfiguration(environment: [
            "AUTH_OTP_SECRET": secret, "AUTH_OTP_TEST_DESTINATIONS": "+15550109999=123456, Review@Example.com=654321",
        ])
        #expect(parsed.testDestinations == ["+15550109999": "123456", "review@example.com": "654321"])
        #expect(throws: ConfigurationError.self) {
            try OTPServiceConfiguration(environment: [
                "AUTH_OTP_SECRET": secret, "AUTH_OTP_TEST_DESTINATIONS": "+15550109999=12",
            ])
        }
    }
}

/// Issue 19, item 7: the password reset's answer for an email without an account is a decoy
/// verification, so that Resend and Check answer for it as for a real one.
@Suite struct DecoyTests {
    @Test func aDecoyIsCountedLikeAnyStartAndNeverSent() async throws {
        try await withOTPService(configure: { $0.startsPerDestinationPerHour = 2 }) { otp in
            func decoy() async throws -> Auth_Otp_V1_StartResponse {
                try await otp.client.start(
                    Auth_Otp_V1_StartRequest(
                        destination: "nobody@example.com",
                        purpose: .passwordReset,
                        clientIP: "203.0.113.7",
                        decoy: true
                    )
                )
            }
            let started = try await decoy()
            #expect(started.attemptsRemaining == 5)
            #expect(started.resendAfter == 60)
            // Resend: too soon, then allowed, on the same timing as a real verification.
            let early = await expectRPCError(.resourceExhausted, "resend_too_soon") {
                try await otp.resend(started.verificationID)
            }
            #expect(early?.retryAfterSeconds == 60)
            otp.clock.advance(seconds: 60)
            let resent = try await otp.resend(started.verificationID)
            #expect(resent.attemptsRemaining == 5)
            // Wrong codes count down and lock, as for any destination. (No one knows the
            // decoy's code: "000000" is wrong unless its stored MAC says otherwise.)
            let id = try #require(UUID(uuidString: started.verificationID))
            let stored = try await otp.query("SELECT code_mac FROM @verifications WHERE id = $1", [.uuid(id)])
            let codes = CodeMAC(secret: otp.configuration.secret)
            let wrong = codes.matches(try stored[0][0].bytes, verificationID: id, code: "000000") ? "000001" : "000000"
            for expected in [4, 3, 2, 1, 0] as [UInt32] {
                let error = await expectRPCError(.unauthenticated, "invalid_code") {
                    try await otp.check(started.verificationID, wrong)
                }
                #expect(error?.attemptsRemaining == expected)
            }
            // The start limit counts it: the second start of the hour is the last one.
            otp.clock.advance(seconds: 900)
            _ = try await decoy()
            await expectRPCError(.resourceExhausted, "rate_limited") { _ = try await decoy() }
            // Nothing was ever written to the outbox.
            let messages = try await otp.query("SELECT count(*) FROM @messages")
            #expect(try messages[0][0].int == 0)
        }
    }
}
