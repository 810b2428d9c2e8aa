import AuthAPI
import AuthAccessToken
import AuthConcurrency
import AuthProtobuf
import HTTPTypes
import Hummingbird
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The session service's JWK Set as the gateway uses it: fetched with GetJWKS, kept for
/// `maxAge`, fetched again early when a token names a `kid` it does not hold (at most once per
/// `refetchInterval`). One fetch at a time; callers that need keys meanwhile wait for it.
final class JWKSCache: Sendable {
    struct Keys: Sendable {
        /// The JWK Set JSON as session published it (served at `/.well-known/jwks.json`).
        let json: String
        let verifier: LocalAccessTokenVerifier
        let fetchedAt: ContinuousClock.Instant
        /// Tokens these keys verified; shared with the next fetch when it returns the same JSON.
        let verifiedTokens: VerifiedTokenCache
    }

    let maxAge: Duration
    let refetchInterval: Duration
    private let fetchJSON: @Sendable () async throws -> String
    private let makeVerifier: @Sendable (String) throws -> LocalAccessTokenVerifier
    private let current = Mutex<Keys?>(nil)
    private let fetches = SingleFlight<Keys>()

    /// - Parameter fetchJSON: GetJWKS (its `jwks_json`).
    init(
        maxAge: Duration,
        refetchInterval: Duration,
        issuer: String,
        audience: String,
        fetchJSON: @escaping @Sendable () async throws -> String
    ) {
        self.maxAge = maxAge
        self.refetchInterval = refetchInterval
        self.fetchJSON = fetchJSON
        self.makeVerifier = { try LocalAccessTokenVerifier(jwksJSON: $0, issuer: issuer, audience: audience) }
    }

    /// Keys fetched less than `maxAge` ago, or freshly fetched ones.
    func keys() async throws -> Keys {
        if let keys = held(youngerThan: maxAge) { return keys }
        return try await refresh(unlessYoungerThan: maxAge)
    }

    /// Fetches again, unless the keys were fetched within `refetchInterval`.
    func keysAfterUnknownKeyID() async throws -> Keys {
        if let keys = held(youngerThan: refetchInterval) { return keys }
        return try await refresh(unlessYoungerThan: refetchInterval)
    }

    private func held(youngerThan age: Duration) -> Keys? {
        guard let keys = current.withLock({ $0 }), ContinuousClock.now - keys.fetchedAt < age else { return nil }
        return keys
    }

    /// Checked again and stored where `SingleFlight` says, so that one fetch serves every caller.
    /// The same JSON as the held keys' keeps their verifier and what it verified; a changed set
    /// (a key added or retired) gets a new verifier and an empty cache: it must not answer from
    /// what the old one verified.
    private func refresh(unlessYoungerThan age: Duration) async throws -> Keys {
        try await fetches.run(reusing: { held(youngerThan: age) }) { [self] in
            let json = try await fetchJSON()
            // One fetch at a time (`SingleFlight`): nothing replaces the held keys meanwhile.
            let held = current.withLock { $0 }
            let keys =
                if let held, held.json == json {
                    Keys(json: json, verifier: held.verifier, fetchedAt: .now, verifiedTokens: held.verifiedTokens)
                } else {
                    Keys(
                        json: json,
                        verifier: try makeVerifier(json),
                        fetchedAt: .now,
                        verifiedTokens: VerifiedTokenCache()
                    )
                }
            current.withLock { $0 = keys }
            return keys
        }
    }
}

/// Verifies the `Authorization: Bearer` access token of a request: locally against the JWK
/// Set (signature, `typ`, `iss`, `aud`, `exp`), then, so that a logged-out token stops at once,
/// with session's CheckSession (its `sid` and `sub`: one lookup, the signature is not checked
/// twice). Any failure is 401 `invalid_token`.
struct AccessTokenAuthenticator: Sendable {
    /// What an authenticated route knows about its caller.
    struct SignedIn: Sendable {
        let token: String
        let claims: AccessTokenClaims
        /// The session's start and absolute expiry (Unix seconds), from CheckSession.
        let sessionCreatedAt: Int64
        let sessionExpiresAt: Int64

        var userID: String { claims.subject }
        var sessionID: String { claims.sessionID }
    }

    let jwks: JWKSCache
    let backends: Backends

    /// The bearer token of `request`, or 401.
    static func bearerToken(_ request: Request) throws -> String {
        guard let header = request.headers[.authorization], let token = bearerToken(header) else {
            throw APIError.invalidToken
        }
        return token
    }

    /// The token of an `Authorization` value `Bearer <token>` (the scheme in any case, one or
    /// more spaces after it, blanks around the value ignored), or nil. Works on the UTF-8 bytes: it runs on every
    /// authenticated request.
    static func bearerToken(_ header: String) -> String? {
        let bytes = Array(header.utf8)
        func isBlank(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        var index = 0
        while index < bytes.count, isBlank(bytes[index]) { index += 1 }
        let scheme = Array("bearer".utf8)
        guard bytes.count - index > scheme.count else { return nil }
        for offset in 0..<scheme.count where bytes[index + offset] | 0x20 != scheme[offset] { return nil }
        index += scheme.count
        guard bytes[index] == UInt8(ascii: " ") else { return nil }
        while index < bytes.count, bytes[index] == UInt8(ascii: " ") { index += 1 }
        var end = bytes.count
        while end > index, isBlank(bytes[end - 1]) { end -= 1 }
        guard end > index, end - index <= AccessTokenCodec.maximumLength else { return nil }
        return String(decoding: bytes[index..<end], as: UTF8.self)
    }

    /// Verifies `token` against the JWK Set only (no revocation check): a token these keys
    /// verified before is taken from their ``VerifiedTokenCache``, its times checked again.
    func verifyLocally(_ token: String) async throws -> AccessTokenClaims {
        let keys = try await jwksKeys()
        do {
            return try Self.verify(token, with: keys)
        } catch let error where error.code == .unknownSigningKey {
            // A key published since the last fetch (rotation), or a forged kid: fetch again, but
            // not more than once per refetch interval.
            let fresh: JWKSCache.Keys
            do {
                fresh = try await jwks.keysAfterUnknownKeyID()
            } catch {
                throw Self.unavailable(error)
            }
            guard fresh.fetchedAt != keys.fetchedAt else { throw APIError.invalidToken }
            do {
                return try Self.verify(token, with: fresh)
            } catch {
                throw APIError.invalidToken
            }
        } catch {
            throw APIError.invalidToken
        }
    }

    /// ``LocalAccessTokenVerifier/verify(_:now:)`` through `keys`' cache of verified tokens.
    static func verify(_ token: String, with keys: JWKSCache.Keys) throws(AccessTokenError) -> AccessTokenClaims {
        let verified = try keys.verifiedTokens.verified(token) { () throws(AccessTokenError) in
            try keys.verifier.verifyIgnoringTime(token)
        }
        return try keys.verifier.checkTimes(of: verified)
    }

    /// The caller of `request`: a valid token of a live session, or 401.
    func authenticate(_ request: Request, context: GatewayRequestContext) async throws -> SignedIn {
        let token = try Self.bearerToken(request)
        let claims = try await verifyLocally(token)
        // Session issues only UUID session ids and non-empty subjects; anything else is not a
        // session it could find (and CheckSession would refuse it as a malformed request).
        guard UUID(uuidString: claims.sessionID) != nil, !claims.subject.isEmpty else { throw APIError.invalidToken }
        let check = try await backends.call(.session, context) { options in
            try await backends.session.checkSession(
                Auth_Session_V1_CheckSessionRequest(sessionID: claims.sessionID, userID: claims.subject),
                options: options
            )
        }
        guard check.live else { throw APIError.invalidToken }
        return SignedIn(
            token: token,
            claims: claims,
            sessionCreatedAt: check.createdAt,
            sessionExpiresAt: check.expiresAt
        )
    }

    func jwksKeys() async throws -> JWKSCache.Keys {
        do {
            return try await jwks.keys()
        } catch {
            throw Self.unavailable(error)
        }
    }

    private static func unavailable(_ error: any Error) -> APIError {
        if let error = error as? APIError { return error }
        var unavailable = APIError.unavailable
        unavailable.detail = "JWK Set: \(error)"
        return unavailable
    }
}
