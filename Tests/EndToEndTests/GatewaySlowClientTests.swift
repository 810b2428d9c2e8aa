import AuthTestSupport
import Foundation
import Testing

// Issue 19, item 8: the gateway's HTTP server had no header deadline, no idle timeout and no
// connection cap, so a slowloris client (connections that send their headers a byte at a time,
// or nothing) held a descriptor each for as long as it liked, until none were left.
extension GatewayEndToEndTests {
    @Suite(.timeLimit(.minutes(2))) struct SlowClients {
        static func port(of base: String) throws -> Int {
            try #require(base.split(separator: ":").last.flatMap { Int($0) })
        }

        /// 1,000 stalled connections: half send nothing, half stop inside their headers. A
        /// normal request is answered meanwhile, and every stalled one is closed by the server
        /// (each test socket waits up to 30 s for it, far past the 2 s deadline; before the fix
        /// none was ever closed).
        @Test func aThousandStalledConnectionsAreClosedAndDoNotStopANormalRequest() async throws {
            let fixture = try fixture()
            let (_, base) = try await fixture.startGateway([
                "AUTH_GATEWAY_HEADER_TIMEOUT_SECONDS": "2", "AUTH_GATEWAY_IDLE_TIMEOUT_SECONDS": "2",
            ])
            let port = try Self.port(of: base)
            let silent = try await RawFrameConnection.several(500, port: port)
            let stopped = try await RawFrameConnection.several(500, port: port)
            for connection in stopped {
                #expect(await connection.send(Array("POST /v1/login HTTP/1.1\r\nHost: gateway\r\nContent-Ty".utf8)))
            }
            let live = try await fixture.get("/health/live", base: base)
            #expect(live.status == 200, "\(live)")
            var closed = 0
            for connection in silent + stopped where await connection.isClosedByPeer() { closed += 1 }
            #expect(closed == 1_000)
        }

        /// Headers sent a byte every 300 ms keep arriving, so only a deadline on the whole
        /// header (not on silence) ends them: the connection is closed although it never stops.
        @Test func headersTrickledAByteAtATimeAreCutAtTheHeaderDeadline() async throws {
            let fixture = try fixture()
            let (_, base) = try await fixture.startGateway([
                "AUTH_GATEWAY_HEADER_TIMEOUT_SECONDS": "2", "AUTH_GATEWAY_IDLE_TIMEOUT_SECONDS": "60",
            ])
            let connection = try await RawFrameConnection(port: try Self.port(of: base), readChallenge: false)
            // An endless header: one more byte each time, for up to an hour.
            var sent = 0
            for _ in 0..<12_000 {
                guard await connection.send(Array("X".utf8)) else { break }
                sent += 1
                try await Task.sleep(for: .milliseconds(300))
            }
            #expect(sent < 12_000)
            #expect(await connection.isClosedByPeer())
        }

        /// A keep-alive connection that says nothing after its answer, and a body that stops
        /// arriving, are closed after the idle timeout; a connection that keeps talking is not.
        @Test func idleKeepAliveConnectionsAndStalledBodiesAreClosed() async throws {
            let fixture = try fixture()
            let (_, base) = try await fixture.startGateway([
                "AUTH_GATEWAY_HEADER_TIMEOUT_SECONDS": "60", "AUTH_GATEWAY_IDLE_TIMEOUT_SECONDS": "2",
            ])
            let port = try Self.port(of: base)
            let keptAlive = try await RawFrameConnection(port: port, readChallenge: false)
            #expect(await keptAlive.send(Array("GET /health/live HTTP/1.1\r\nHost: gateway\r\n\r\n".utf8)))
            let stalledBody = try await RawFrameConnection(port: port, readChallenge: false)
            #expect(
                await stalledBody.send(
                    Array(
                        "POST /v1/login HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"em"
                            .utf8
                    )
                )
            )
            // The answer to the first, then nothing: closed (the read ends at the server's close).
            #expect(await keptAlive.isClosedByPeer())
            #expect(await stalledBody.isClosedByPeer())
        }

        /// Past `AUTH_GATEWAY_MAX_CONNECTIONS` a new connection is closed at once; when one
        /// closes, a new one is served again.
        @Test func pastTheConnectionCapANewConnectionIsClosedAtOnce() async throws {
            let fixture = try fixture()
            let (_, base) = try await fixture.startGateway([
                "AUTH_GATEWAY_MAX_CONNECTIONS": "3", "AUTH_GATEWAY_HEADER_TIMEOUT_SECONDS": "3600",
                "AUTH_GATEWAY_IDLE_TIMEOUT_SECONDS": "3600",
            ])
            let port = try Self.port(of: base)
            // Three connections, each shown to be served (one at a time: the server may take
            // connections opened together in another order than they were opened).
            var held: [RawFrameConnection] = []
            for _ in 0..<3 {
                let connection = try await RawFrameConnection(port: port, readChallenge: false)
                #expect(await connection.send(Array("GET /health/live HTTP/1.1\r\nHost: gateway\r\n\r\n".utf8)))
                let status = await connection.receiveBytes(12).map { String(decoding: $0, as: UTF8.self) }
                #expect(status == "HTTP/1.1 200")
                held.append(connection)
            }
            // The fourth is closed without a deadline passing (every deadline is an hour).
            let refused = try await RawFrameConnection(port: port, readChallenge: false)
            #expect(await refused.isClosedByPeer())
            held.removeLast()
            // The place comes back when the server has seen the close.
            let served = await eventually {
                (try? await fixture.get("/health/live", base: base).status) == 200
            }
            #expect(served)
            #expect(held.count == 2)
        }
    }
}
