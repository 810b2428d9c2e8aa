/// Which new connections a server takes, without I/O: at most `maxConnections` open at once,
/// and at most `maxUnauthenticatedPerPeer` from one peer address that have not completed
/// Hello yet (docs/protocol.md §6). The transport reports each connection's life; keys are
/// whatever identifies a connection to it.
public struct ConnectionAdmission<ConnectionID: Hashable & Sendable>: Sendable {
    public enum Decision: Sendable, Hashable {
        case accept
        /// The server holds `maxConnections` connections.
        case refuseServerFull
        /// This peer address has `maxUnauthenticatedPerPeer` connections still before Hello.
        case refusePeerUnauthenticated
    }

    public let maxConnections: Int
    public let maxUnauthenticatedPerPeer: Int
    private var connections: [ConnectionID: (peer: String, authenticated: Bool)] = [:]
    private var unauthenticatedByPeer: [String: Int] = [:]

    public init(maxConnections: Int, maxUnauthenticatedPerPeer: Int) {
        self.maxConnections = maxConnections
        self.maxUnauthenticatedPerPeer = maxUnauthenticatedPerPeer
    }

    public var openConnections: Int { connections.count }

    public func unauthenticatedConnections(from peer: String) -> Int { unauthenticatedByPeer[peer] ?? 0 }

    /// A connection was accepted by the socket; on `.accept` it counts until ``closed(_:)``.
    public mutating func opened(_ id: ConnectionID, peer: String) -> Decision {
        guard connections.count < maxConnections else { return .refuseServerFull }
        guard unauthenticatedConnections(from: peer) < maxUnauthenticatedPerPeer else {
            return .refusePeerUnauthenticated
        }
        connections[id] = (peer, false)
        unauthenticatedByPeer[peer, default: 0] += 1
        return .accept
    }

    /// The connection's Hello was accepted.
    public mutating func authenticated(_ id: ConnectionID) {
        guard let connection = connections[id], !connection.authenticated else { return }
        connections[id]?.authenticated = true
        releaseUnauthenticated(peer: connection.peer)
    }

    public mutating func closed(_ id: ConnectionID) {
        guard let connection = connections.removeValue(forKey: id) else { return }
        if !connection.authenticated { releaseUnauthenticated(peer: connection.peer) }
    }

    private mutating func releaseUnauthenticated(peer: String) {
        let remaining = (unauthenticatedByPeer[peer] ?? 1) - 1
        unauthenticatedByPeer[peer] = remaining > 0 ? remaining : nil
    }
}
