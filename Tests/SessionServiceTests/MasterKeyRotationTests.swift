import AuthAPI
import AuthConfiguration
import AuthRPC
import AuthTestSupport
import Foundation
import Testing

@testable import SessionService

/// Rotating AUTH_MASTER_KEY without downtime: replicas with the new key and the old one as
/// AUTH_MASTER_KEY_PREVIOUS serve beside replicas with the old key only; RewrapSigningKeys
/// moves the stored keys; then the old key can go.
@Suite struct MasterKeyRotationTests {
    @Test func rotationWithoutDowntime() async throws {
        try await withSessionService { fixture in
            let old = fixture.configuration.masterKey
            let new = MasterKey.random()
            let before = try await fixture.issue(userID: "asha")
            let refreshed = try await fixture.refresh(before.refreshToken)  // sealed under `old`

            // Before the rewrap, a replica with only the new key cannot start…
            var newOnly = fixture.configuration
            newOnly.masterKey = new
            await #expect(throws: ConfigurationError.self) {
                try await SessionService.start(
                    database: fixture.pool,
                    configuration: newOnly,
                    clock: fixture.clock,
                    logger: testLogger
                )
            }

            // …one with the new key and the old one as previous can.
            var both = newOnly
            both.previousMasterKey = old
            let bridging = try await SessionService.start(
                database: fixture.pool,
                configuration: both,
                clock: fixture.clock,
                logger: testLogger
            )
            let bridgingClient = makeClient(bridging, caller: "gateway")
            _ = try await bridgingClient.validate(.init(accessToken: before.accessToken))
            // A grace-window retry of a refresh the old replica answered opens its sealed pair.
            let retried = try #require(
                try await bridgingClient.refresh(.init(refreshToken: before.refreshToken)).tokens
            )
            #expect(retried.refreshToken == refreshed.refreshToken)
            // It signs; the old replica verifies what it signed and vice versa.
            let fromBridging = try #require(try await bridgingClient.issue(.init(userID: "ravi", amr: ["pwd"])).tokens)
            _ = try await fixture.validate(fromBridging.accessToken)

            // A key created now (a rotation) is wrapped under the new master key.
            let rotation = try await makeClient(bridging, caller: "authctl").rotateSigningKey(.init())

            // Only authctl may rewrap.
            await expectRPCError(.permissionDenied, "caller_not_allowed") {
                try await bridgingClient.rewrapSigningKeys(.init())
            }
            let rewrap = try await makeClient(bridging, caller: "authctl").rewrapSigningKeys(.init())
            #expect(rewrap.rewrapped == 1)
            #expect(rewrap.alreadyCurrent == 1)
            let again = try await makeClient(bridging, caller: "authctl").rewrapSigningKeys(.init())
            #expect(again.rewrapped == 0)
            #expect(again.alreadyCurrent == 2)
            let event = try await fixture.query(
                "SELECT count(*) FROM @security_events WHERE kind = 'signing_keys_rewrapped'"
            )
            #expect(try event[0][0].int == 2)

            // Now a replica with only the new key starts and verifies and signs with both keys.
            let rotated = try await SessionService.start(
                database: fixture.pool,
                configuration: newOnly,
                clock: fixture.clock,
                logger: testLogger
            )
            let rotatedClient = makeClient(rotated, caller: "gateway")
            _ = try await rotatedClient.validate(.init(accessToken: before.accessToken))
            _ = try await rotatedClient.validate(.init(accessToken: fromBridging.accessToken))
            _ = try await rotatedClient.refresh(.init(refreshToken: refreshed.refreshToken))
            fixture.clock.advance(by: .seconds(600))
            let signedByNewKey = try #require(try await rotatedClient.issue(.init(userID: "u", amr: ["pwd"])).tokens)
            #expect(try kid(of: signedByNewKey.accessToken) == rotation.newKeyID)

            // The old key alone no longer opens the stored keys.
            await #expect(throws: ConfigurationError.self) {
                try await SessionService.start(
                    database: fixture.pool,
                    configuration: fixture.configuration,
                    clock: fixture.clock,
                    logger: testLogger
                )
            }
        }
    }

    /// Keys the current master key opens are left as they are; a start whose keys open the
    /// stored keys with neither is refused.
    @Test func rewrapLeavesCurrentKeysAlone() async throws {
        try await withSessionService { fixture in
            var wrong = fixture.configuration
            wrong.previousMasterKey = .random()
            let service = try await SessionService.start(
                database: fixture.pool,
                configuration: wrong,
                clock: fixture.clock,
                logger: testLogger
            )
            let stored = try await fixture.query("SELECT private_key_sealed FROM @signing_keys")[0][0].bytes
            // The current key opens every stored key: nothing to move.
            let result = try await makeClient(service, caller: "authctl").rewrapSigningKeys(.init())
            #expect(result.rewrapped == 0 && result.alreadyCurrent == 1)
            #expect(try await fixture.query("SELECT private_key_sealed FROM @signing_keys")[0][0].bytes == stored)

            // With a current key that opens nothing (and a previous one that does not either),
            // start-up refuses.
            var neither = fixture.configuration
            neither.masterKey = .random()
            neither.previousMasterKey = .random()
            await #expect(throws: ConfigurationError.self) {
                try await SessionService.start(
                    database: fixture.pool,
                    configuration: neither,
                    clock: fixture.clock,
                    logger: testLogger
                )
            }
        }
    }

    /// A stored key that opens with neither master key stops the rewrap; nothing is changed.
    @Test func rewrapRefusesAKeyItCannotOpen() async throws {
        try await withSessionService { fixture in
            _ = try await fixture.operatorClient.rotateSigningKey(.init())
            let before = try await fixture.query("SELECT kid, private_key_sealed FROM @signing_keys ORDER BY kid")
                .map { [try $0[0].string, Data(try $0[1].bytes).base64EncodedString()] }
            var strangers = fixture.configuration
            strangers.masterKey = .random()
            strangers.previousMasterKey = .random()
            let store = SigningKeyStore(
                pool: fixture.pool,
                configuration: strangers,
                clock: fixture.clock,
                logger: testLogger
            )
            await #expect {
                try await store.rewrap(caller: "authctl")
            } throws: { error in
                (error as? SessionError)?.code == .internal
            }
            let after = try await fixture.query("SELECT kid, private_key_sealed FROM @signing_keys ORDER BY kid")
                .map { [try $0[0].string, Data(try $0[1].bytes).base64EncodedString()] }
            #expect(after == before)
            let events = try await fixture.query(
                "SELECT count(*) FROM @security_events WHERE kind = 'signing_keys_rewrapped'"
            )
            #expect(try events[0][0].int == 0)
        }
    }
}
