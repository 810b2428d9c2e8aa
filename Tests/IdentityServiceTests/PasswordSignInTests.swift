import AuthAPI
import AuthCrypto
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import Foundation
import Testing

@testable import IdentityService

@Suite struct PasswordSignInTests {
    @Test func signUpThenSignIn() async throws {
        try await withIdentityService { fixture in
            let user = try await fixture.signUp(email: "Asha@Example.com")
            #expect(user.email == "asha@example.com")
            #expect(user.displayName == "Asha K")
            #expect(user.hasPassword)
            #expect(!user.emailVerified)
            #expect(UUID(uuidString: user.id) != nil)
            let signedIn = try await fixture.signIn(email: "ASHA@example.com")
            #expect(signedIn.id == user.id)

            // Stored: a scrypt PHC string, the email lower-cased; never the password.
            let rows = try await fixture.query("SELECT email, password_hash FROM @users")
            #expect(try rows[0][0].string == "asha@example.com")
            let hash = try rows[0][1].string
            #expect(hash.hasPrefix("$scrypt$ln=10,r=8,p=1$"))
            #expect(!hash.contains(goodPassword))
        }
    }

    @Test func aTakenEmailIsEmailTaken() async throws {
        try await withIdentityService { fixture in
            _ = try await fixture.signUp()
            let error = await expectRPCError(.alreadyExists, "email_taken") {
                try await fixture.signUp(email: "ASHA@example.com", displayName: "Other")
            }
            #expect(error?.message == "This email is already registered. Try logging in instead.")
        }
    }

    /// The Supabase door's sign-up: no name is needed, and a taken email costs a hash as a new
    /// one does (the answer's time does not tell that the email has an account).
    @Test func theSupabaseDoorsSignUpNeedsNoNameAndHashesATakenEmail() async throws {
        try await withIdentityService { fixture in
            let request = Auth_Identity_V1_SignUpRequest(
                email: "noname@example.com",
                password: goodPassword,
                clientIP: "203.0.113.7",
                displayNameOptional: true,
                hashWhenTaken: true
            )
            let user = try #require(try await fixture.client.signUp(request).user)
            #expect(user.displayName.isEmpty)
            let before = fixture.service.hashing.computedCount
            await expectRPCError(.alreadyExists, "email_taken") { try await fixture.client.signUp(request) }
            #expect(fixture.service.hashing.computedCount == before + 1)
            // Without the flags: a name is required, and a taken email is answered before any hash.
            let unnamed = await expectRPCError(.invalidArgument, "invalid_argument") {
                try await fixture.client.signUp(
                    Auth_Identity_V1_SignUpRequest(
                        email: "other@example.com",
                        password: goodPassword,
                        clientIP: "203.0.113.7"
                    )
                )
            }
            #expect(unnamed?.fieldViolations.map(\.field) == ["display_name"])
            let plain = fixture.service.hashing.computedCount
            await expectRPCError(.alreadyExists, "email_taken") {
                try await fixture.client.signUp(
                    Auth_Identity_V1_SignUpRequest(
                        displayName: "Asha K",
                        email: "noname@example.com",
                        password: goodPassword
                    )
                )
            }
            #expect(fixture.service.hashing.computedCount == plain)
        }
    }

    /// A phone signs up with a password (the Supabase door's phone sign-up) and signs in with it;
    /// a taken phone is contact_taken; a wrong password by phone counts like one by email.
    @Test func aPhoneSignsUpAndInWithAPassword() async throws {
        try await withIdentityService { fixture in
            let phoneSignUp = Auth_Identity_V1_SignUpRequest(
                password: goodPassword,
                clientIP: "203.0.113.7",
                displayNameOptional: true,
                phone: "+919999912345"
            )
            let user = try #require(try await fixture.client.signUp(phoneSignUp).user)
            #expect(user.phone == "+919999912345" && user.email.isEmpty && !user.phoneVerified)
            let signedIn = try await fixture.client.signInWithPassword(
                Auth_Identity_V1_SignInWithPasswordRequest(
                    password: goodPassword,
                    clientIP: "203.0.113.7",
                    phone: "+919999912345"
                )
            )
            #expect(signedIn.user?.id == user.id)
            await expectRPCError(.unauthenticated, "invalid_credentials") {
                try await fixture.client.signInWithPassword(
                    Auth_Identity_V1_SignInWithPasswordRequest(
                        password: "Wrong-Pass-123",
                        clientIP: "203.0.113.7",
                        phone: "+919999912345"
                    )
                )
            }
            await expectRPCError(.alreadyExists, "contact_taken") { try await fixture.client.signUp(phoneSignUp) }
            let identities = try await fixture.client.listIdentities(
                Auth_Identity_V1_ListIdentitiesRequest(userID: user.id)
            )
            #expect(identities.identities.map(\.provider) == ["password"])
            #expect(identities.identities.first?.id == "+919999912345")
        }
    }

    @Test func twoConcurrentSignUpsWithOneEmailExactlyOneWins() async throws {
        try await withIdentityService { fixture in
            for round in 0..<5 {
                let email = "race\(round)@example.com"
                let outcomes = try await withThrowingTaskGroup(of: String.self) { group in
                    for name in ["First One", "Second One"] {
                        group.addTask {
                            do {
                                _ = try await fixture.signUp(email: email, displayName: name)
                                return "ok"
                            } catch let error as RPCError {
                                return error.reason
                            }
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(outcomes.sorted() == ["email_taken", "ok"])
                let rows = try await fixture.query("SELECT count(*) FROM @users WHERE email = $1", [.text(email)])
                #expect(try rows[0][0].int == 1)
            }
        }
    }

    @Test func wrongPasswordAndUnknownEmailGetTheSameAnswer() async throws {
        try await withIdentityService { fixture in
            _ = try await fixture.signUp()
            let wrong = await expectRPCError(.unauthenticated, "invalid_credentials") {
                try await fixture.signIn(password: "Wrong-Password-1")
            }
            let unknown = await expectRPCError(.unauthenticated, "invalid_credentials") {
                try await fixture.signIn(email: "nobody@example.com")
            }
            #expect(wrong?.message == "Invalid email or password")
            #expect(unknown?.message == wrong?.message)
            #expect(unknown?.fieldViolations == wrong?.fieldViolations)
            // A password over 128 characters is refused the same way, without hashing.
            await expectRPCError(.unauthenticated, "invalid_credentials") {
                try await fixture.signIn(password: String(repeating: "A1a", count: 50))
            }
        }
    }

    @Test func tenFailuresIn15MinutesLockTheEmailUntilTheWindowPasses() async throws {
        let clock = ManualClock()
        try await withIdentityService(clock: clock) { fixture in
            _ = try await fixture.signUp()
            for _ in 0..<10 {
                await expectRPCError(.unauthenticated, "invalid_credentials") {
                    try await fixture.signIn(password: "Wrong-Password-1")
                }
                clock.advance(seconds: 30)
            }
            // 300 s after the first failure: locked, even with the right password.
            let locked = await expectRPCError(.resourceExhausted, "too_many_attempts") {
                try await fixture.signIn()
            }
            #expect(locked?.retryAfterSeconds == 600)
            // An unknown email is locked the same way (the lockout tells nothing about accounts).
            for _ in 0..<10 {
                await expectRPCError(.unauthenticated, "invalid_credentials") {
                    try await fixture.signIn(email: "ghost@example.com")
                }
            }
            await expectRPCError(.resourceExhausted, "too_many_attempts") {
                try await fixture.signIn(email: "ghost@example.com")
            }
            // When the first failure leaves the window, nine remain: the right password works
            // and clears the count.
            clock.advance(seconds: 600)
            _ = try await fixture.signIn()
            let rows = try await fixture.query(
                "SELECT count(*) FROM @password_failures WHERE email_hash = $1",
                [.bytea(SHA256.hash("asha@example.com"))]
            )
            #expect(try rows[0][0].int == 0)
        }
    }

    /// Issue 19, item 6: the window alone let a patient guesser try 10 passwords every 15
    /// minutes forever (960 a day). After `maxConsecutiveFailures` failures since the last
    /// success the password is locked (`factor_locked`) across windows, until a completed
    /// password reset or an operator's unlock.
    @Test func consecutiveFailuresLockThePasswordUntilAResetOrAnUnlock() async throws {
        let clock = ManualClock()
        try await withIdentityService(
            clock: clock,
            configure: {
                $0.maxSignInFailures = 3
                $0.maxConsecutiveFailures = 5
            }
        ) { fixture in
            _ = try await fixture.signUp()
            // Three failures fill the window; after it, two more make five in a row.
            for _ in 0..<3 {
                await expectRPCError(.unauthenticated, "invalid_credentials") {
                    try await fixture.signIn(password: "Wrong-Password-1")
                }
            }
            await expectRPCError(.resourceExhausted, "too_many_attempts") { try await fixture.signIn() }
            clock.advance(seconds: 901)
            for _ in 0..<2 {
                await expectRPCError(.unauthenticated, "invalid_credentials") {
                    try await fixture.signIn(password: "Wrong-Password-1")
                }
            }
            // Locked, even with the right password, and still a week later.
            await expectRPCError(.permissionDenied, "factor_locked") { try await fixture.signIn() }
            clock.advance(seconds: 7 * 86_400)
            await expectRPCError(.permissionDenied, "factor_locked") { try await fixture.signIn() }
            // A completed password reset unlocks it.
            _ = try await fixture.client.resetPassword(.init(email: "asha@example.com", newPassword: "Fresh-Start-77"))
            _ = try await fixture.signIn(password: "Fresh-Start-77")

            // A success resets the count: four failures, a success, four more are not five in a row.
            for round in 0..<2 {
                for _ in 0..<4 {
                    await expectRPCError(.unauthenticated, "invalid_credentials") {
                        try await fixture.signIn(password: "Wrong-Password-1")
                    }
                    clock.advance(seconds: 901)
                }
                if round == 0 { _ = try await fixture.signIn(password: "Fresh-Start-77") }
            }
            _ = try await fixture.signIn(password: "Fresh-Start-77")

            // An unknown email locks the same way (the lock tells nothing about accounts), and
            // an operator's unlock lifts it; only authctl may.
            for _ in 0..<5 {
                await expectRPCError(.unauthenticated, "invalid_credentials") {
                    try await fixture.signIn(email: "ghost@example.com")
                }
                clock.advance(seconds: 901)
            }
            await expectRPCError(.permissionDenied, "factor_locked") {
                try await fixture.signIn(email: "ghost@example.com")
            }
            await expectRPCError(.permissionDenied, "caller_not_allowed") {
                _ = try await fixture.client.unlockPassword(.init(email: "ghost@example.com"))
            }
            let unlocked = try await fixture.operatorClient.unlockPassword(.init(email: "Ghost@Example.com"))
            #expect(unlocked.wasLocked)
            await expectRPCError(.unauthenticated, "invalid_credentials") {
                try await fixture.signIn(email: "ghost@example.com")
            }
            let again = try await fixture.operatorClient.unlockPassword(.init(email: "ghost@example.com"))
            #expect(!again.wasLocked)
        }
    }

    /// 50 wrong passwords at once against a limit of 10: each attempt is reserved under a lock
    /// before its hash, so exactly 10 hashes run (10 `invalid_credentials`) and the other 40 are
    /// refused without one. It was a check before hashing and a write after: all 50 passed the
    /// check (issue 19).
    @Test func concurrentWrongPasswordsNeverOvershootTheLockout() async throws {
        try await withIdentityService { fixture in
            _ = try await fixture.signUp()
            let reasons = await withTaskGroup(of: String.self) { group in
                for _ in 0..<50 {
                    group.addTask {
                        do {
                            // Hashes queue on the hashing threads; on a loaded machine the last
                            // ones wait longer than the client's default deadline, which is not
                            // what this test is about.
                            _ = try await fixture.client.signInWithPassword(
                                Auth_Identity_V1_SignInWithPasswordRequest(
                                    email: "asha@example.com",
                                    password: "Wrong-Password-1",
                                    clientIP: "203.0.113.7"
                                ),
                                options: CallOptions(timeout: .seconds(600))
                            )
                            return "success"
                        } catch let error as RPCError {
                            return error.reason
                        } catch {
                            return "\(error)"
                        }
                    }
                }
                var reasons: [String] = []
                for await reason in group { reasons.append(reason) }
                return reasons
            }
            let counts = Dictionary(reasons.map { ($0, 1) }, uniquingKeysWith: +)
            #expect(counts == ["invalid_credentials": 10, "too_many_attempts": 40], "\(counts)")
            let failures = try await fixture.query(
                "SELECT count(*) FROM @password_failures WHERE email_hash = $1",
                [.bytea(SHA256.hash("asha@example.com"))]
            )
            #expect(try failures[0][0].int == 10)
            let audited = try await fixture.query("SELECT count(*) FROM @audit_events WHERE kind = 'sign_in_failed'")
            #expect(try audited[0][0].int == 10)
        }
    }

    @Test func theLockoutHoldsAcrossReplicas() async throws {
        let clock = ManualClock()
        try await withIdentityService(clock: clock) { fixture in
            _ = try await fixture.signUp()
            // A second replica on the same schema.
            let replica = try await IdentityService.start(
                database: fixture.pool,
                configuration: fixture.service.configuration,
                clock: clock,
                logger: testLogger
            )
            let context = ServerContext(
                method: Auth_Identity_V1_Identity.Method.signInWithPassword,
                metadata: RPCMetadata(),
                deadline: nil,
                authenticatedCaller: "gateway",
                peer: "test"
            )
            for _ in 0..<10 {
                await expectRPCError(.unauthenticated, "invalid_credentials") {
                    try await fixture.signIn(password: "Wrong-Password-1")
                }
            }
            do {
                _ = try await replica.signInWithPassword(
                    request: .init(email: "asha@example.com", password: goodPassword),
                    context: context
                )
                Issue.record("the replica let a locked email sign in")
            } catch let error as IdentityError {
                #expect(error.code == .tooManyAttempts)
            }
            await replica.shutdown()
        }
    }

    @Test func anOutdatedHashIsUpgradedAtTheNextSignIn() async throws {
        try await withIdentityService { fixture in
            _ = try await fixture.signUp()
            // Store a hash with weaker parameters, as an older deployment would have.
            let old = try ScryptPasswordHasher(parameters: .init(logN: 9, r: 8, p: 1)).hash(password: goodPassword)
            _ = try await fixture.query("UPDATE @users SET password_hash = $1", [.text(old)])
            _ = try await fixture.signIn()
            let rows = try await fixture.query("SELECT password_hash FROM @users")
            let upgraded = try rows[0][0].string
            #expect(upgraded.hasPrefix("$scrypt$ln=10,r=8,p=1$"))
            _ = try await fixture.signIn()
            let kinds = try await fixture.query("SELECT kind FROM @audit_events ORDER BY id").map { try $0[0].string }
            #expect(kinds == ["sign_up", "password_rehashed", "sign_in", "sign_in"])
        }
    }

    @Test func passwordResetAndChange() async throws {
        try await withIdentityService { fixture in
            let user = try await fixture.signUp()
            let reset = try await fixture.client.resetPassword(
                .init(email: "asha@example.com", newPassword: "Fresh-Start-77")
            )
            #expect(reset.user?.emailVerified == true)
            await expectRPCError(.unauthenticated, "invalid_credentials") { try await fixture.signIn() }
            _ = try await fixture.signIn(password: "Fresh-Start-77")

            await expectRPCError(.unauthenticated, "wrong_password") {
                try await fixture.client.changePassword(
                    .init(userID: user.id, oldPassword: "Not-It-123", newPassword: "Another-One-88")
                )
            }
            let weak = await expectRPCError(.invalidArgument, "invalid_argument") {
                try await fixture.client.changePassword(
                    .init(userID: user.id, oldPassword: "Fresh-Start-77", newPassword: "weak")
                )
            }
            #expect(weak?.fieldViolations.map(\.field) == ["new_password"])
            _ = try await fixture.client.changePassword(
                .init(userID: user.id, oldPassword: "Fresh-Start-77", newPassword: "Another-One-88")
            )
            _ = try await fixture.signIn(password: "Another-One-88")
            await expectRPCError(.notFound, "user_not_found") {
                try await fixture.client.resetPassword(
                    .init(email: "nobody@example.com", newPassword: "Fresh-Start-77")
                )
            }
        }
    }

    @Test func validatePasswordAppliesTheNewPasswordPolicy() async throws {
        try await withIdentityService { fixture in
            _ = try await fixture.client.validatePassword(.init(password: goodPassword))
            // NFKC first: the ligature and full-width digits make an acceptable password.
            _ = try await fixture.client.validatePassword(.init(password: "Con\u{FB01}rm-\u{FF11}\u{FF12}\u{FF13}"))
            let samples: [(String, String)] = [
                ("", "required"),
                ("Aa1" + String(repeating: "x", count: 126), "too_long"),
                ("Ab1defg", "too_short"),
                ("alllowercase1", "too_weak"),
                ("Password1", "too_common"),
            ]
            for (password, reason) in samples {
                let error = await expectRPCError(.invalidArgument, "invalid_argument") {
                    try await fixture.client.validatePassword(.init(password: password))
                }
                let violations = error?.fieldViolations ?? []
                #expect(violations.map(\.field) == ["password"])
                #expect(violations.map(\.reason) == [reason])
                // The policy's own answer, and the one SignUp gives for the same password.
                let expected = fixture.service.policy.violations(of: password)
                #expect(violations.map(\.description) == expected.map(\.description))
                #expect(error?.message == expected.first?.description)
                let signUp = await expectRPCError(.invalidArgument, "invalid_argument") {
                    try await fixture.signUp(password: password)
                }
                #expect(signUp?.fieldViolations == error?.fieldViolations)
            }
            // Nothing is stored or audited; only the gateway may ask.
            let rows = try await fixture.query(
                "SELECT (SELECT count(*) FROM @users) + (SELECT count(*) FROM @audit_events)"
            )
            #expect(try rows[0][0].int == 0)
            await expectRPCError(.permissionDenied, "caller_not_allowed") {
                try await fixture.operatorClient.validatePassword(.init(password: goodPassword))
            }
        }
        // The configured mode applies.
        try await withIdentityService(configure: { $0.passwordPolicyMode = .nist }) { fixture in
            _ = try await fixture.client.validatePassword(.init(password: "alllowercase words"))
            let error = await expectRPCError(.invalidArgument, "invalid_argument") {
                try await fixture.client.validatePassword(.init(password: "1qaz2wsx3edc4rfv"))
            }
            #expect(error?.fieldViolations.map(\.reason) == ["too_common"])
        }
    }

    @Test func changePasswordSharesTheSignInLockout() async throws {
        let clock = ManualClock()
        try await withIdentityService(clock: clock) { fixture in
            let user = try await fixture.signUp()
            func change(old: String) async throws {
                _ = try await fixture.client.changePassword(
                    .init(userID: user.id, oldPassword: old, newPassword: "Another-One-88")
                )
            }
            func failures() async throws -> Int {
                let rows = try await fixture.query(
                    "SELECT count(*) FROM @password_failures WHERE email_hash = $1",
                    [.bytea(SHA256.hash("asha@example.com"))]
                )
                return try rows[0][0].int
            }
            for _ in 0..<10 {
                await expectRPCError(.unauthenticated, "wrong_password") { try await change(old: "Not-It-123") }
                clock.advance(seconds: 30)
            }
            // 300 s after the first failure: locked before the password is verified (the right
            // one too), and for sign-in as well: one count per email.
            let locked = await expectRPCError(.resourceExhausted, "too_many_attempts") {
                try await change(old: goodPassword)
            }
            #expect(locked?.retryAfterSeconds == 600)
            #expect(locked?.message == "Too many failed attempts. Please try again in 10 minutes.")
            await expectRPCError(.resourceExhausted, "too_many_attempts") { try await change(old: "Not-It-123") }
            await expectRPCError(.resourceExhausted, "too_many_attempts") { try await fixture.signIn() }
            #expect(try await failures() == 10)

            // The first failure leaves the window; a failed sign-in fills it again, and locks
            // ChangePassword until the second failure leaves it.
            clock.advance(seconds: 600)
            await expectRPCError(.unauthenticated, "invalid_credentials") {
                try await fixture.signIn(password: "Wrong-Password-1")
            }
            let again = await expectRPCError(.resourceExhausted, "too_many_attempts") {
                try await change(old: goodPassword)
            }
            #expect(again?.retryAfterSeconds == 30)
            clock.advance(seconds: 30)

            // A success clears the failures, as a successful sign-in does.
            try await change(old: goodPassword)
            #expect(try await failures() == 0)
            _ = try await fixture.signIn(password: "Another-One-88")
            let kinds = try await fixture.query("SELECT kind, method FROM @audit_events ORDER BY id").map {
                "\(try $0[0].string)/\(try $0[1].string)"
            }
            #expect(kinds.filter { $0 == "password_change_failed/password" }.count == 10)
            #expect(kinds.suffix(2) == ["password_changed/password", "sign_in/password"])
        }
    }
}
