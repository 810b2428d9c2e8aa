import AuthAPI
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import Foundation
import Testing

@testable import IdentityService

@Suite struct ContactValidationTests {
    @Test func displayNames() {
        for valid in ["Al", "Asha K", "jo_anne-smith.jr", "Zoë 2", String(repeating: "x", count: 50)] {
            #expect(ContactRules.isValidDisplayName(valid), "\(valid)")
        }
        for invalid in ["A", "", String(repeating: "x", count: 51), "Bobby; DROP", "a\u{7}b", "<script>", "emoji 😀"] {
            #expect(!ContactRules.isValidDisplayName(invalid), "\(invalid)")
        }
    }

    @Test func photoURLs() {
        #expect(ContactRules.isValidPhotoURL(""))
        #expect(ContactRules.isValidPhotoURL("https://cdn.example.com/a.jpg"))
        #expect(!ContactRules.isValidPhotoURL("http://cdn.example.com/a.jpg"))
        #expect(!ContactRules.isValidPhotoURL("javascript:alert(1)"))
        #expect(!ContactRules.isValidPhotoURL("https://" + String(repeating: "a", count: 2048)))
    }

    @Test func invalidContactsAreRefusedWithTheirReasons() async throws {
        try await withIdentityService { fixture in
            let phoneError = await expectRPCError(.invalidArgument, "invalid_phone") {
                try await fixture.operatorClient.getUserByPhone(.init(phone: "+915876543210"))
            }
            #expect(phoneError?.fieldViolations.map(\.field) == ["phone"])
            #expect(phoneError?.message == "Please enter a valid phone number.")
            let emailError = await expectRPCError(.invalidArgument, "invalid_email") {
                try await fixture.operatorClient.getUserByEmail(.init(email: "not-an-email"))
            }
            #expect(emailError?.fieldViolations.map(\.reason) == ["invalid_email"])
            await expectRPCError(.invalidArgument, "invalid_email") {
                try await fixture.client.findOrCreateByContact(.init(email: "a@b"))
            }
            await expectRPCError(.invalidArgument, "invalid_argument") {
                try await fixture.client.contactExists(.init(phone: "+14155550123", email: "a@example.com"))
            }
            await expectRPCError(.invalidArgument, "invalid_argument") {
                try await fixture.client.getUser(.init(userID: "not-a-uuid"))
            }
        }
    }
}
