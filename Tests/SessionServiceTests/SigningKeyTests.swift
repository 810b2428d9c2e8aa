import AuthAPI
import AuthConfiguration
import AuthCrypto
import AuthPostgres
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import AuthTime
import Foundation
import Testing

@testable import SessionService

@Suite struct SigningKeyTests {
    func jwksKids(_ client: Auth_Session_V1_Session.Client) async throws -> [String] {
        let json = try await client.getJWKS(.init()).jwksJson
        return try JSONDecoder().decode(JWKSet.self, from: Data(json.utf8)).keys.compactMap(\.kid)
    }

    @Test func firstStartCreatesOneKeyAndPublishesIt() async throws {
        try await withSessionService { fixture in
            let json = try await fixture.client.getJWKS(.init()).jwksJson
            let set = try JSONDecoder().decode(JWKSet.self, from: Data(json.utf8))
            #expect(set.keys.count == 1)
            let jwk = try #require(set.keys.first)
            #expect(jwk.kty == "EC")
            #expect(jwk.crv == "P-256")
            #expect(jwk.alg == "ES256")
            #expect(jwk.use == "sig")
            #expect(!json.contains(#""d""#))
            _ = try ES256PublicKey(jwk: jwk)
            let pair = try await fixture.issue()
            #expect(try kid(of: pair.accessToken) == jwk.kid)
            // The private key is stored wrapped: the raw scalar is not in the row.
            let key = try #require(try await fixture.service.keys.current().signingKey(at: fixture.clock.now()))
            let sealed = try await fixture.query("SELECT private_key_sealed FROM @signing_keys")[0][0].bytes
            #expect(!Data(sealed).contains(Data(try key.privateKey.rawRepresentation)))
            #expect(sealed.count == 12 + 32 + 16)
        }
    }

    /// A key created at an instant that `timestamptz` would round up still signs at that instant.
    @Test func aKeySignsAtTheInstantItWasCreated() async throws {
        try await withSessionService(clock: ManualClock(Date(timeIntervalSince1970: 1_780_272_000.999_999_7))) {
            fixture in
            let pair = try await fixture.issue()
            _ = try await fixture.validate(pair.accessToken)
            let rotation = try await fixture.operatorClient.rotateSigningKey(.init())
            fixture.clock.advance(seconds: 600)
            #expect(try kid(of: try await fixture.issue().accessToken) == rotation.newKeyID)
        }
    }

    /// Several replicas starting together on an empty schema create exactly one key.
    @Test func concurrentFirstStartsCreateOneKey() async throws {
        try await PostgresTestDatabase.withTestSchema(maxConnections: 8, logger: testLogger) { pool, schema in
            var configuration = SessionServiceConfiguration(masterKey: .random())
            configuration.schema = schema
            let shared = configuration
            let clock = ManualClock()
            let services = try await withThrowingTaskGroup(of: SessionService.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        try await SessionService.start(
                            database: pool,
                            configuration: shared,
                            clock: clock,
                            logger: testLogger
                        )
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(try await pool.query("SELECT count(*) FROM \(identifier: schema).signing_keys")[0][0].int == 1)
            var kids = Set<String>()
            for service in services {
                kids.insert(try #require(try await service.keys.current().signingKey(at: clock.now())).kid)
            }
            #expect(kids.count == 1)
        }
    }

    @Test func theUniqueIndexRefusesASecondOpenKey() async throws {
        try await withSessionService { fixture in
            let error = await #expect(throws: PostgresError.self) {
                try await fixture.query(
                    """
                    INSERT INTO @signing_keys (kid, algorithm, private_key_sealed, public_jwk, created_at, signs_from)
                    VALUES ('second', 'ES256', '\\x00', '{}', now(), now())
                    """
                )
            }
            #expect(error?.code == .uniqueViolation)
        }
    }

    @Test func aDifferentMasterKeyRefusesToStart() async throws {
        try await withSessionService { fixture in
            var other = fixture.configuration
            other.masterKey = .random()
            await #expect(throws: ConfigurationError.self) {
                try await SessionService.start(
                    database: fixture.pool,
                    configuration: other,
                    clock: fixture.clock,
                    logger: testLogger
                )
            }
        }
    }

    @Test func onlyAuthctlMayRotate() async throws {
        try await withSessionService { fixture in
            await expectRPCError(.permissionDenied, "caller_not_allowed") {
                try await fixture.client.rotateSigningKey(.init())
            }
            let keys = try await fixture.query("SELECT count(*) FROM @signing_keys")[0][0].int
            #expect(keys == 1)
        }
    }

    /// The whole rotation: the new key is published at once but signs only after the publish
    /// delay; tokens signed before and after the switch both verify until the old key retires
    /// (every token it signed has expired); then the old key is gone from the JWKS and its
    /// tokens fail as an unknown kid. A second replica agrees throughout.
    @Test func rotationPublishesFirstSignsLaterAndRetiresTheOldKeyLast() async throws {
        try await withSessionService { fixture in
            let clock = fixture.clock
            let (_, replica) = try await fixture.replica()
            let t0 = clock.now()
            let before = try await fixture.issue()
            let oldKid = try kid(of: before.accessToken)

            let rotation = try await fixture.operatorClient.rotateSigningKey(.init())
            let newKid = rotation.newKeyID
            #expect(newKid != oldKid)
            #expect(rotation.retiringKeyIds == [oldKid])
            #expect(rotation.signsFrom == t0.unixSeconds + 600)
            // Published at once (the rotating replica re-reads immediately; others within the
            // cache lifetime), but not signing yet.
            #expect(Set(try await jwksKids(fixture.client)) == [oldKid, newKid])
            clock.advance(by: .seconds(6))
            #expect(Set(try await jwksKids(replica)) == [oldKid, newKid])

            clock.advance(by: .seconds(5 * 60 - 6))  // t0 + 5 min
            let beforeSwitch = try await fixture.issue()
            #expect(try kid(of: beforeSwitch.accessToken) == oldKid)
            let refreshedBeforeSwitch = try await fixture.refresh(before.refreshToken)
            #expect(try kid(of: refreshedBeforeSwitch.accessToken) == oldKid)

            clock.advance(by: .seconds(5 * 60))  // t0 + 10 min: the new key signs, on every replica
            let afterSwitch = try await fixture.issue()
            #expect(try kid(of: afterSwitch.accessToken) == newKid)
            let fromReplica = try #require(try await replica.issue(.init(userID: "u2", amr: ["pwd"])).tokens)
            #expect(try kid(of: fromReplica.accessToken) == newKid)

            clock.advance(by: .seconds(2 * 60))  // t0 + 12 min: old and new tokens all verify
            for token in [
                before.accessToken, beforeSwitch.accessToken, refreshedBeforeSwitch.accessToken,
                afterSwitch.accessToken,
            ] {
                _ = try await fixture.validate(token)
                _ = try await replica.validate(.init(accessToken: token))
            }

            // The old key stays published until its last token (signed just before t0 + 10 min,
            // expiring at t0 + 25 min) is past exp + clock-skew tolerance.
            let retireAt = t0.addingTimeInterval(600 + 900 + 30)
            clock.advance(by: .seconds(retireAt.timeIntervalSince(clock.now()) - 1))
            #expect(Set(try await jwksKids(fixture.client)) == [oldKid, newKid])
            clock.advance(by: .seconds(1))
            #expect(try await jwksKids(fixture.client) == [newKid])
            await expectRPCError(.unauthenticated, "unknown_signing_key") {
                try await fixture.validate(beforeSwitch.accessToken)
            }
            await expectRPCError(.unauthenticated, "unknown_signing_key") {
                try await replica.validate(.init(accessToken: beforeSwitch.accessToken))
            }
            let later = try await fixture.issue()
            #expect(try kid(of: later.accessToken) == newKid)
            _ = try await fixture.validate(later.accessToken)

            // The next rotation deletes the retired key's row (its wrapped private key with it).
            let next = try await fixture.operatorClient.rotateSigningKey(.init())
            #expect(next.retiringKeyIds == [newKid])
            let kids = try await fixture.query("SELECT kid FROM @signing_keys").map { try $0[0].string }
            #expect(Set(kids) == [newKid, next.newKeyID])
        }
    }

    @Test func rotatingTwiceWithinTheDelayKeepsStartsInOrder() async throws {
        try await withSessionService { fixture in
            let original = try kid(of: try await fixture.issue().accessToken)
            let first = try await fixture.operatorClient.rotateSigningKey(.init())
            fixture.clock.advance(by: .seconds(60))
            let second = try await fixture.operatorClient.rotateSigningKey(.init())
            #expect(second.retiringKeyIds == [first.newKeyID])
            #expect(second.signsFrom == first.signsFrom + 60)
            #expect(Set(try await jwksKids(fixture.client)) == [original, first.newKeyID, second.newKeyID])
            fixture.clock.advance(by: .seconds(540))  // first.signsFrom
            #expect(try kid(of: try await fixture.issue().accessToken) == first.newKeyID)
            fixture.clock.advance(by: .seconds(60))  // second.signsFrom
            #expect(try kid(of: try await fixture.issue().accessToken) == second.newKeyID)
        }
    }

    @Test func aLowerPublishDelayNeverStartsBeforeAPendingKey() async throws {
        try await withSessionService { fixture in
            let pending = try await fixture.operatorClient.rotateSigningKey(.init())
            var fast = fixture.configuration
            fast.signingKeyPublishDelay = .zero
            let quick = try await SessionService.start(
                database: fixture.pool,
                configuration: fast,
                clock: fixture.clock,
                logger: testLogger
            )
            let rotation = try await makeClient(quick, caller: "authctl").rotateSigningKey(.init())
            #expect(rotation.signsFrom == pending.signsFrom + 1)
        }
    }
}
