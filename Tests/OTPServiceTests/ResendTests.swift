import AuthAPI
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import Foundation
import Testing

@testable import OTPService

@Suite struct ResendTests {
    @Test func resendSpacingAndTheLimitPerDestination() async throws {
        try await withOTPService { otp in
            let started = try await otp.start("+919999900003")
            let tooSoon = await expectRPCError(.resourceExhausted, "resend_too_soon") {
                try await otp.resend(started.verificationID)
            }
            #expect(tooSoon?.retryAfterSeconds == 60)
            otp.clock.advance(seconds: 59)
            let stillTooSoon = await expectRPCError(.resourceExhausted, "resend_too_soon") {
                try await otp.resend(started.verificationID)
            }
            #expect(stillTooSoon?.retryAfterSeconds == 1)
            otp.clock.advance(seconds: 1)
            let first = try await otp.resend(started.verificationID)
            #expect(first.resendAfter == 120)
            #expect(first.resendsRemaining == 2)
            #expect(first.maskedDestination == "+91******0003")
            otp.clock.advance(seconds: 119)
            let tooSoonAgain = await expectRPCError(.resourceExhausted, "resend_too_soon") {
                try await otp.resend(started.verificationID)
            }
            #expect(tooSoonAgain?.retryAfterSeconds == 1)
            otp.clock.advance(seconds: 1)
            _ = try await otp.resend(started.verificationID)
            otp.clock.advance(seconds: 120)
            let third = try await otp.resend(started.verificationID)
            #expect(third.resendsRemaining == 0)
            otp.clock.advance(seconds: 120)
            // 3 resends per destination in 15 minutes: the first one (at 60 s) leaves the window at 960 s; now is 420 s.
            let limited = await expectRPCError(.resourceExhausted, "rate_limited") {
                try await otp.resend(started.verificationID)
            }
            #expect(limited?.retryAfterSeconds == 540)
            otp.clock.advance(seconds: 540)
            _ = try await otp.resend(started.verificationID)
        }
    }

    @Test func aResendReplacesTheCodeAtOnce() async throws {
        try await withOTPService { otp in
            let started = try await otp.start("asha@example.com")
            let old = try await otp.queuedCode(started.verificationID)
            otp.clock.advance(seconds: 60)
            _ = try await otp.resend(started.verificationID)
            let new = try await otp.queuedCode(started.verificationID)
            // The unsent first message is superseded and its code wiped.
            let states = try await otp.query("SELECT state, code IS NULL FROM @messages ORDER BY created_at")
            #expect(try states.map { try $0[0].string } == ["superseded", "queued"])
            #expect(try states[0][1].bool)
            if old != new {
                let error = await expectRPCError(.unauthenticated, "invalid_code") {
                    try await otp.check(started.verificationID, old)
                }
                #expect(error?.attemptsRemaining == 4)
            }
            _ = try await otp.check(started.verificationID, new)
        }
    }

    @Test func aResendRenewsAnExpiredCode() async throws {
        try await withOTPService { otp in
            let started = try await otp.start("asha@example.com")
            otp.clock.advance(seconds: 601)
            let resent = try await otp.resend(started.verificationID)
            #expect(resent.expiresIn == 600)
            _ = try await otp.check(started.verificationID, try await otp.queuedCode(started.verificationID))
            await expectRPCError(.notFound, "verification_not_found") { try await otp.resend(started.verificationID) }
        }
    }
}
