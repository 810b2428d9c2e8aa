import AuthRPC
import Testing

@Suite struct ConnectionAdmissionTests {
    @Test func serverLimitCountsEveryOpenConnection() {
        var admission = ConnectionAdmission<Int>(maxConnections: 2, maxUnauthenticatedPerPeer: 10)
        #expect(admission.opened(1, peer: "a") == .accept)
        #expect(admission.opened(2, peer: "b") == .accept)
        admission.authenticated(1)
        #expect(admission.opened(3, peer: "c") == .refuseServerFull)
        admission.closed(1)
        #expect(admission.opened(4, peer: "c") == .accept)
        #expect(admission.openConnections == 2)
    }

    @Test func peerLimitCountsOnlyConnectionsBeforeHello() {
        var admission = ConnectionAdmission<Int>(maxConnections: 100, maxUnauthenticatedPerPeer: 2)
        #expect(admission.opened(1, peer: "10.0.0.1") == .accept)
        #expect(admission.opened(2, peer: "10.0.0.1") == .accept)
        #expect(admission.opened(3, peer: "10.0.0.1") == .refusePeerUnauthenticated)
        // Another address is not affected.
        #expect(admission.opened(4, peer: "10.0.0.2") == .accept)
        // Hello accepted on one: its slot is free; authenticating twice frees nothing more.
        admission.authenticated(1)
        admission.authenticated(1)
        #expect(admission.unauthenticatedConnections(from: "10.0.0.1") == 1)
        #expect(admission.opened(5, peer: "10.0.0.1") == .accept)
        #expect(admission.opened(6, peer: "10.0.0.1") == .refusePeerUnauthenticated)
        // Closing an authenticated connection frees no unauthenticated slot; closing one
        // before Hello does; closing an unknown or already closed id changes nothing.
        admission.closed(1)
        #expect(admission.unauthenticatedConnections(from: "10.0.0.1") == 2)
        admission.closed(2)
        admission.closed(2)
        admission.closed(99)
        #expect(admission.unauthenticatedConnections(from: "10.0.0.1") == 1)
        #expect(admission.opened(7, peer: "10.0.0.1") == .accept)
        #expect(admission.openConnections == 3)
    }
}
