import AuthAPI
import AuthCrypto
import AuthPostgres
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import Foundation
import Testing

@testable import SessionService

/// Refresh-token rotation over the real PostgreSQL.
@Suite struct RefreshTests {
    @Test func refreshRotatesBothTokens() async throws {
        try await withSessionService { fixture in
            let issued = try await fixture.issue()
            fixture.clock.advance(by: .seconds(60))
            let refreshed = try await fixture.refresh(issued.refreshToken, clientIP: "198.51.100.4")
            #expect(refreshed.refreshToken != issued.refreshToken)
            #expect(refreshed.accessToken != issued.accessToken)
            #expect(refreshed.sessionID == issued.sessionID)
            #expect(refreshed.accessTokenExpiresIn == 900)
            #expect(refreshed.refreshTokenExpiresIn == 7 * 86_400)
            #expect(refreshed.tokenType == "Bearer")

            // Stored: only hashes; the old token used (when, and by what), the new one not.
            let rows = try await fixture.query(
                "SELECT generation, used_at, successor_hash, token_hash FROM @refresh_token_history ORDER BY generation"
            )
            #expect(rows.count == 2)
            #expect(try rows[0][1].date == fixture.clock.now())
            #expect(try rows[0][2].bytes == rows[1][3].bytes)
            #expect(
                try rows[1][3].bytes == SHA256.hash(try #require(RefreshToken(string: refreshed.refreshToken)).bytes)
            )
            #expect(rows[1][1].isNull)
            #expect(rows[1][2].isNull)
            let session = try await fixture.query("SELECT generation, last_client_ip, client_ip FROM @sessions")
            #expect(try session[0][0].int64 == 1)
            #expect(try session[0][1].string == "198.51.100.4")
            #expect(try session[0][2].string == "203.0.113.7")

            // The chain goes on.
            fixture.clock.advance(by: .seconds(3600))
            let third = try await fixture.refresh(refreshed.refreshToken)
            #expect(third.sessionID == issued.sessionID)
            #expect(try await fixture.validate(third.accessToken).claims?.sessionID == issued.sessionID)
        }
    }

    /// A refresh that names the device renames the session (platform and name each only when
    /// given); the user agent stays; an oversized name is refused and changes nothing.
    @Test func aRefreshRenamesTheDevice() async throws {
        try await withSessionService { fixture in
            let issued = try await fixture.issue(platform: "ios")
            func device() async throws -> Auth_Session_V1_Device? {
                try await fixture.client.listSessions(.init(userID: "user-1")).sessions.first?.device
            }
            let before = try #require(try await device())
            let renamed = try #require(
                try await fixture.client.refresh(
                    .init(refreshToken: issued.refreshToken, device: .init(name: "Asha's iPad"))
                ).tokens
            )
            var after = try #require(try await device())
            #expect(after.name == "Asha's iPad")
            #expect(after.platform == "ios")
            #expect(after.userAgent == before.userAgent)

            await expectRPCError(.invalidArgument, "invalid_argument") {
                try await fixture.client.refresh(
                    .init(
                        refreshToken: renamed.refreshToken,
                        device: .init(platform: "android", name: String(repeating: "x", count: 129))
                    )
                )
            }
            let again = try #require(
                try await fixture.client.refresh(
                    .init(refreshToken: renamed.refreshToken, device: .init(platform: "android"))
                ).tokens
            )
            after = try #require(try await device())
            #expect(after.name == "Asha's iPad" && after.platform == "android")
            _ = try await fixture.refresh(again.refreshToken)
            #expect(try await device() == after)
        }
    }

    @Test func noTokenIsStoredInPlaintext() async throws {
        try await withSessionService { fixture in
            let issued = try await fixture.issue()
            let refreshed = try await fixture.refresh(issued.refreshToken)
            let dump = try await fixture.query(
                "SELECT string_agg(t::text, '|') FROM (SELECT * FROM @refresh_tokens) t"
            )
            let text = try dump[0][0].string
            for token in [issued.refreshToken, refreshed.refreshToken] {
                let raw = try #require(RefreshToken(string: token)).bytes
                let hex = raw.map { String(format: "%02x", $0) }.joined()
                #expect(!text.contains(token))
                #expect(!text.contains(hex))
            }
            #expect(!text.contains(refreshed.accessToken))
        }
    }

    /// Two app instances refresh with the same token at the same moment: one successor, and
    /// both get it.
    @Test func concurrentRefreshesGetOneSuccessor() async throws {
        try await withSessionService { fixture in
            var token = try await fixture.issue().refreshToken
            for round in 1...5 {
                let presented = token
                let pairs = try await withThrowingTaskGroup(of: Auth_Session_V1_TokenPair.self) { group in
                    for _ in 0..<6 {
                        group.addTask { try await fixture.refresh(presented) }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(pairs.count == 6)
                #expect(
                    Set(pairs.map(\.refreshToken)).count == 1,
                    "round \(round): \(Set(pairs.map(\.refreshToken)).count) successors"
                )
                #expect(Set(pairs.map(\.accessToken)).count == 1)
                token = pairs[0].refreshToken
                let generation = try await fixture.query("SELECT generation FROM @sessions")[0][0].int64
                #expect(generation == Int64(round))
                let tokens = try await fixture.query("SELECT count(*) FROM @refresh_tokens")[0][0].int
                #expect(tokens == round + 1)
                fixture.clock.advance(by: .seconds(300))
            }
        }
    }

    /// The interleaving that forks a session when refresh is read-then-write: both calls read
    /// generation 0, both try to write generation 1. The compare-and-set lets exactly one win.
    @Test func compareAndSetLetsOneOfTwoRacingRotationsWin() async throws {
        try await withSessionService { fixture in
            let issued = try await fixture.issue()
            let presented = try #require(RefreshToken(string: issued.refreshToken))
            let store = fixture.service.store
            let first = try #require(try await store.refreshState(tokenHash: presented.hash))
            let second = try #require(try await store.refreshState(tokenHash: presented.hash))
            #expect(first == second)
            func write(_ state: RefreshTokenState) -> RotationWrite {
                RotationWrite(
                    sessionID: state.sessionID,
                    fromGeneration: state.tokenGeneration,
                    successorHash: RefreshToken.generate().hash,
                    successorSealed: [0x01],
                    successorExpiresAt: fixture.clock.now().addingTimeInterval(3600),
                    now: fixture.clock.now(),
                    clientIP: ""
                )
            }
            let results = try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask { try await store.rotate(write(first)) }
                group.addTask { try await store.rotate(write(second)) }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.sorted { !$0 && $1 } == [false, true])
            #expect(try await fixture.query("SELECT count(*) FROM @refresh_tokens WHERE generation = 1")[0][0].int == 1)
            // And a stale decision cannot write a second generation 1 later either.
            #expect(try await store.rotate(write(first)) == false)
        }
    }

    /// A refresh whose response was lost: the client retries within the grace window and gets
    /// the same pair, which keeps working.
    @Test func lostResponseRetriedInsideGraceWindowGetsTheSamePair() async throws {
        try await withSessionService { fixture in
            let issued = try await fixture.issue()
            let lost = try await fixture.refresh(issued.refreshToken)
            fixture.clock.advance(by: .seconds(9))
            let retried = try await fixture.refresh(issued.refreshToken)
            #expect(retried.refreshToken == lost.refreshToken)
            #expect(retried.accessToken == lost.accessToken)
            #expect(retried.accessTokenExpiresIn == 900 - 9)
            #expect(retried.refreshTokenExpiresIn == 7 * 86_400 - 9)
            // Served by another replica (a restart in between): the same pair as well.
            let (_, replica) = try await fixture.replica()
            let replicaAnswer = try await replica.refresh(
                Auth_Session_V1_RefreshRequest(refreshToken: issued.refreshToken)
            )
            let fromReplica = try #require(replicaAnswer.tokens)
            #expect(fromReplica.refreshToken == lost.refreshToken)
            #expect(replicaAnswer.userID == "user-1")  // the successor's user, as for a rotation
            // Not a branch: one successor stored, and it rotates normally.
            #expect(try await fixture.query("SELECT count(*) FROM @refresh_tokens")[0][0].int == 2)
            let rotated = try await fixture.client.refresh(
                Auth_Session_V1_RefreshRequest(refreshToken: retried.refreshToken)
            )
            #expect(rotated.tokens?.sessionID == issued.sessionID)
            // The user comes with the pair: a caller need not verify the new token to learn it.
            #expect(rotated.userID == "user-1")
        }
    }

    /// A used token presented after the grace window is a stolen token: the session is
    /// revoked, a security event is recorded, and every token of the session stops working.
    @Test func reuseAfterGraceWindowRevokesTheSession() async throws {
        try await withSessionService { fixture in
            let issued = try await fixture.issue()
            let successor = try await fixture.refresh(issued.refreshToken)
            fixture.clock.advance(by: .seconds(11))
            await expectRPCError(.unauthenticated, "refresh_token_reused") {
                try await fixture.refresh(issued.refreshToken, clientIP: "192.0.2.66")
            }
            // Later refreshes of any token of the session fail.
            await expectRPCError(.unauthenticated, "session_revoked") {
                try await fixture.refresh(successor.refreshToken)
            }
            await expectRPCError(.unauthenticated, "session_revoked") { try await fixture.refresh(issued.refreshToken) }
            let session = try await fixture.query("SELECT revoke_reason FROM @sessions")
            #expect(try session[0][0].string == "refresh_token_reused")
            let events = try await fixture.query(
                """
                SELECT kind, user_id, client_ip, session_id::text, (details->>'token_generation')::int
                FROM @security_events WHERE kind = 'refresh_token_reused'
                """
            )
            #expect(events.count == 1)
            #expect(try events[0][0].string == "refresh_token_reused")
            #expect(try events[0][1].string == "user-1")
            #expect(try events[0][2].string == "192.0.2.66")
            #expect(try events[0][3].string == successor.sessionID)
            #expect(try events[0][4].int == 0)
            // The access token still verifies until it expires, but not as a live session.
            let validated = try await fixture.validate(successor.accessToken, checkSession: true)
            #expect(validated.sessionLive == false)
        }
    }

    @Test func olderTokenIsReuseEvenInsideTheGraceWindow() async throws {
        try await withSessionService { fixture in
            let first = try await fixture.issue()
            let second = try await fixture.refresh(first.refreshToken)
            _ = try await fixture.refresh(second.refreshToken)
            // `first`'s successor has been used: the chain moved on, so this is a replay.
            await expectRPCError(.unauthenticated, "refresh_token_reused") {
                try await fixture.refresh(first.refreshToken)
            }
        }
    }

    @Test func refreshTokenExpiresSevenDaysAfterIssue() async throws {
        try await withSessionService { fixture in
            let issued = try await fixture.issue()
            #expect(issued.refreshTokenExpiresIn == 7 * 86_400)
            fixture.clock.advance(by: .seconds(7 * 86_400 - 1))
            let refreshed = try await fixture.refresh(issued.refreshToken)
            fixture.clock.advance(by: .seconds(7 * 86_400))
            await expectRPCError(.unauthenticated, "session_expired") {
                try await fixture.refresh(refreshed.refreshToken)
            }
            // An idle session (its refresh token expired) is not live any more.
            #expect(try await fixture.client.listSessions(.init(userID: "user-1")).sessions.isEmpty)
        }
    }

    @Test func sessionEndsAtItsAbsoluteExpiry() async throws {
        try await withSessionService { fixture in
            let issued = try await fixture.issue()
            var token = issued.refreshToken
            for day in stride(from: 6, through: 24, by: 6) {
                fixture.clock.advance(by: .seconds(6 * 86_400))
                let refreshed = try await fixture.refresh(token)
                // Never past the session's end: on day 24 only 6 days are left.
                #expect(refreshed.refreshTokenExpiresIn == UInt32(min(7, 30 - day) * 86_400), "day \(day)")
                token = refreshed.refreshToken
            }
            fixture.clock.advance(by: .seconds(6 * 86_400 - 1))
            token = try await fixture.refresh(token).refreshToken
            fixture.clock.advance(by: .seconds(1))
            await expectRPCError(.unauthenticated, "session_expired") { try await fixture.refresh(token) }
        }
    }

    @Test func unknownAndMalformedTokens() async throws {
        try await withSessionService { fixture in
            _ = try await fixture.issue()
            await expectRPCError(.unauthenticated, "invalid_refresh_token") {
                try await fixture.refresh(RefreshToken.generate().string)
            }
            await expectRPCError(.unauthenticated, "invalid_refresh_token") { try await fixture.refresh("not-a-token") }
            await expectRPCError(.unauthenticated, "invalid_refresh_token") {
                try await fixture.refresh(String(repeating: "A", count: 10_000))
            }
            await expectRPCError(.invalidArgument, "invalid_argument") { try await fixture.refresh("") }
            await expectRPCError(.invalidArgument, "invalid_argument") {
                try await fixture.refresh(RefreshToken.generate().string, clientIP: "not-an-ip")
            }
        }
    }

    @Test func refreshOfARevokedSessionFails() async throws {
        try await withSessionService { fixture in
            let issued = try await fixture.issue()
            let revoked = try await fixture.client.revoke(.init(sessionID: issued.sessionID, reason: "logout"))
            #expect(revoked.revoked)
            await expectRPCError(.unauthenticated, "session_revoked") { try await fixture.refresh(issued.refreshToken) }
        }
    }

    /// A refresh racing a revoke: whichever wins, the session ends revoked and no token
    /// issued by the refresh keeps it alive.
    @Test func refreshRacingRevokeNeverOutlivesTheRevoke() async throws {
        try await withSessionService { fixture in
            for _ in 0..<10 {
                let issued = try await fixture.issue()
                async let refreshed: Result<Auth_Session_V1_TokenPair, any Error> = {
                    do { return .success(try await fixture.refresh(issued.refreshToken)) } catch {
                        return .failure(error)
                    }
                }()
                async let revoked = fixture.client.revoke(.init(sessionID: issued.sessionID, reason: "logout"))
                let (refreshResult, revokeResult) = (await refreshed, try await revoked)
                #expect(revokeResult.revoked)
                switch refreshResult {
                case .success(let pair):
                    await expectRPCError(.unauthenticated, "session_revoked") {
                        try await fixture.refresh(pair.refreshToken)
                    }
                case .failure(let error):
                    #expect((error as? RPCError)?.reason == "session_revoked")
                }
                await expectRPCError(.unauthenticated, "session_revoked") {
                    try await fixture.refresh(issued.refreshToken)
                }
            }
        }
    }

    /// The interleaving behind a refresh racing a revoke, made deterministic: the refresh read
    /// the session before the revoke and writes after it. The write must not happen.
    @Test func revokeBetweenReadAndWriteStopsTheRotation() async throws {
        try await withSessionService { fixture in
            let issued = try await fixture.issue()
            let presented = try #require(RefreshToken(string: issued.refreshToken))
            let store = fixture.service.store
            let state = try #require(try await store.refreshState(tokenHash: presented.hash))
            _ = try await fixture.client.revoke(.init(sessionID: issued.sessionID, reason: "logout"))
            let wrote = try await store.rotate(
                RotationWrite(
                    sessionID: state.sessionID,
                    fromGeneration: state.tokenGeneration,
                    successorHash: RefreshToken.generate().hash,
                    successorSealed: [0x01],
                    successorExpiresAt: fixture.clock.now().addingTimeInterval(3600),
                    now: fixture.clock.now(),
                    clientIP: ""
                )
            )
            #expect(wrote == false)
            #expect(try await fixture.query("SELECT count(*) FROM @refresh_tokens")[0][0].int == 1)
        }
    }

    @Test func clientIPFallsBackToTheEndUserIPInMetadata() async throws {
        try await withSessionService { fixture in
            let response = try await fixture.client.issue(
                Auth_Session_V1_IssueRequest(userID: "user-9", amr: ["pwd"]),
                options: CallOptions(metadata: RPCMetadata(endUserIP: "2001:db8::1"))
            )
            let sessionID = try #require(response.tokens?.sessionID)
            let listed = try await fixture.client.listSessions(.init(userID: "user-9"))
            #expect(listed.sessions.map(\.sessionID) == [sessionID])
            #expect(listed.sessions.first?.clientIP == "2001:db8::1")
        }
    }
}
