import AuthAPI
import AuthCrypto
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import Foundation
import Testing

@testable import IdentityService

/// Lookups, one-time-code contacts, profiles, deletion and the audit trail.
@Suite struct AccountTests {
    @Test func findOrCreateByPhoneMarksItVerifiedAndIsIdempotent() async throws {
        try await withIdentityService { fixture in
            let first = try await fixture.client.findOrCreateByContact(
                .init(phone: "+919876543210", clientIP: "203.0.113.9")
            )
            #expect(first.created)
            #expect(first.user?.phone == "+919876543210")
            #expect(first.user?.phoneVerified == true)
            #expect(first.user?.hasPassword == false)
            let again = try await fixture.client.findOrCreateByContact(.init(phone: "+919876543210"))
            #expect(!again.created)
            #expect(again.user?.id == first.user?.id)

            let byPhone = try await fixture.operatorClient.getUserByPhone(.init(phone: "+919876543210"))
            #expect(byPhone.user?.id == first.user?.id)
            let byID = try await fixture.client.getUser(.init(userID: first.user?.id ?? ""))
            #expect(byID.user == first.user)
            #expect(try await fixture.client.contactExists(.init(phone: "+919876543210")).exists)
            #expect(!(try await fixture.client.contactExists(.init(phone: "+14155550123")).exists))
            await expectRPCError(.notFound, "user_not_found") {
                try await fixture.operatorClient.getUserByPhone(.init(phone: "+14155550123"))
            }
        }
    }

    @Test func theSignUpsOwnCodeVerifiesTheEmailAndKeepsThePassword() async throws {
        try await withIdentityService { fixture in
            let user = try await fixture.signUp()
            #expect(!user.emailVerified)
            let found = try await fixture.client.findOrCreateByContact(
                .init(email: "ASHA@example.com", signupVerification: true)
            )
            #expect(!found.created)
            #expect(!found.passwordCleared)
            #expect(found.user?.id == user.id)
            #expect(found.user?.emailVerified == true)
            #expect(found.user?.hasPassword == true)
            #expect(try await fixture.client.contactExists(.init(email: "asha@EXAMPLE.com")).exists)
            #expect(try await fixture.signIn().id == user.id)
        }
    }

    /// Account pre-hijacking: someone signs up with another person's email and a password of
    /// their own, and never proves the email. When the email's owner proves it with a code of
    /// their own, they get the account without that password, and the gateway is told to end
    /// its sessions (docs/security.md).
    @Test func anotherCodeProvingTheEmailClearsAPasswordSetBeforeTheProof() async throws {
        try await withIdentityService { fixture in
            let user = try await fixture.signUp()
            let found = try await fixture.client.findOrCreateByContact(
                .init(email: "asha@example.com", clientIP: "198.51.100.4")
            )
            #expect(!found.created)
            #expect(found.passwordCleared)
            #expect(found.user?.id == user.id)
            #expect(found.user?.emailVerified == true)
            #expect(found.user?.hasPassword == false)
            await expectRPCError(.unauthenticated, "invalid_credentials") { try await fixture.signIn() }
            let kinds = try await fixture.query(
                "SELECT kind FROM @audit_events WHERE user_id = $1 ORDER BY id",
                [.uuid(try #require(UUID(uuidString: user.id)))]
            ).map { try $0[0].string }
            #expect(kinds.suffix(3) == ["password_cleared", "sign_in", "sign_in_failed"], "\(kinds)")

            // Proved now: a later code clears nothing, and a new password (reset) stays.
            let again = try await fixture.client.findOrCreateByContact(.init(email: "asha@example.com"))
            #expect(!again.passwordCleared)
            #expect(again.user?.id == user.id)
        }
    }

    @Test func aCodeForAVerifiedEmailLeavesItsPassword() async throws {
        try await withIdentityService { fixture in
            let user = try await fixture.signUp()
            _ = try await fixture.client.findOrCreateByContact(
                .init(email: "asha@example.com", signupVerification: true)
            )
            let found = try await fixture.client.findOrCreateByContact(.init(email: "asha@example.com"))
            #expect(!found.passwordCleared)
            #expect(found.user?.hasPassword == true)
            #expect(try await fixture.signIn().id == user.id)
        }
    }

    @Test func twoConcurrentFindOrCreatesMakeOneUser() async throws {
        try await withIdentityService { fixture in
            let ids = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        try await fixture.client.findOrCreateByContact(.init(phone: "+14155550123")).user?.id ?? ""
                    }
                }
                return try await group.reduce(into: Set<String>()) { $0.insert($1) }
            }
            #expect(ids.count == 1)
        }
    }

    @Test func profileUpdatesOnlyTheGivenFields() async throws {
        try await withIdentityService { fixture in
            let user = try await fixture.signUp()
            let updated = try await fixture.client.updateProfile(
                .init(
                    userID: user.id,
                    photoURL: .init(value: "https://cdn.example.com/a.jpg"),
                    onboardingCompleted: .init(value: true)
                )
            )
            #expect(updated.user?.displayName == "Asha K")
            #expect(updated.user?.photoURL == "https://cdn.example.com/a.jpg")
            #expect(updated.user?.onboardingCompleted == true)
            let renamed = try await fixture.client.updateProfile(
                .init(userID: user.id, displayName: .init(value: "Asha R."))
            )
            #expect(renamed.user?.displayName == "Asha R.")
            #expect(renamed.user?.photoURL == "https://cdn.example.com/a.jpg")
            let error = await expectRPCError(.invalidArgument, "invalid_argument") {
                try await fixture.client.updateProfile(
                    .init(userID: user.id, displayName: .init(value: "X"), photoURL: .init(value: "http://x.example/a"))
                )
            }
            #expect(error?.fieldViolations.map(\.field) == ["display_name", "photo_url"])
            await expectRPCError(.notFound, "user_not_found") {
                try await fixture.client.updateProfile(
                    .init(userID: UUID().uuidString, displayName: .init(value: "Someone"))
                )
            }
        }
    }

    @Test func deletionRemovesTheUserFromEveryLookupAndPurgesPersonalData() async throws {
        try await withIdentityService { fixture in
            let user = try await fixture.signUp()
            _ = try await fixture.client.findOrCreateByContact(.init(email: "asha@example.com"))
            _ = try await fixture.client.updateProfile(
                .init(userID: user.id, photoURL: .init(value: "https://cdn.example.com/a.jpg"), clientIP: "203.0.113.7")
            )
            await expectRPCError(.unauthenticated, "invalid_credentials") {
                try await fixture.signIn(password: "Wrong-Password-1")
            }
            let deleted = try await fixture.client.deleteUser(.init(userID: user.id, clientIP: "203.0.113.7"))
            #expect(deleted.deleted)
            #expect(!(try await fixture.client.deleteUser(.init(userID: user.id)).deleted))
            #expect(try await fixture.query("SELECT count(*) FROM @password_failures")[0][0].int == 0)
            #expect(try await fixture.query("SELECT count(*) FROM @provider_identities")[0][0].int == 0)

            await expectRPCError(.notFound, "user_not_found") {
                try await fixture.client.getUser(.init(userID: user.id))
            }
            await expectRPCError(.notFound, "user_not_found") {
                try await fixture.operatorClient.getUserByEmail(.init(email: "asha@example.com"))
            }
            #expect(!(try await fixture.client.contactExists(.init(email: "asha@example.com")).exists))
            await expectRPCError(.unauthenticated, "invalid_credentials") { try await fixture.signIn() }
            await expectRPCError(.notFound, "user_not_found") {
                try await fixture.client.updateProfile(.init(userID: user.id, displayName: .init(value: "Back Again")))
            }

            // A tombstone without personal data; no identities or failures left; audit without IPs.
            let row = try await fixture.query(
                """
                SELECT phone IS NULL AND email IS NULL AND password_hash IS NULL AND display_name = '' AND photo_url = ''
                    AND deleted_at IS NOT NULL FROM @users
                """
            )
            #expect(try row[0][0].bool)
            let audit = try await fixture.operatorClient.listAuditEvents(.init(userID: user.id))
            #expect(audit.events.first?.kind == "account_deleted")
            #expect(audit.events.allSatisfy { $0.clientIP.isEmpty })
            #expect(audit.events.map(\.kind).contains("sign_up"))

            // The email is free again.
            let again = try await fixture.signUp()
            #expect(again.id != user.id)
        }
    }

    @Test func theAuditTrailIsAppendOnlyAndHoldsNoSecrets() async throws {
        try await withIdentityService { fixture in
            let user = try await fixture.signUp()
            _ = try await fixture.signIn()
            await expectRPCError(.unauthenticated, "invalid_credentials") {
                try await fixture.signIn(password: "Wrong-Password-1")
            }
            let events = try await fixture.operatorClient.listAuditEvents(.init(userID: user.id)).events
            #expect(events.map(\.kind) == ["sign_in_failed", "sign_in", "sign_up"])
            #expect(
                events.allSatisfy { $0.method == "password" && $0.clientIP == "203.0.113.7" && $0.caller == "gateway" }
            )
            let dump = try await fixture.query("SELECT row_to_json(a)::text FROM @audit_events a").map {
                try $0[0].string
            }
            #expect(!dump.joined().contains(goodPassword))
            #expect(!dump.joined().contains("Wrong-Password-1"))
            #expect(!dump.joined().contains("asha@example.com"))

            await #expect(throws: (any Error).self) { try await fixture.query("DELETE FROM @audit_events") }
            await #expect(throws: (any Error).self) { try await fixture.query("UPDATE @audit_events SET kind = 'x'") }
            await #expect(throws: (any Error).self) { try await fixture.query("TRUNCATE @audit_events") }

            // Only operators may read it: no gateway route reads an audit trail, and the
            // allowed callers are trimmed to what is called today (issue 19; the gateway was
            // allowed, and so were its lookups by phone and email).
            let (otp, transport) = fixture.makeClient(caller: "otp-dispatch")
            await expectRPCError(.permissionDenied, "caller_not_allowed") {
                try await otp.listAuditEvents(.init(userID: user.id))
            }
            await transport.shutdown()
            let gateway = fixture.client
            await expectRPCError(.permissionDenied, "caller_not_allowed") {
                try await gateway.listAuditEvents(.init(userID: user.id))
            }
            await expectRPCError(.permissionDenied, "caller_not_allowed") {
                try await gateway.getUserByPhone(.init(phone: "+919999900001"))
            }
        }
    }

    @Test func auditRowsCarryTheRequestIDAndTheEndUserIPFromTheMetadata() async throws {
        try await withIdentityService { fixture in
            let options = CallOptions(metadata: RPCMetadata(requestID: "req-42", endUserIP: "2001:db8::7"))
            let created = try await fixture.client.findOrCreateByContact(.init(phone: "+14155550199"), options: options)
            let id = try #require(created.user?.id)
            let events = try await fixture.operatorClient.listAuditEvents(.init(userID: id)).events
            #expect(events.count == 1)
            #expect(events.first?.kind == "sign_up")
            #expect(events.first?.method == "otp_sms")
            #expect(events.first?.requestID == "req-42")
            #expect(events.first?.clientIP == "2001:db8::7")
            #expect(events.first?.occurredAtUS == Int64(fixture.clock.now().timeIntervalSince1970 * 1_000_000))
            // A request's own client_ip wins over the metadata's.
            let again = try await fixture.client.findOrCreateByContact(
                .init(phone: "+14155550199", clientIP: "198.51.100.1"),
                options: options
            )
            #expect(!again.created)
            let latest = try await fixture.operatorClient.listAuditEvents(.init(userID: id, limit: 1)).events
            #expect(latest.map(\.kind) == ["sign_in"])
            #expect(latest.first?.clientIP == "198.51.100.1")
        }
    }
}
