import AuthAPI
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import Foundation
import Testing

@testable import IdentityService

@Suite struct PasswordPolicyTests {
    let blocklist: PasswordBlocklist

    init() throws {
        blocklist = try PasswordBlocklist.bundled()
    }

    func reasons(_ password: String, _ mode: PasswordPolicyMode = .composition) -> [String] {
        PasswordPolicy(mode: mode, blocklist: blocklist).violations(of: password).map(\.reason)
    }

    @Test func theBundledBlocklistHasTenThousandCommonPasswords() {
        #expect(blocklist.count >= 10_000)
        #expect(blocklist.contains("password1"))
        #expect(blocklist.contains("PassWord1"))  // case-insensitive
        #expect(blocklist.contains("qwerty123"))
        #expect(!blocklist.contains(goodPassword))
    }

    @Test func compositionModeIsTheCustomersRule() {
        #expect(reasons(goodPassword) == [])
        #expect(reasons("") == ["required"])
        #expect(reasons("Ab1defg") == ["too_short"])
        #expect(reasons("alllowercase1") == ["too_weak"])
        #expect(reasons("ALLUPPERCASE1") == ["too_weak"])
        #expect(reasons("NoDigitsHere") == ["too_weak"])
        #expect(reasons("Password1") == ["too_common"])
        #expect(reasons("Qwerty123") == ["too_common"])
    }

    @Test func nistModeIsLengthAndBlocklistOnly() {
        #expect(reasons("alllowercase words", .nist) == [])
        #expect(reasons("short", .nist) == ["too_short"])
        // SP 800-63B-4: at least 15 characters for a password that is the only factor.
        #expect(reasons("password1", .nist) == ["too_short"])
        #expect(reasons("fourteen chars", .nist) == ["too_short"])
        #expect(reasons("1qaz2wsx3edc4rfv", .nist) == ["too_common"])
        #expect(reasons("123456789987654321", .nist) == ["too_common"])
    }

    @Test func at128CharactersAndNeverTruncated() {
        let exactly = "Aa1" + String(repeating: "x", count: 125)
        #expect(reasons(exactly) == [])
        #expect(reasons(exactly + "x") == ["too_long"])
        #expect(PasswordPolicy.normalized(exactly + "x") == nil)
        #expect(PasswordPolicy.normalized(exactly) == exactly)
    }

    @Test func passwordsAreNFKCNormalised() {
        // U+FB01 (ﬁ ligature) becomes "fi"; full-width digits become ASCII.
        #expect(PasswordPolicy.normalized("Con\u{FB01}rm１２３") == "Confirm123")
        // Decomposed and precomposed é are one password.
        #expect(
            PasswordPolicy.normalized("Caf\u{0065}\u{0301}-Latte9") == PasswordPolicy.normalized("Caf\u{00E9}-Latte9")
        )
        // A normalised form over 128 characters is refused too (U+FDFA expands to 18 characters).
        #expect(PasswordPolicy.normalized("Aa1" + String(repeating: "\u{FDFA}", count: 8)) == nil)
    }

    @Test func signUpReportsEveryFieldViolation() async throws {
        try await withIdentityService { fixture in
            let error = await expectRPCError(.invalidArgument, "invalid_argument") {
                try await fixture.client.signUp(.init(displayName: "A", email: "bad", password: "short"))
            }
            let violations = error?.fieldViolations ?? []
            #expect(violations.map(\.field) == ["display_name", "email", "password"])
            #expect(violations.map(\.reason) == ["invalid_value", "invalid_email", "too_short"])
            #expect(violations[2].description == "Password must be at least 8 characters.")
            // The password never appears in what comes back.
            #expect(!"\(error.map { "\($0)" } ?? "")".contains("short\""))

            let common = await expectRPCError(.invalidArgument, "invalid_argument") {
                try await fixture.client.signUp(
                    .init(displayName: "Asha", email: "a@example.com", password: "Password1")
                )
            }
            #expect(common?.fieldViolations.map(\.reason) == ["too_common"])
            let rows = try await fixture.query("SELECT count(*) FROM @users")
            #expect(try rows[0][0].int == 0)
        }
    }

    @Test func theNISTModeIsConfigurable() async throws {
        try await withIdentityService(configure: { $0.passwordPolicyMode = .nist }) { fixture in
            let user = try await fixture.signUp(password: "correct horse battery staple")
            #expect(user.hasPassword)
            // SP 800-63B-4: a single-factor password has at least 15 characters.
            let short = await expectRPCError(.invalidArgument, "invalid_argument") {
                try await fixture.client.validatePassword(.init(password: "fourteen chars"))
            }
            #expect(short?.fieldViolations.map(\.description) == ["Password must be at least 15 characters."])
            _ = try await fixture.client.validatePassword(.init(password: "fifteen chars!!"))
        }
        let parsed = try IdentityServiceConfiguration(environment: ["AUTH_IDENTITY_PASSWORD_POLICY": "nist"])
        #expect(parsed.passwordPolicyMode == .nist)
    }

    /// Issue 19, item 9: production defaulted to the composition rules with 8 characters.
    @Test func productionDefaultsToNISTAndKeepsCompositionWhenAskedFor() throws {
        #expect(try IdentityServiceConfiguration(environment: [:]).passwordPolicyMode == .composition)
        #expect(
            try IdentityServiceConfiguration(environment: ["AUTH_ENVIRONMENT": "production"]).passwordPolicyMode
                == .nist
        )
        let seedApps = try IdentityServiceConfiguration(environment: [
            "AUTH_ENVIRONMENT": "production", "AUTH_IDENTITY_PASSWORD_POLICY": "composition",
        ])
        #expect(seedApps.passwordPolicyMode == .composition)
    }
}
