import AuthAPI
import AuthProtobuf
import AuthRPC
import Foundation
import Testing
import AuthTestSupport

@testable import IdentityService

@Suite struct ContactValidationTests {
    @Test func phoneNumbersAreE164() {
        for valid in ["+14155550123", "+447911123456", "+919876543210", "+61412345678", "+12345678"] {
            #expect(ContactRules.isValidPhone(valid), "\(valid)")
        }
        for invalid in [
            "", "14155550123", "+0123456789", "+1234567", "+1234567890123456", "+1 415 555 0123", "+1415555012a",
            "++14155550123",
            // +91: ten digits starting with 6-9
            "+915876543210", "+91987654321", "+9198765432101",
        ] {
            #expect(!ContactRules.isValidPhone(invalid), "\(invalid)")
        }
    }

    @Test func emailsFollowTheSeedRegex() {
        for valid in ["a@b.co", "first.last+tag@example.com", "x_y%z-1@sub.domain.org", "A@EXAMPLE.COM"] {
            #expect(ContactRules.isValidEmail(valid), "\(valid)")
        }
        for invalid in [
            "", "plain", "@example.com", "a@", "a@b", "a@b.c", "a@b.c1", "a b@example.com", "a@exa mple.com",
            "a@@example.com", "ä@example.com", "a@example.co.m",
        ] {
            #expect(!ContactRules.isValidEmail(invalid), "\(invalid)")
        }
        let local = String(repeating: "a", count: 243)
        #expect(ContactRules.isValidEmail(local + "@example.com"))  // 255
        #expect(!ContactRules.isValidEmail(local + "a@example.com"))  // 256
        #expect(ContactRules.normalizedEmail("Asha@Example.COM") == "asha@example.com")
    }

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
