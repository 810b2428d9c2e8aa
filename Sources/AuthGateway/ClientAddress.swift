import AuthText
import Logging
import Synchronization

/// Which address a request comes from: the socket peer, or, when the peer is a trusted proxy,
/// the right-most `X-Forwarded-For` entry that is not a trusted proxy (entries left of it can be
/// written by the client and are not believed).
public struct ClientAddressResolver: Sendable {
    public let trustedProxies: [IPAddressRange]

    public init(trustedProxies: [IPAddressRange]) {
        self.trustedProxies = trustedProxies
    }

    func isTrusted(_ address: IPAddress) -> Bool {
        trustedProxies.contains { $0.contains(address) }
    }

    /// - Parameters:
    ///   - peer: the socket peer's address text, nil when unknown (then "" is returned).
    ///   - forwardedFor: every `X-Forwarded-For` header value, in order.
    ///   - warnings: told when an untrusted peer sent `X-Forwarded-For` (production only).
    public func clientAddress(peer: String?, forwardedFor: [String], warnings: ForwardedForWarnings? = nil) -> String {
        guard let peer, let peerAddress = IPAddress(peer) else { return "" }
        guard !trustedProxies.isEmpty, isTrusted(peerAddress) else {
            if !forwardedFor.isEmpty { warnings?.untrustedPeerForwarded(peerAddress) }
            return peerAddress.description
        }
        let hops = forwardedFor.flatMap { $0.split(separator: ",") }.map { $0.trimmingWhitespace() }
        var client = peerAddress
        for hop in hops.reversed() {
            // An entry that is not an address ends the chain: nothing left of it can be believed.
            guard let address = IPAddress(hop) else { break }
            client = address
            if !isTrusted(address) { break }
        }
        return client.description
    }
}

/// The production warnings about `X-Forwarded-For` (issue 19, item 2): behind a proxy that is
/// not trusted, every client has the proxy's address and shares one per-IP budget, so one client
/// spends it for everyone. Once at start when no proxy is trusted, and once per peer that sends
/// `X-Forwarded-For` without being trusted (at most ``maxWarnedPeers`` peers, so a flood of
/// peers cannot fill memory or the log).
public final class ForwardedForWarnings: Sendable {
    public static let maxWarnedPeers = 1024
    private let logger: Logger
    private let warned = Mutex<Set<IPAddress>>([])

    public init(logger: Logger) {
        self.logger = logger
    }

    /// Logs the start-up warning when `trustedProxies` is empty.
    public func started(trustedProxies: [IPAddressRange]) {
        guard trustedProxies.isEmpty else { return }
        logger.warning(
            "AUTH_GATEWAY_TRUSTED_PROXIES is empty: behind a load balancer or Ingress every client has its address and shares one per-IP budget; list the proxy's addresses (docs/deployment.md)"
        )
    }

    /// Logs once for `peer`, which sent `X-Forwarded-For` without being a trusted proxy.
    /// Returns whether it logged.
    @discardableResult
    public func untrustedPeerForwarded(_ peer: IPAddress) -> Bool {
        let first = warned.withLock { warned -> Bool in
            guard warned.count < Self.maxWarnedPeers, !warned.contains(peer) else { return false }
            warned.insert(peer)
            return true
        }
        guard first else { return false }
        logger.warning(
            "X-Forwarded-For from a peer that is not a trusted proxy: ignored, the peer is the client; if it is your proxy, add it to AUTH_GATEWAY_TRUSTED_PROXIES",
            metadata: ["peer": "\(peer)"]
        )
        return true
    }
}
