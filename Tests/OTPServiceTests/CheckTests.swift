import AuthAPI
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import Foundation
import Testing

@testable import OTPService

@Suite struct CheckTests {
    @Test func aRightCodeSucceedsOnceAndReturnsTheDestination() async throws {
        try await withOTPService { otp in
            let started = try await otp.start("+919999912345", purpose: .signup)
            let code = try await otp.queuedCode(started.verificationID)
            #expect(code.count == 6 && code.allSatisfy(\.isNumber))
            let checked = try await otp.check(started.verificationID, code)
            #expect(checked.destination == "+919999912345")
            #expect(checked.channel == .sms)
            #expect(checked.purpose == .signup)
            // A code never works twice.
            await expectRPCError(.notFound, "verification_not_found") {
                try await otp.check(started.verificationID, code)
            }
        }
    }

    /// A caller that names the purposes it accepts: a verification of another purpose is not
    /// found, and stays as it was (not consumed, no wrong attempt counted, even for a wrong code).
    @Test func aVerificationOfAnotherPurposeIsNotFoundAndLeftUntouched() async throws {
        try await withOTPService { otp in
            let started = try await otp.start("reset@example.com", purpose: .passwordReset)
            let code = try await otp.queuedCode(started.verificationID)
            for presented in [code, "000000"] {
                await expectRPCError(.notFound, "verification_not_found") {
                    try await otp.client.check(
                        .init(
                            verificationID: started.verificationID,
                            code: presented,
                            acceptedPurposes: [.login, .signup, .verify]
                        )
                    )
                }
            }
            let wrong = try await otp.query("SELECT count(*) FROM @limit_events WHERE kind = 'wrong_code'")
            #expect(try wrong[0][0].int == 0)
            let checked = try await otp.client.check(
                .init(verificationID: started.verificationID, code: code, acceptedPurposes: [.passwordReset])
            )
            #expect(checked.purpose == .passwordReset)
        }
    }

    @Test func anUnknownAcceptedPurposeIsRefused() async throws {
        try await withOTPService { otp in
            let started = try await otp.start("asha@example.com")
            let refused = await #expect(throws: RPCError.self) {
                try await otp.client.check(
                    .init(
                        verificationID: started.verificationID,
                        code: "123456",
                        acceptedPurposes: [.login, .unspecified]
                    )
                )
            }
            #expect(refused?.code == .invalidArgument)
            #expect(refused?.fieldViolations.map(\.field) == ["accepted_purposes[1]"])
        }
    }

    @Test func theCodeIsStoredOnlyAsAnHMACBoundToTheVerification() async throws {
        try await withOTPService { otp in
            let started = try await otp.start("asha@example.com")
            let code = try await otp.queuedCode(started.verificationID)
            let id = try #require(UUID(uuidString: started.verificationID))
            let rows = try await otp.query("SELECT code_mac FROM @verifications WHERE id = $1", [.uuid(id)])
            let stored = try rows[0][0].bytes
            #expect(stored == CodeMAC(secret: otp.configuration.secret).mac(verificationID: id, code: code))
            #expect(stored != CodeMAC(secret: otp.configuration.secret).mac(verificationID: UUID(), code: code))
            #expect(stored != CodeMAC(secret: Array(repeating: 1, count: 32)).mac(verificationID: id, code: code))
            // No column of the verification holds the code in clear.
            let text = try await otp.query(
                "SELECT row_to_json(v)::text FROM @verifications v WHERE id = $1",
                [.uuid(id)]
            )
            #expect(!(try text[0][0].string).contains(code))
        }
    }

    @Test func wrongCodesCountDownThenLockTheDestination() async throws {
        try await withOTPService { otp in
            let started = try await otp.start("+919999900001")
            #expect(started.attemptsRemaining == 5)
            let wrong = try await otp.wrongCode(for: started.verificationID)
            for expected in [4, 3, 2, 1, 0] as [UInt32] {
                let error = await expectRPCError(.unauthenticated, "invalid_code") {
                    try await otp.check(started.verificationID, wrong)
                }
                #expect(error?.attemptsRemaining == expected)
            }
            let right = try await otp.queuedCode(started.verificationID)
            // Locked: even the right code is refused, with the time left.
            let locked = await expectRPCError(.resourceExhausted, "too_many_attempts") {
                try await otp.check(started.verificationID, right)
            }
            #expect(locked?.retryAfterSeconds == 900)
            otp.clock.advance(seconds: 300)
            let startRefused = await expectRPCError(.resourceExhausted, "too_many_attempts") {
                try await otp.start("+919999900001")
            }
            #expect(startRefused?.retryAfterSeconds == 600)
            // After the lock the killed verification is gone; a new start works with a fresh count.
            otp.clock.advance(seconds: 600)
            await expectRPCError(.notFound, "verification_not_found") {
                try await otp.check(started.verificationID, right)
            }
            let again = try await otp.start("+919999900001")
            #expect(again.attemptsRemaining == 5)
        }
    }

    @Test func wrongCodesCountPerDestinationAcrossVerifications() async throws {
        try await withOTPService { otp in
            let first = try await otp.start("asha@example.com")
            let wrong = try await otp.wrongCode(for: first.verificationID)
            for _ in 0..<3 {
                await expectRPCError(.unauthenticated, "invalid_code") {
                    try await otp.check(first.verificationID, wrong)
                }
            }
            // A new flow does not reset the count.
            otp.clock.advance(seconds: 61)
            let second = try await otp.start("ASHA@example.com")
            #expect(second.attemptsRemaining == 2)
            let wrong2 = try await otp.wrongCode(for: second.verificationID)
            let error = await expectRPCError(.unauthenticated, "invalid_code") {
                try await otp.check(second.verificationID, wrong2)
            }
            #expect(error?.attemptsRemaining == 1)
            // The window slides: 15 minutes after the first three wrong codes they no longer count
            // (the fourth, 61 s later, still does).
            otp.clock.advance(seconds: 899)
            let third = try await otp.start("asha@example.com")
            #expect(third.attemptsRemaining == 4)
        }
    }

    @Test func anExpiredCodeIsRefused() async throws {
        try await withOTPService { otp in
            let started = try await otp.start("+447700900123")
            #expect(started.expiresIn == 600)
            let code = try await otp.queuedCode(started.verificationID)
            otp.clock.advance(seconds: 600)
            await expectRPCError(.failedPrecondition, "code_expired") {
                try await otp.check(started.verificationID, code)
            }
        }
    }

    @Test func unknownAndMalformedIDs() async throws {
        try await withOTPService { otp in
            await expectRPCError(.notFound, "verification_not_found") {
                try await otp.check(UUID().uuidString.lowercased(), "123456")
            }
            let error = await expectRPCError(.invalidArgument, "invalid_argument") { try await otp.check("nope", "") }
            #expect(Set(error?.fieldViolations.map(\.field) ?? []) == ["verification_id", "code"])
        }
    }

    /// 100 concurrent wrong checks of one verification: exactly 5 `invalid_code` with
    /// attempts_remaining 4, 3, 2, 1, 0 once each, and 95 `too_many_attempts`.
    @Test func concurrentWrongChecksNeverOvershootTheLimit() async throws {
        try await withOTPService(maxConnections: 16) { otp in
            let started = try await otp.start("+919999900002")
            let wrong = try await otp.wrongCode(for: started.verificationID)
            let outcomes = await withTaskGroup(of: RPCError?.self) { group in
                for _ in 0..<100 {
                    group.addTask {
                        do {
                            // 100 checks of one verification queue on its row lock; on a loaded
                            // machine the last ones wait longer than the client's default 10 s
                            // deadline, which is not what this test is about.
                            _ = try await otp.check(started.verificationID, wrong, timeout: .seconds(600))
                            return nil
                        } catch let error as RPCError {
                            return error
                        } catch {
                            return RPCError(code: .unknown, message: "\(error)")
                        }
                    }
                }
                var all: [RPCError?] = []
                for await outcome in group { all.append(outcome) }
                return all
            }
            let invalid = outcomes.compactMap { $0 }.filter { $0.reason == "invalid_code" }
            let locked = outcomes.compactMap { $0 }.filter { $0.reason == "too_many_attempts" }
            // Says what else came back, so that a failure explains itself.
            let unexpected = outcomes.filter { $0?.reason != "invalid_code" && $0?.reason != "too_many_attempts" }
                .map { $0.map { "\($0.code) \($0.reason): \($0.message)" } ?? "success" }
            #expect(unexpected.isEmpty, "outcomes other than invalid_code and too_many_attempts: \(unexpected)")
            #expect(invalid.count == 5)
            #expect(invalid.compactMap(\.attemptsRemaining).sorted() == [0, 1, 2, 3, 4])
            #expect(locked.count == 95)
            #expect(locked.allSatisfy { ($0.retryAfterSeconds ?? 0) > 0 })
        }
    }

    @Test func twoConcurrentRightChecksSucceedOnce() async throws {
        try await withOTPService { otp in
            for round in 0..<10 {
                let started = try await otp.start("user\(round)@example.com")
                let code = try await otp.queuedCode(started.verificationID)
                async let first = outcome { try await otp.check(started.verificationID, code) }
                async let second = outcome { try await otp.check(started.verificationID, code) }
                let results = await [first, second]
                let successes = results.filter { if case .success = $0 { true } else { false } }
                #expect(successes.count == 1)
                for case .failure(let error) in results {
                    #expect((error as? RPCError)?.reason == "verification_not_found")
                }
            }
        }
    }
}

func outcome<T: Sendable>(_ body: @Sendable () async throws -> T) async -> Result<T, any Error> {
    do {
        return .success(try await body())
    } catch {
        return .failure(error)
    }
}

/// Issue 19, item 6: the window alone (5 wrong codes per 15 minutes, then a 15-minute lock) let a
/// patient guesser try about 480 codes a day per phone. After `maxConsecutiveFailures` wrong
/// codes since the last right one the destination answers `factor_locked` across windows,
/// until an operator unlocks it.
@Suite struct ConsecutiveFailureTests {
    @Test func consecutiveWrongCodesLockTheDestinationUntilAnOperatorUnlocksIt() async throws {
        try await withOTPService(configure: {
            $0.maxWrongCodes = 3
            $0.maxConsecutiveFailures = 5
        }) { otp in
            let phone = "+919999900077"
            // Three wrong codes lock the destination for the window; after it, two more make five.
            let first = try await otp.start(phone)
            let wrong = try await otp.wrongCode(for: first.verificationID)
            for _ in 0..<3 {
                await expectRPCError(.unauthenticated, "invalid_code") {
                    try await otp.check(first.verificationID, wrong)
                }
            }
            otp.clock.advance(seconds: 901)
            let second = try await otp.start(phone)
            let wrongAgain = try await otp.wrongCode(for: second.verificationID)
            for _ in 0..<2 {
                await expectRPCError(.unauthenticated, "invalid_code") {
                    try await otp.check(second.verificationID, wrongAgain)
                }
            }
            // Locked: the right code, a resend and a new start are all refused, a week later too.
            let right = try await otp.queuedCode(second.verificationID)
            await expectRPCError(.permissionDenied, "factor_locked") {
                try await otp.check(second.verificationID, right)
            }
            otp.clock.advance(seconds: 7 * 86_400)
            await expectRPCError(.permissionDenied, "factor_locked") { try await otp.resend(second.verificationID) }
            await expectRPCError(.permissionDenied, "factor_locked") { try await otp.start(phone) }
            // Only an operator unlocks it.
            let gateway = otp.client
            await expectRPCError(.permissionDenied, "caller_not_allowed") {
                try await gateway.unlockDestination(.init(destination: phone))
            }
            let operatorClient = makeClient(otp.service, caller: "authctl")
            let unlocked = try await operatorClient.unlockDestination(.init(destination: "+919999900077"))
            #expect(unlocked.wasLocked)
            let third = try await otp.start(phone)
            #expect(third.attemptsRemaining == 3)
            _ = try await otp.check(third.verificationID, try await otp.queuedCode(third.verificationID))
            let invalid = await expectRPCError(.invalidArgument, "invalid_argument") {
                try await operatorClient.unlockDestination(.init(destination: "not a destination"))
            }
            #expect(invalid?.fieldViolations.map(\.field) == ["destination"])
        }
    }

    @Test func aRightCodeStartsTheCountAgain() async throws {
        try await withOTPService(configure: {
            $0.maxWrongCodes = 3
            $0.maxConsecutiveFailures = 3
        }) { otp in
            let phone = "+919999900078"
            for _ in 0..<3 {
                let started = try await otp.start(phone)
                let wrong = try await otp.wrongCode(for: started.verificationID)
                for _ in 0..<2 {
                    await expectRPCError(.unauthenticated, "invalid_code") {
                        try await otp.check(started.verificationID, wrong)
                    }
                }
                _ = try await otp.check(started.verificationID, try await otp.queuedCode(started.verificationID))
                otp.clock.advance(seconds: 901)
            }
            let rows = try await otp.query("SELECT count(*) FROM @consecutive_failures")
            #expect(try rows[0][0].int == 0)
        }
    }
}
