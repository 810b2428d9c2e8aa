import AuthTestSupport
import AuthText
import Testing

@testable import AuthGateway

@Suite struct ClientAddressTests {
    @Test(arguments: [
        ("192.0.2.7", "192.0.2.7"),
        ("::1", "::1"),
        ("2001:db8:0:0:0:0:0:1", "2001:db8::1"),
        ("2001:DB8::8:800:200C:417A", "2001:db8::8:800:200c:417a"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("fe80::1%eth0", "fe80::1"),
        ("1:0:0:1:0:0:0:1", "1:0:0:1::1"),
    ])
    func parsesAndPrintsAddresses(text: String, printed: String) {
        #expect(IPAddress(text)?.description == printed)
    }

    @Test(arguments: [
        "", "1.2.3", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "1::2::3", "12345::", "example.com", "1.2.3.4 ",
    ])
    func refusesWhatIsNotAnAddress(text: String) {
        #expect(IPAddress(text) == nil)
    }

    @Test func rangesMatchByPrefix() throws {
        let v4 = try #require(IPAddressRange("10.0.0.0/8"))
        #expect(v4.contains(try #require(IPAddress("10.200.3.4"))))
        #expect(!v4.contains(try #require(IPAddress("11.0.0.1"))))
        #expect(!v4.contains(try #require(IPAddress("::1"))))
        let odd = try #require(IPAddressRange("192.168.0.0/23"))
        #expect(odd.contains(try #require(IPAddress("192.168.1.255"))))
        #expect(!odd.contains(try #require(IPAddress("192.168.2.0"))))
        let v6 = try #require(IPAddressRange("fd00::/8"))
        #expect(v6.contains(try #require(IPAddress("fd12:3456::1"))))
        #expect(IPAddressRange("10.0.0.0/33") == nil)
        #expect(IPAddressRange("10.0.0.0/") == nil)
    }

    @Test func withoutTrustedProxiesTheSocketPeerIsTheClient() {
        let resolver = ClientAddressResolver(trustedProxies: [])
        #expect(resolver.clientAddress(peer: "192.0.2.7", forwardedFor: ["203.0.113.9"]) == "192.0.2.7")
        #expect(resolver.clientAddress(peer: nil, forwardedFor: ["203.0.113.9"]) == "")
    }

    @Test func behindTrustedProxiesTheRightMostUntrustedEntryIsTheClient() throws {
        let resolver = ClientAddressResolver(trustedProxies: [try #require(IPAddressRange("10.0.0.0/8"))])
        // The client wrote "1.1.1.1" itself; the proxy chain appended the real address.
        #expect(
            resolver.clientAddress(peer: "10.0.0.2", forwardedFor: ["1.1.1.1, 203.0.113.9", "10.0.0.5"])
                == "203.0.113.9"
        )
        // A request straight from an untrusted peer: its header is not believed.
        #expect(resolver.clientAddress(peer: "198.51.100.1", forwardedFor: ["1.1.1.1"]) == "198.51.100.1")
        // Every entry trusted: the left-most.
        #expect(resolver.clientAddress(peer: "10.0.0.2", forwardedFor: ["10.0.0.9"]) == "10.0.0.9")
        // A malformed entry ends the chain.
        #expect(resolver.clientAddress(peer: "10.0.0.2", forwardedFor: ["1.1.1.1, garbage, 10.0.0.3"]) == "10.0.0.3")
        // No header: the proxy itself.
        #expect(resolver.clientAddress(peer: "10.0.0.2", forwardedFor: []) == "10.0.0.2")
    }

    /// Issue 19, item 2: an IPv6 client rotating through its /64 was a new client each time.
    @Test func aLimitCountsAnIPv6ClientByItsSlash64() throws {
        #expect(IPAddress.rateLimitKey(of: "2001:db8:1:2:aaaa:bbbb:cccc:dddd") == "2001:db8:1:2::/64")
        #expect(IPAddress.rateLimitKey(of: "2001:db8:1:2::1") == "2001:db8:1:2::/64")
        #expect(IPAddress.rateLimitKey(of: "2001:db8:1:3::1") == "2001:db8:1:3::/64")
        #expect(IPAddress.rateLimitKey(of: "192.0.2.7") == "192.0.2.7")
        #expect(IPAddress.rateLimitKey(of: "::ffff:192.0.2.7") == "192.0.2.7")
        #expect(IPAddress.rateLimitKey(of: "") == "")
    }

    /// Issue 19, item 2: behind an untrusted proxy every client shares the proxy's budget; in
    /// production the gateway says so at start, and once per peer that forwards.
    @Test func forwardingFromAnUntrustedPeerIsWarnedOncePerPeer() throws {
        let log = CapturedLog()
        let warnings = ForwardedForWarnings(logger: log.logger())
        warnings.started(trustedProxies: [])
        warnings.started(trustedProxies: [try #require(IPAddressRange("10.0.0.0/8"))])
        let resolver = ClientAddressResolver(trustedProxies: [try #require(IPAddressRange("10.0.0.0/8"))])
        for _ in 0..<3 {
            #expect(
                resolver.clientAddress(peer: "192.0.2.7", forwardedFor: ["203.0.113.9"], warnings: warnings)
                    == "192.0.2.7"
            )
        }
        _ = resolver.clientAddress(peer: "192.0.2.8", forwardedFor: [], warnings: warnings)
        _ = resolver.clientAddress(peer: "10.0.0.2", forwardedFor: ["203.0.113.9"], warnings: warnings)
        let logged = log.lines
        #expect(logged.count == 2, "\(logged)")
        #expect(logged.first?.contains("AUTH_GATEWAY_TRUSTED_PROXIES is empty") == true)
        #expect(logged.last?.contains("peer=192.0.2.7") == true)
        #expect(logged.last?.contains("AUTH_GATEWAY_TRUSTED_PROXIES") == true)
        // At most 1,024 peers are remembered, and so logged.
        for index in 0..<2_000 {
            warnings.untrustedPeerForwarded(try #require(IPAddress("198.51.\(index / 256).\(index % 256)")))
        }
        #expect(log.lines.count == 1 + ForwardedForWarnings.maxWarnedPeers)
    }
}
