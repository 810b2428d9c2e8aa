import AuthTestSupport
import Foundation
import Testing

/// Issue 22: the sign-up email's confirmation link. signUp with emailRedirectTo (the official
/// Python client) → the email carries the code and the link → the browser opens the link → the
/// gateway sends it back to the app with the session (implicit flow) or a code the client
/// exchanges (PKCE); the email is confirmed either way, and the link works once.
extension GatewayEndToEndTests.SupabaseDoor {
    /// The link of the sign-up email to `email`, as the gateway's own address (the email names
    /// AUTH_PUBLIC_URL): its path and query.
    static func confirmationLink(_ fixture: GatewayFixture, to email: String) async throws -> String {
        let arrived = await fixture.webhook.wait(timeout: .seconds(30)) { requests in
            GatewayFixture.messages(to: email, in: requests).contains { $0["link"] != nil }
        }
        try #require(arrived, "no link in \(fixture.messages(to: email))")
        let message = try #require(fixture.messages(to: email).first { $0["link"] != nil })
        let link = try #require(message["link"])
        #expect(message["body"]?.contains(link) == true, "\(message)")
        #expect(message["body"]?.contains("code is \(message["code"] ?? "-")") == true)
        let prefix = GatewayFixture.publicURL + "/auth/v1/verify?"
        try #require(link.hasPrefix(prefix), "\(link)")
        return String(link.dropFirst(GatewayFixture.publicURL.count))
    }

    @Test(arguments: ["implicit", "pkce"])
    func theSignUpEmailsLinkConfirmsAndSignsIn(flow: String) async throws {
        let fixture = try #require(GatewayFixture.current)
        let email = GatewayFixture.newEmail("supabase-link-\(flow)")
        let signedUp = try await Self.journeys([
            "link-signup", fixture.baseURL, email, GatewayFixture.confirmedURL, flow,
        ])
        let link = try await Self.confirmationLink(fixture, to: email)
        #expect(link.contains("type=signup"), "\(link)")

        // The link with another redirect_to: refused, never a redirect elsewhere.
        let elsewhere = link.replacingOccurrences(
            of: "redirect_to=laten%3A%2F%2Fauth%2Fconfirmed",
            with: "redirect_to=https%3A%2F%2Fevil.example%2F"
        )
        #expect(elsewhere != link)
        let refused = try await fixture.get(elsewhere)
        #expect(refused.status == 400 && refused.string("error_code") == "validation_failed", "\(refused)")

        let followed = try await fixture.get(link)
        #expect(followed.status == 303, "\(followed)")
        let location = try #require(followed.header("Location"))
        #expect(location.hasPrefix(GatewayFixture.confirmedURL), "\(location)")
        #expect(followed.header("Cache-Control") == "no-store")
        if flow == "pkce" {
            #expect(location.hasPrefix(GatewayFixture.confirmedURL + "?code="), "\(location)")
        } else {
            #expect(location.contains("#access_token="), "\(location)")
        }
        let verifier = signedUp["verifier"] as? String ?? ""
        let session = try await Self.journeys(
            ["link-session", fixture.baseURL, location, email] + (verifier.isEmpty ? [] : [verifier])
        )
        #expect(session["confirmed"] as? Bool == true, "\(session)")

        // The same link again: back to the app with Supabase's otp_expired error.
        let again = try await fixture.get(link)
        #expect(again.status == 303, "\(again)")
        let error = try #require(again.header("Location"))
        #expect(
            error.hasPrefix(GatewayFixture.confirmedURL + "#error=access_denied&error_code=otp_expired"),
            "\(error)"
        )
    }

    /// A sign-up whose redirect_to is not on AUTH_OAUTH_REDIRECT_URLS: the email carries the code
    /// only; the code confirms as always.
    @Test func aRedirectNotOnTheAllowListSendsTheCodeOnly() async throws {
        let fixture = try #require(GatewayFixture.current)
        let email = GatewayFixture.newEmail("supabase-nolink")
        _ = try await Self.journeys(["link-signup", fixture.baseURL, email, "https://evil.example/", "implicit"])
        let code = try await fixture.code(to: email)
        #expect(code.count == 6)
        #expect(fixture.messages(to: email).allSatisfy { $0["link"] == nil }, "\(fixture.messages(to: email))")
    }
}
