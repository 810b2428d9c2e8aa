import AuthPostgres
import AuthTestSupport
import Foundation
import Testing

/// Issue 21 §2: adding or changing the signed-in account's phone or email, through the gateway
/// and the fixture's services: a code of purpose `change_contact` bound to the account, 409
/// `contact_taken` before any code, a notice without a code to the contact replaced, the audit.
extension GatewayEndToEndTests {
    @Suite(.timeLimit(.minutes(1))) struct ContactChange {
        /// Starts a change to `email` as `token` and proves it with the code the webhook got.
        static func changeEmail(
            _ fixture: GatewayFixture,
            token: String,
            to email: String
        ) async throws
            -> GatewayFixture.Reply
        {
            let before = fixture.messages(to: email).count
            let started = try await fixture.post("/v1/me/contact", ["email": email], token: token)
            #expect(started.status == 200, "\(started)")
            #expect(started.string("channel") == "email")
            let id = try #require(started.string("verification_id"))
            let code = try await fixture.code(to: email, index: before)
            return try await fixture.post("/v1/me/contact/verify", ["verification_id": id, "code": code], token: token)
        }

        @Test func aPhoneAccountAddsThenChangesItsEmailAndTheOldOneIsTold() async throws {
            let fixture = try #require(GatewayFixture.current)
            let phone = GatewayFixture.newPhone()
            let signedIn = try await fixture.signInWithCode(phone: phone)
            let token = signedIn.accessToken
            let userID = try #require(signedIn.user["id"] as? String)

            let first = GatewayFixture.newEmail("first")
            let added = try await Self.changeEmail(fixture, token: token, to: first)
            #expect(added.status == 200, "\(added)")
            #expect(added.string("email") == first)
            #expect(added["email_verified"] as? Bool == true)
            let identities = try await fixture.get("/v1/me/identities", token: token)
            let providers = (identities["identities"] as? [[String: Any]] ?? []).compactMap {
                $0["provider"] as? String
            }
            #expect(providers == ["phone", "email"], "\(identities)")

            // Changed again: the first email, verified, is told (a message without a code).
            let second = GatewayFixture.newEmail("second")
            let changed = try await Self.changeEmail(fixture, token: token, to: second)
            #expect(changed.status == 200 && changed.string("email") == second, "\(changed)")
            let told = await fixture.webhook.wait(timeout: .seconds(30)) { requests in
                GatewayFixture.messages(to: first, in: requests).contains { $0["purpose"] == "contact_changed" }
            }
            #expect(told)
            let notice = fixture.messages(to: first).first { $0["purpose"] == "contact_changed" }
            #expect(notice?["code"] == "")
            #expect(notice?["body"]?.contains("no longer on your") == true, "\(notice ?? [:])")

            // The audit trail has both changes.
            let rows = try await fixture.database.query(
                "SELECT method FROM identity.audit_events WHERE user_id = \(UUID(uuidString: userID)!) AND kind = 'contact_changed'"
            )
            #expect(try rows.map { try $0[0].string } == ["email", "email"])
        }

        @Test func aContactAnotherAccountProvedIsTakenAndAnotherAccountsCodeIsNotFound() async throws {
            let fixture = try #require(GatewayFixture.current)
            let owner = try await fixture.signInWithCode(email: GatewayFixture.newEmail("owner"))
            let ownerEmail = try #require(owner.user["email"] as? String)
            let other = try await fixture.signInWithCode(phone: GatewayFixture.newPhone())

            // Proved by another account: 409 before any code is sent.
            let outbox = try await fixture.outboxCount(to: ownerEmail)
            let taken = try await fixture.post("/v1/me/contact", ["email": ownerEmail], token: other.accessToken)
            #expect(taken.status == 409 && taken.error == "contact_taken", "\(taken)")
            #expect(try await fixture.outboxCount(to: ownerEmail) == outbox)

            // A change the owner started cannot be finished by another account, even with its code.
            let target = GatewayFixture.newEmail("target")
            let started = try await fixture.post("/v1/me/contact", ["email": target], token: owner.accessToken)
            let id = try #require(started.string("verification_id"))
            let code = try await fixture.code(to: target)
            let stolen = try await fixture.post(
                "/v1/me/contact/verify",
                ["verification_id": id, "code": code],
                token: other.accessToken
            )
            #expect(stolen.status == 404 && stolen.error == "verification_not_found", "\(stolen)")
            let me = try await fixture.get("/v1/me", token: other.accessToken)
            #expect(me.string("email") == nil)

            // A sign-in code is not a change code (and the other way round).
            let signInCode = try await fixture.post("/v1/otp/send", ["email": GatewayFixture.newEmail("x")])
            let wrongPurpose = try await fixture.post(
                "/v1/me/contact/verify",
                ["verification_id": try #require(signInCode.string("verification_id")), "code": "123456"],
                token: owner.accessToken
            )
            #expect(wrongPurpose.status == 404 && wrongPurpose.error == "verification_not_found", "\(wrongPurpose)")
            let noAuth = try await fixture.post("/v1/me/contact", ["email": target])
            #expect(noAuth.status == 401 && noAuth.error == "invalid_token")
            let both = try await fixture.post(
                "/v1/me/contact",
                ["email": target, "phone": "+15550100000"],
                token: owner.accessToken
            )
            #expect(both.status == 400 && both.error == "invalid_request", "\(both)")
        }

        /// An email someone signed up with but never proved is released to the account that
        /// proves it (the proof decides, as for a code sign-in: security.md).
        @Test func anUnprovedClaimIsReleasedToTheAccountThatProvesTheContact() async throws {
            let fixture = try #require(GatewayFixture.current)
            let email = GatewayFixture.newEmail("claimed")
            let claimer = try await fixture.signUp(email: email)
            let claimerID = try #require(claimer.user["id"] as? String)
            let prover = try await fixture.signInWithCode(phone: GatewayFixture.newPhone())
            // The sign-up sent its own verification code: waited for, so that the change's code is
            // the next message to the address.
            _ = try await fixture.code(to: email, index: 0)
            let proved = try await Self.changeEmail(fixture, token: prover.accessToken, to: email)
            #expect(proved.status == 200 && proved.string("email") == email, "\(proved)")
            let rows = try await fixture.database.query(
                "SELECT email FROM identity.users WHERE id = \(UUID(uuidString: claimerID)!)"
            )
            #expect(try rows.first?[0].decode(String?.self) == nil)
            let released = try await fixture.database.query(
                "SELECT count(*) FROM identity.audit_events WHERE user_id = \(UUID(uuidString: claimerID)!) AND kind = 'contact_released'"
            )
            #expect(try released.first?[0].int == 1)
            #expect(try await fixture.logIn(email: email).status == 401)
        }
    }
}
