import AuthCrypto
import AuthTestSupport
import AuthText
import Foundation
import Testing

/// Issue 22 (first part): the Supabase Auth door under /auth/v1, through the fixture's gateway:
/// Supabase's official Python client (supabase-auth, pinned) signs in, refreshes, reads the user
/// and signs out; the error shapes and the anon key checked by hand.
extension GatewayEndToEndTests {
    @Suite(.timeLimit(.minutes(2))) struct SupabaseDoor {
        static let projectRoot = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

        /// An account made on the /v1 door with its email confirmed by the sign-up's code.
        static func confirmedAccount(_ fixture: GatewayFixture) async throws -> String {
            let email = GatewayFixture.newEmail("supabase")
            let created = try await fixture.signUp(email: email)
            let code = try await fixture.code(to: email)
            let verified = try await fixture.post(
                "/v1/otp/verify",
                ["verification_id": try #require(created.string("verification_id")), "code": code]
            )
            #expect(verified.status == 200, "\(verified)")
            return email
        }

        /// Runs `scripts/supabase-check/journeys.py` with `arguments` (installing the pinned
        /// client first): the JSON object it printed, after expecting it to exit 0.
        static func journeys(_ arguments: [String]) async throws -> [String: Any] {
            let install = try await ChildProcess.run(
                URL(fileURLWithPath: "/bin/bash"),
                [Self.projectRoot.appendingPathComponent("scripts/supabase-check/install.sh").path],
                currentDirectory: Self.projectRoot
            )
            try #require(install.status == 0, "scripts/supabase-check/install.sh failed: \(install.standardError)")
            let python = URL(fileURLWithPath: install.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines))
            let result = try await ChildProcess.run(
                python,
                [Self.projectRoot.appendingPathComponent("scripts/supabase-check/journeys.py").path] + arguments,
                currentDirectory: Self.projectRoot,
                timeout: .seconds(90)
            )
            try #require(result.status == 0, "journeys.py: \(result.standardOutput)\n\(result.standardError)")
            return try #require(
                try JSONSerialization.jsonObject(with: Data(result.output)) as? [String: Any],
                "journeys.py printed no JSON object: \(result.standardOutput)"
            )
        }

        @Test func theOfficialPythonClientSignsInRefreshesAndSignsOut() async throws {
            let fixture = try #require(GatewayFixture.current)
            let email = try await Self.confirmedAccount(fixture)
            let seen = try await Self.journeys([fixture.baseURL, email, GatewayFixture.password])
            #expect(seen["wrong_password"] as? String == "invalid_credentials", "\(seen)")
            #expect(seen["refresh_reuse"] as? String == "refresh_token_already_used")
            #expect(seen["signed_out"] as? Bool == true)
            #expect(seen["scopes"] as? [String] == ["global", "others", "local"])
            #expect(seen["claims_verified"] as? Bool == true)
            #expect(seen["disabled_features"] as? Bool == true)
        }

        /// signUp (the email confirmed first), a taken email answered like a new one (its owner
        /// gets a notice), a weak password, signInWithOtp by phone, otp_disabled; then verifyOtp
        /// of the sign-up's code and of the phone's, a wrong code, resend.
        @Test func theOfficialPythonClientSignsUpAndSignsInWithCodes() async throws {
            let fixture = try #require(GatewayFixture.current)
            let email = GatewayFixture.newEmail("supabase-signup")
            let phone = GatewayFixture.newPhone()
            let otpEmail = GatewayFixture.newEmail("supabase-otp")
            let passwordPhone = GatewayFixture.newPhone()
            let sent = try await Self.journeys(["codes-send", fixture.baseURL, email, phone, otpEmail, passwordPhone])
            #expect(sent["taken_email_answered_like_new"] as? Bool == true, "\(sent)")
            #expect(sent["weak_password"] as? String == "weak_password")
            #expect(sent["otp_disabled"] as? String == "otp_disabled")
            let emailCode = try await fixture.code(to: email)
            let phoneCode = try await fixture.code(to: phone)
            // The taken email's owner got a notice (no code), once.
            let notified = await fixture.webhook.wait(timeout: .seconds(30)) { requests in
                GatewayFixture.messages(to: email, in: requests).contains { $0["purpose"] == "signup_attempted" }
            }
            #expect(notified, "\(fixture.messages(to: email))")
            #expect(fixture.messages(to: email).filter { $0["purpose"] == "signup_attempted" }.count == 1)

            let verified = try await Self.journeys([
                "codes-verify", fixture.baseURL, email, emailCode, phone, phoneCode, otpEmail,
                try await fixture.code(to: otpEmail), passwordPhone, try await fixture.code(to: passwordPhone),
            ])
            #expect(verified["signup_confirmed"] as? Bool == true, "\(verified)")
            #expect(verified["phone_signed_in"] as? Bool == true)
            #expect(verified["email_signed_in"] as? Bool == true)
            #expect(verified["phone_password"] as? Bool == true)
            #expect(verified["resent"] as? Bool == true)
            // The resend was a new code to the phone.
            _ = try await fixture.code(to: phone, index: 1)
        }

        /// resetPasswordForEmail (an unknown email answered alike, nothing sent to it), verifyOtp of
        /// type recovery, updateUser's password (without the old one in the recovery session,
        /// with it elsewhere) and metadata.
        @Test func theOfficialPythonClientRecoversAPassword() async throws {
            let fixture = try #require(GatewayFixture.current)
            let email = try await Self.confirmedAccount(fixture)
            let before = fixture.messages(to: email).count
            let sent = try await Self.journeys(["recover-send", fixture.baseURL, email])
            #expect(sent["recover_sent"] as? Bool == true, "\(sent)")
            let code = try await fixture.code(to: email, index: before)
            #expect(fixture.messages(to: "nobody-" + email).isEmpty)
            let seen = try await Self.journeys([
                "recover-verify", fixture.baseURL, email, code, GatewayFixture.password,
            ])
            #expect(seen["recovered"] as? Bool == true, "\(seen)")
            #expect(seen["current_password_rules"] as? Bool == true)
            #expect(seen["metadata_updated"] as? Bool == true)
        }

        /// updateUser({email}) sends a code to the new email (another account's proved email is
        /// email_exists); verifyOtp of type email_change makes it the account's, and the old one
        /// gets a notice.
        @Test func theOfficialPythonClientChangesTheEmail() async throws {
            let fixture = try #require(GatewayFixture.current)
            let email = try await Self.confirmedAccount(fixture)
            let taken = try await Self.confirmedAccount(fixture)
            let newEmail = GatewayFixture.newEmail("supabase-new")
            let sent = try await Self.journeys([
                "email-change-send", fixture.baseURL, email, GatewayFixture.password, newEmail, taken,
            ])
            #expect(sent["requested"] as? Bool == true, "\(sent)")
            let code = try await fixture.code(to: newEmail)
            let changed = try await Self.journeys(["email-change-verify", fixture.baseURL, newEmail, code])
            #expect(changed["changed"] as? Bool == true, "\(changed)")
            let notified = await fixture.webhook.wait(timeout: .seconds(30)) { requests in
                GatewayFixture.messages(to: email, in: requests).contains { $0["purpose"] == "contact_changed" }
            }
            #expect(notified, "\(fixture.messages(to: email))")
        }

        /// signInWithIdToken for Apple with the raw nonce (the token carries its SHA-256), and
        /// the same token again: bad_oidc_token (spent).
        @Test func theOfficialPythonClientSignsInWithAnIDToken() async throws {
            let fixture = try #require(GatewayFixture.current)
            let nonce = Base64URL.encode(SecureRandom.bytes(count: 16))
            let token = try fixture.apple.idToken(
                subject: "supabase-" + Base64URL.encode(SecureRandom.bytes(count: 8)),
                nonce: AppleStandIn.hashedNonce(nonce),
                email: GatewayFixture.newEmail("supabase-apple")
            )
            let seen = try await Self.journeys(["id-token", fixture.baseURL, "apple", token, nonce])
            #expect(seen["id_token"] as? String == "apple", "\(seen)")
            #expect(seen["replay"] as? String == "bad_oidc_token")
        }

        @Test func errorsComeInSupabasesTwoShapes() async throws {
            let fixture = try #require(GatewayFixture.current)
            let path = "/auth/v1/token?grant_type=password"
            let body =
                ["email": GatewayFixture.newEmail("nobody"), "password": "Wrong-Password-1", "data": NSNull()]
                as [String: Any]
            // Without the API version header: {code: status, error_code, msg} and x-sb-error-code.
            let legacy = try await fixture.send(.POST, path, json: body)
            #expect(legacy.status == 400, "\(legacy)")
            #expect(legacy.int("code") == 400)
            #expect(legacy.string("error_code") == "invalid_credentials")
            #expect(legacy.string("msg") == "Invalid login credentials")
            #expect(legacy.header("x-sb-error-code") == "invalid_credentials")
            // With X-Supabase-Api-Version 2024-01-01: {code: error_code, message}, the header echoed.
            let modern = try await fixture.send(
                .POST,
                path,
                json: body,
                headers: [("X-Supabase-Api-Version", "2024-01-01")]
            )
            #expect(modern.status == 400)
            #expect(modern.string("code") == "invalid_credentials")
            #expect(modern.string("message") == "Invalid login credentials")
            #expect(modern.header("X-Supabase-Api-Version") == "2024-01-01")

            // An account whose email is not confirmed: email_not_confirmed (Supabase confirms first).
            let unconfirmed = GatewayFixture.newEmail("unconfirmed")
            _ = try await fixture.signUp(email: unconfirmed)
            let early = try await fixture.send(
                .POST,
                path,
                json: ["email": unconfirmed, "password": GatewayFixture.password, "gotrue_meta_security": [:]]
            )
            #expect(early.status == 400 && early.string("error_code") == "email_not_confirmed", "\(early)")

            // Without a token, a token that is no session's, and what is not served.
            let noToken = try await fixture.send(.GET, "/auth/v1/user")
            #expect(noToken.status == 401 && noToken.string("error_code") == "no_authorization", "\(noToken)")
            let anonAsUser = try await fixture.send(.GET, "/auth/v1/user", authorization: "Bearer anon-key")
            #expect(anonAsUser.status == 403 && anonAsUser.string("error_code") == "bad_jwt", "\(anonAsUser)")
            let saml = try await fixture.send(.POST, "/auth/v1/sso", json: [:])
            #expect(saml.status == 404 && saml.string("error_code") == "not_found", "\(saml)")
            // Settings: the fixture's identity has Apple's ID-token sign-in only.
            let settings = try await fixture.get("/auth/v1/settings")
            let external = settings["external"] as? [String: Bool] ?? [:]
            #expect(settings.status == 200, "\(settings)")
            #expect(external["apple"] == true && external["google"] == false && external["facebook"] == false)
            #expect(external["email"] == true && external["phone"] == true && external["github"] == false)
            #expect(settings["mailer_autoconfirm"] as? Bool == false && settings["disable_signup"] as? Bool == false)
            let health = try await fixture.get("/auth/v1/health")
            #expect(health.status == 200 && health.string("name") == "GoTrue", "\(health)")
            let jwks = try await fixture.get("/auth/v1/.well-known/jwks.json")
            #expect(jwks.status == 200 && (jwks["keys"] as? [Any])?.isEmpty == false, "\(jwks)")
        }

        /// The `id_token` grant with `link_identity`: the token's Apple identity joins the
        /// signed-in account, and a new session of it answers.
        @Test func anIDTokenLinksToTheSignedInAccount() async throws {
            let fixture = try #require(GatewayFixture.current)
            let email = try await Self.confirmedAccount(fixture)
            let signedIn = try await fixture.post(
                "/auth/v1/token?grant_type=password",
                ["email": email, "password": GatewayFixture.password]
            )
            #expect(signedIn.status == 200, "\(signedIn)")
            let nonce = Base64URL.encode(SecureRandom.bytes(count: 16))
            let token = try fixture.apple.idToken(
                subject: "supabase-link-" + Base64URL.encode(SecureRandom.bytes(count: 8)),
                nonce: AppleStandIn.hashedNonce(nonce)
            )
            let body: [String: Any] = ["provider": "apple", "id_token": token, "nonce": nonce, "link_identity": true]
            let linked = try await fixture.post("/auth/v1/token?grant_type=id_token", body, token: signedIn.accessToken)
            #expect(linked.status == 200, "\(linked)")
            #expect(linked.user["id"] as? String == signedIn.user["id"] as? String)
            let providers = (linked.user["identities"] as? [[String: Any]])?.compactMap { $0["provider"] as? String }
            #expect(providers?.contains("apple") == true, "\(linked.user)")
            // Without a signed-in user there is no one to link to.
            let anonymous = try await fixture.post("/auth/v1/token?grant_type=id_token", body)
            #expect(anonymous.status == 401 && anonymous.string("error_code") == "no_authorization", "\(anonymous)")
        }

        /// The door spends /v1's per-IP budgets: past them the client's typed error is
        /// over_request_rate_limit (429).
        @Test func theOfficialPythonClientIsRateLimited() async throws {
            let fixture = try #require(GatewayFixture.current)
            let (gateway, base) = try await fixture.startGateway(["AUTH_GATEWAY_RATE_LIMIT_PER_MINUTE": "3"])
            let seen = try await Self.journeys(["rate-limit", base, GatewayFixture.newEmail("limited")])
            #expect(seen["limited_after"] as? Int == 3, "\(seen)")
            await gateway.terminate(grace: .seconds(5))
        }

        /// With AUTH_SUPABASE_ANON_KEYS, the `apikey` must be one of them.
        @Test func configuredAnonKeysAreRequired() async throws {
            let fixture = try #require(GatewayFixture.current)
            let (gateway, base) = try await fixture.startGateway(["AUTH_SUPABASE_ANON_KEYS": "anon-1,anon-2"])
            let email = try await Self.confirmedAccount(fixture)
            let path = "/auth/v1/token?grant_type=password"
            let body: [String: Any] = ["email": email, "password": GatewayFixture.password]
            let missing = try await fixture.send(.POST, path, json: body, base: base)
            #expect(missing.status == 401 && missing.string("error_code") == "no_authorization", "\(missing)")
            let wrong = try await fixture.send(.POST, path, json: body, headers: [("apikey", "anon-3")], base: base)
            #expect(wrong.status == 401, "\(wrong)")
            let right = try await fixture.send(.POST, path, json: body, headers: [("apikey", "anon-2")], base: base)
            #expect(right.status == 200, "\(right)")
            #expect((right["user"] as? [String: Any])?["email"] as? String == email)
            #expect((right["expires_at"] as? NSNumber) != nil)
            // The door's Supabase-format token is one of our sessions on /v1 too.
            let session = try await fixture.get("/v1/session", token: right.accessToken, base: base)
            #expect(session.status == 200, "\(session)")
            #expect((session["session"] as? [String: Any])?["amr"] as? [String] == ["password"])
            await gateway.terminate(grace: .seconds(5))
        }
    }
}
