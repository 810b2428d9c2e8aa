import AuthAPI
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import Foundation
import Testing

@testable import OTPService

/// Check by destination (the Supabase door verifies by phone or email and code): the newest
/// pending verification of the destination among the accepted purposes.
@Suite struct CheckByDestinationTests {
    func check(
        _ otp: OTPFixture,
        destination: String,
        code: String,
        purposes: [Auth_Otp_V1_Purpose]
    ) async throws -> Auth_Otp_V1_CheckResponse {
        try await otp.client.check(
            Auth_Otp_V1_CheckRequest(code: code, acceptedPurposes: purposes, destination: destination)
        )
    }

    @Test func theNewestPendingVerificationOfTheDestinationIsChecked() async throws {
        try await withOTPService { otp in
            let first = try await otp.start("+919999912345", purpose: .login)
            let firstCode = try await otp.queuedCode(first.verificationID)
            otp.clock.advance(seconds: 1)
            let second = try await otp.start("+919999912345", purpose: .login)
            let secondCode = try await otp.queuedCode(second.verificationID)
            // The older code is not the one looked up: a wrong code for the newest.
            if firstCode != secondCode {
                await expectRPCError(.unauthenticated, "invalid_code") {
                    try await check(otp, destination: "+919999912345", code: firstCode, purposes: [.login])
                }
            }
            let checked = try await check(otp, destination: "+919999912345", code: secondCode, purposes: [.login])
            #expect(checked.destination == "+919999912345")
            #expect(checked.purpose == .login)
            // Now the older one is the newest pending.
            let again = try await check(otp, destination: "+919999912345", code: firstCode, purposes: [.login])
            #expect(again.destination == "+919999912345")
        }
    }

    @Test func aVerificationOfAnotherPurposeOrDestinationIsNotFound() async throws {
        try await withOTPService { otp in
            let started = try await otp.start("reset@example.com", purpose: .passwordReset)
            let code = try await otp.queuedCode(started.verificationID)
            await expectRPCError(.notFound, "verification_not_found") {
                try await check(otp, destination: "reset@example.com", code: code, purposes: [.login, .signup])
            }
            await expectRPCError(.notFound, "verification_not_found") {
                try await check(otp, destination: "other@example.com", code: code, purposes: [.passwordReset])
            }
            // Nothing was counted against the verification or the destination.
            let wrong = try await otp.query("SELECT count(*) FROM @limit_events WHERE kind = 'wrong_code'")
            #expect(try wrong[0][0].int == 0)
            let checked = try await check(otp, destination: "RESET@example.com", code: code, purposes: [.passwordReset])
            #expect(checked.purpose == .passwordReset)
        }
    }

    @Test func wrongCodesCountAndLockAsByID() async throws {
        try await withOTPService { otp in
            let started = try await otp.start("lock@example.com", purpose: .login)
            let wrong = try await otp.wrongCode(for: started.verificationID)
            for remaining in (0..<otp.configuration.maxWrongCodes).reversed() {
                let error = await #expect(throws: RPCError.self) {
                    try await check(otp, destination: "lock@example.com", code: wrong, purposes: [.login])
                }
                if remaining > 0 {
                    #expect(error?.reason == "invalid_code")
                    #expect(error?.attemptsRemaining == UInt32(remaining))
                }
            }
            // The locking wrong code killed the verification: the right code finds none now.
            let right = try await otp.queuedCode(started.verificationID)
            await expectRPCError(.notFound, "verification_not_found") {
                try await check(otp, destination: "lock@example.com", code: right, purposes: [.login])
            }
        }
    }

    @Test func destinationAndIDTogetherOrNoPurposesAreRefused() async throws {
        try await withOTPService { otp in
            let started = try await otp.start("asha@example.com")
            let both = await #expect(throws: RPCError.self) {
                try await otp.client.check(
                    Auth_Otp_V1_CheckRequest(
                        verificationID: started.verificationID,
                        code: "123456",
                        acceptedPurposes: [.login],
                        destination: "asha@example.com"
                    )
                )
            }
            #expect(both?.fieldViolations.map(\.field) == ["destination"])
            let noPurpose = await #expect(throws: RPCError.self) {
                try await otp.client.check(Auth_Otp_V1_CheckRequest(code: "123456", destination: "asha@example.com"))
            }
            #expect(noPurpose?.fieldViolations.map(\.field) == ["accepted_purposes"])
        }
    }
}

/// SendNotice of `signup_attempted`: to the owner of a contact a sign-up named, at most one an
/// hour per destination, through the outbox without a code.
@Suite struct SignupAttemptedNoticeTests {
    @Test func oneNoticeAnHourPerDestination() async throws {
        try await withOTPService { otp in
            func notify(_ destination: String) async throws {
                _ = try await otp.client.sendNotice(
                    Auth_Otp_V1_SendNoticeRequest(
                        destination: destination,
                        notice: .signupAttempted,
                        clientIP: "203.0.113.7"
                    )
                )
            }
            func messages(_ destination: String) async throws -> Int {
                try await otp.query(
                    "SELECT count(*) FROM @messages WHERE destination = $1 AND purpose = 'signup_attempted' AND code = ''",
                    [.text(destination)]
                )[0][0].int
            }
            try await notify("taken@example.com")
            try await notify("taken@example.com")
            try await notify("+919999912345")
            #expect(try await messages("taken@example.com") == 1)
            #expect(try await messages("+919999912345") == 1)
            otp.clock.advance(seconds: 3601)
            try await notify("taken@example.com")
            #expect(try await messages("taken@example.com") == 2)
            // Never a code to check against it.
            let rows = try await otp.query(
                "SELECT status FROM @verifications WHERE destination = $1",
                [.text("taken@example.com")]
            )
            let statuses = try rows.map { try $0[0].string }
            #expect(statuses == ["verified", "verified"])
        }
    }

    @Test func itsTextSaysSomeoneTriedToSignUp() {
        let email = MessageTemplates.renderSignupAttempted(channel: .email, locale: "en-IN", appName: "Laten")
        #expect(email.subject == "Someone tried to sign up to Laten")
        #expect(email.body.contains("this email address, which already has an account"))
        let sms = MessageTemplates.renderSignupAttempted(channel: .sms, locale: "es", appName: "Laten")
        #expect(sms.subject == nil)
        #expect(sms.body.contains("Laten"))
        #expect(MessageTemplates.renderNotice("login", channel: .sms, locale: "en", appName: "Laten") == nil)
    }
}
