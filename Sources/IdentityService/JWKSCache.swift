import AsyncHTTPClient
import AuthConcurrency
import AuthCrypto
import AuthServiceCore
import AuthTime
import NIOCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Fetches a provider's JWK Set document.
public protocol JWKSFetching: Sendable {
    /// The body of a successful GET of `url`.
    func fetch(_ url: URL) async throws -> [UInt8]
}

/// Fetches JWK Sets over HTTPS (plain HTTP only to loopback, checked by the configuration) with
/// async-http-client: no redirects (a redirect could leave HTTPS), 10 s per request, at most
/// 1 MiB of body.
public final class HTTPJWKSFetcher: JWKSFetching {
    private let client: HTTPClient

    public init() {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(10))
        // Traced by ProviderCallSpan, without the URL.
        configuration.tracing.tracer = nil
        self.client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    public func fetch(_ url: URL) async throws -> [UInt8] {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.headers.add(name: "Accept", value: "application/json")
        return try await ProviderCallSpan.run(provider: "jwks", method: "GET", host: url.host) {
            let response = try await client.execute(request, timeout: .seconds(10))
            guard response.status == .ok else {
                throw IdentityError(.providerUnavailable, "The provider's keys answered HTTP \(response.status.code).")
            }
            let body = try await response.body.collect(upTo: 1 << 20)
            return (Array(body.readableBytesView), Int(response.status.code))
        }
    }

    public func shutdown() async {
        try? await client.shutdown()
    }
}

/// One provider's public keys, by `kid`: fetched on first use, used for ``lifetime``, and
/// fetched again for an unknown `kid` at most once per ``refetchInterval`` (so tokens with made-up
/// key ids cannot make us hammer the provider). When a fetch fails the keys already held stay
/// in use; with none held, the next fetch waits ``failureBackoff`` (issue 19: an unreachable
/// provider was fetched again on every sign-in).
actor JWKSCache {
    let url: URL
    let fetcher: any JWKSFetching
    let clock: any WallClock
    let refetchInterval: TimeInterval
    let lifetime: TimeInterval
    private var keys: [String: any JWSVerificationKey] = [:]
    private var fetchedAt: Date?
    private var lastAttempt: Date?
    private var lastFailure: Date?
    private var lastError: (any Error)?
    private let fetches = SingleFlight<Void>()
    /// With no keys held, how long after a failed fetch the next one may be made; sign-ins in
    /// between answer `provider_unavailable` at once.
    static let failureBackoff: TimeInterval = 10
    /// How many fetches were made (tests).
    private(set) var fetchCount = 0

    init(url: URL, fetcher: any JWKSFetching, clock: any WallClock, refetchInterval: Duration, lifetime: Duration) {
        self.url = url
        self.fetcher = fetcher
        self.clock = clock
        self.refetchInterval = refetchInterval.timeInterval
        self.lifetime = lifetime.timeInterval
    }

    /// The key with `kid`, or nil when the provider does not publish it.
    /// - Throws: `provider_unavailable` when no keys could be fetched at all.
    func key(kid: String) async throws -> (any JWSVerificationKey)? {
        let now = clock.now()
        let stale = fetchedAt.map { now.timeIntervalSince($0) >= lifetime } ?? true
        let mayRefetch = lastAttempt.map { now.timeIntervalSince($0) >= refetchInterval } ?? true
        if keys.isEmpty {
            if !fetches.isRunning, let lastFailure, now.timeIntervalSince(lastFailure) < Self.failureBackoff {
                throw Self.unavailable(lastError)
            }
            await refresh(now: now)
            if keys.isEmpty { throw Self.unavailable(lastError) }
        } else if (stale && mayRefetch) || (keys[kid] == nil && mayRefetch) {
            await refresh(now: now)
        }
        return keys[kid]
    }

    /// One fetch at a time: a caller that comes while one runs waits for it.
    private func refresh(now: Date) async {
        await fetches.run { await self.fetch(now: now) }
    }

    private func fetch(now: Date) async {
        lastAttempt = now
        fetchCount += 1
        do {
            let body = try await fetcher.fetch(url)
            let set = try JSONDecoder().decode(JWKSet.self, from: Data(body))
            var parsed: [String: any JWSVerificationKey] = [:]
            for jwk in set.keys {
                guard let kid = jwk.kid, !kid.isEmpty else { continue }
                switch jwk.kty {
                case "RSA": parsed[kid] = try? RS256PublicKey(jwk: jwk)
                case "EC": parsed[kid] = try? ES256PublicKey(jwk: jwk)
                default: continue
                }
            }
            keys = parsed
            fetchedAt = now
            lastFailure = nil
            lastError = nil
        } catch {
            // The keys already held (if any) stay in use.
            lastFailure = now
            lastError = error
        }
    }

    private static func unavailable(_ cause: (any Error)?) -> IdentityError {
        IdentityError(
            .providerUnavailable,
            "The sign-in provider cannot be reached. Please try again.",
            cause: DescribedError(description: cause.map { "\($0)" } ?? "the last fetch failed less than 10 s ago")
        )
    }
}
