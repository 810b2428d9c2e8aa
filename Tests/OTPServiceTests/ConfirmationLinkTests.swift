import AuthAPI
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import Foundation
import Testing

@testable import OTPService

/// A sign-up's confirmation link (StartRequest.link_base, CheckRequest.link_token): the email
/// carries the link besides the code, a resend's the new code's link, and the link's token
/// checks like the code it carries.
@Suite struct ConfirmationLinkTests {
    static let base = "https://auth.example.com/auth/v1/verify?type=signup&redirect_to=laten%3A%2F%2Fdone&token="

    func startWithLink(_ otp: OTPFixture, _ destination: String) async throws -> Auth_Otp_V1_StartResponse {
        try await otp.client.start(
            Auth_Otp_V1_StartRequest(
                destination: destination,
                purpose: .verify,
                clientIP: "203.0.113.7",
                subject: "pkce_s256:challenge",
                linkBase: Self.base
            )
        )
    }

    func checkLink(_ otp: OTPFixture, _ token: String) async throws -> Auth_Otp_V1_CheckResponse {
        try await otp.client.check(Auth_Otp_V1_CheckRequest(acceptedPurposes: [.verify], linkToken: token))
    }

    @Test func theEmailCarriesTheLinkAndTheLinkChecksOnce() async throws {
        try await withOTPService { otp in
            let provider = ScriptedProvider(name: "log")
            let dispatcher = otp.service.makeDispatcher(providers: ProviderSet(sms: [provider], email: [provider]))
            let started = try await startWithLink(otp, "link@example.com")
            let code = try await otp.queuedCode(started.verificationID)
            #expect(try await dispatcher.deliverDue() == 1)
            let token = "\(started.verificationID).\(code)"
            #expect(provider.sent.first?.link == Self.base + token)
            #expect(
                provider.sent.first?.text.body.hasSuffix("Or confirm by opening this link: \(Self.base + token)")
                    == true
            )
            #expect(provider.sent.first?.text.body.contains("verification code is \(code).") == true)
            let webhook = String(
                decoding: WebhookProvider.body(of: try #require(provider.sent.first)),
                as: UTF8.self
            )
            #expect(webhook.contains("\"link\":\"\(Self.base + token)\""))

            let checked = try await checkLink(otp, token)
            #expect(checked.destination == "link@example.com")
            #expect(checked.purpose == .verify)
            #expect(checked.subject == "pkce_s256:challenge")
            await expectRPCError(.notFound, "verification_not_found") { try await checkLink(otp, token) }
        }
    }

    @Test func aResendCarriesTheNewCodesLinkAndTheOldLinkStopsWorking() async throws {
        try await withOTPService { otp in
            let started = try await startWithLink(otp, "again@example.com")
            let first = try await otp.queuedCode(started.verificationID)
            otp.clock.advance(seconds: 61)
            _ = try await otp.resend(started.verificationID)
            let second = try await otp.queuedCode(started.verificationID)
            let rows = try await otp.query(
                "SELECT link_base FROM @messages WHERE verification_id = $1::uuid AND state = 'queued'",
                [.text(started.verificationID)]
            )
            #expect(try rows.map { try $0[0].string } == [Self.base])
            if first != second {
                await expectRPCError(.unauthenticated, "invalid_code") {
                    try await checkLink(otp, "\(started.verificationID).\(first)")
                }
            }
            let checked = try await checkLink(otp, "\(started.verificationID).\(second)")
            #expect(checked.destination == "again@example.com")
        }
    }

    @Test func aMalformedTokenIsNotFoundAndCountsNothing() async throws {
        try await withOTPService { otp in
            let started = try await startWithLink(otp, "bad@example.com")
            for token in ["nonsense", "\(started.verificationID)", "\(started.verificationID).12a456", ".123456"] {
                await expectRPCError(.notFound, "verification_not_found") { try await checkLink(otp, token) }
            }
            let wrong = try await otp.query("SELECT count(*) FROM @limit_events WHERE kind = 'wrong_code'")
            #expect(try wrong[0][0].int == 0)
            let both = await #expect(throws: RPCError.self) {
                try await otp.client.check(
                    Auth_Otp_V1_CheckRequest(code: "123456", linkToken: "\(started.verificationID).123456")
                )
            }
            #expect(both?.fieldViolations.map(\.field) == ["link_token"])
        }
    }

    @Test func aLinkBaseMustBeAnHTTPURLAndGoesOnlyByEmail() async throws {
        try await withOTPService { otp in
            for (destination, base) in [
                ("asha@example.com", "javascript:alert(1)//"),
                ("asha@example.com", "https://auth.example.com/verify?token=\u{20}"),
                ("asha@example.com", "https://" + String(repeating: "a", count: 1020)),
                ("+919999912345", Self.base),
            ] {
                let error = await #expect(throws: RPCError.self) {
                    try await otp.client.start(
                        Auth_Otp_V1_StartRequest(destination: destination, purpose: .verify, linkBase: base)
                    )
                }
                #expect(error?.fieldViolations.map(\.field) == ["link_base"])
            }
        }
    }

    @Test func theTokenParses() throws {
        let id = UUID()
        let token = LinkToken(verificationID: id, code: "012345")
        #expect(LinkToken(token.text) == token)
        #expect(LinkToken(id.uuidString + ".") == nil)
        #expect(LinkToken(id.uuidString + ".1.2") == nil)
        #expect(LinkToken.link(base: "", verificationID: id, code: "1") == nil)
    }
}
