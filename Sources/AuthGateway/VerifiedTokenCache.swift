import AuthAccessToken
import Synchronization

/// Access tokens one JWK Set verified (signature, `typ`, `iss`, `aud`: everything but the
/// times), by their exact text, so that an app presenting the same token again costs a lookup
/// instead of an ES256 verification (a third or more of the gateway's CPU on `GET /v1/session`
/// when apps reuse their tokens, docs/benchmarks.md). The times (`iat`, `nbf`, `exp`) are checked on every use, and
/// revocation is CheckSession's on every request, as without the cache. Envoy's `jwt_authn`
/// keeps such a cache (`jwt_cache_config`).
///
/// Only tokens that verified are stored, so filling it takes valid tokens. It holds at most
/// 2 × ``capacityPerGeneration`` tokens: new ones go to the current generation; when that is
/// full it becomes the previous one and the old previous one is dropped; a token found in the
/// previous generation moves to the current one. One cache belongs to one key set
/// (``JWKSCache``): a set with a key added or retired starts an empty one.
final class VerifiedTokenCache: Sendable {
    /// Tokens per generation (an access token is about 0.6–1 KiB: a few MiB at most).
    static let capacityPerGeneration = 4096

    private struct Generations {
        var current: [String: VerifiedAccessToken] = [:]
        var previous: [String: VerifiedAccessToken] = [:]

        /// Stores `verified`; returns the generation it dropped to make room, if any, so that the
        /// caller frees its entries after the lock.
        mutating func insert(
            _ token: String,
            _ verified: VerifiedAccessToken,
            capacity: Int
        ) -> [String: VerifiedAccessToken]? {
            var dropped: [String: VerifiedAccessToken]?
            if current.count >= capacity {
                dropped = previous
                previous = current
                current = [:]
                current.reserveCapacity(capacity)
            }
            current[token] = verified
            return dropped
        }
    }

    private let capacity: Int
    private let generations = Mutex(Generations())

    init(capacityPerGeneration: Int = VerifiedTokenCache.capacityPerGeneration) {
        precondition(capacityPerGeneration > 0)
        self.capacity = capacityPerGeneration
    }

    /// The verified token stored for `token`, else what `verify` returns, stored. `verify` runs
    /// outside the lock (it is an ES256 verification); when it throws nothing is stored.
    func verified<Failure: Error>(
        _ token: String,
        orVerify verify: () throws(Failure) -> VerifiedAccessToken
    ) throws(Failure) -> VerifiedAccessToken {
        if let cached = lookup(token) { return cached }
        let verified = try verify()
        store(token, verified)
        return verified
    }

    /// The verified token stored for `token`, if any.
    func lookup(_ token: String) -> VerifiedAccessToken? {
        let (verified, dropped) = generations.withLock {
            generations -> (VerifiedAccessToken?, [String: VerifiedAccessToken]?) in
            if let verified = generations.current[token] { return (verified, nil) }
            guard let verified = generations.previous.removeValue(forKey: token) else { return (nil, nil) }
            return (verified, generations.insert(token, verified, capacity: capacity))
        }
        // Freed here, after the lock (once per `capacity` tokens stored).
        withExtendedLifetime(dropped) {}
        return verified
    }

    func store(_ token: String, _ verified: VerifiedAccessToken) {
        let dropped = generations.withLock { $0.insert(token, verified, capacity: capacity) }
        // Freed here, after the lock (once per `capacity` tokens stored).
        withExtendedLifetime(dropped) {}
    }

    /// Tokens held, both generations.
    var count: Int { generations.withLock { $0.current.count + $0.previous.count } }
}
