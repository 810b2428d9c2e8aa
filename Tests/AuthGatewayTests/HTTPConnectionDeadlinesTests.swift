import NIOCore
import Testing

@testable import AuthGateway

/// The deadlines of an HTTP connection (issue 19, item 8), driven with explicit times.
@Suite struct HTTPConnectionDeadlinesTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    func at(_ seconds: Int64) -> NIODeadline { start + .seconds(seconds) }

    @Test func theFirstHeadersMustBeCompleteWithinTheHeaderTimeoutOfTheAccept() {
        var deadlines = HTTPConnectionDeadlines(
            acceptedAt: start,
            headerTimeout: .seconds(10),
            idleTimeout: .seconds(60)
        )
        // Bytes trickling in do not move the header deadline.
        for second in 1...9 { deadlines.bytesArrived(at: at(Int64(second))) }
        #expect(!deadlines.isExpired(at: at(9)))
        #expect(deadlines.isExpired(at: at(10)))
    }

    @Test func aBodyMayPauseUpToTheIdleTimeoutBetweenBytes() {
        var deadlines = HTTPConnectionDeadlines(
            acceptedAt: start,
            headerTimeout: .seconds(10),
            idleTimeout: .seconds(60)
        )
        deadlines.headReceived(at: at(5))
        deadlines.bytesArrived(at: at(60))
        #expect(!deadlines.isExpired(at: at(119)))
        #expect(deadlines.isExpired(at: at(120)))
    }

    @Test func noDeadlineWhileAnsweringThenTheIdleTimeoutThenTheNextHeaders() {
        var deadlines = HTTPConnectionDeadlines(
            acceptedAt: start,
            headerTimeout: .seconds(10),
            idleTimeout: .seconds(60)
        )
        deadlines.headReceived(at: at(1))
        deadlines.requestEnded()
        #expect(deadlines.phase == .responding)
        #expect(!deadlines.isExpired(at: at(100_000)))
        deadlines.responseEnded(at: at(200))
        #expect(deadlines.phase == .idle)
        #expect(!deadlines.isExpired(at: at(259)))
        #expect(deadlines.isExpired(at: at(260)))
        // The next request's first byte starts its header deadline.
        deadlines.bytesArrived(at: at(250))
        #expect(deadlines.phase == .awaitingHead)
        #expect(!deadlines.isExpired(at: at(259)))
        #expect(deadlines.isExpired(at: at(260)))
        deadlines.bytesArrived(at: at(255))
        #expect(deadlines.isExpired(at: at(260)))
    }

    @Test func pipelinedRequestsGoIdleOnlyAfterTheLastAnswer() {
        var deadlines = HTTPConnectionDeadlines(
            acceptedAt: start,
            headerTimeout: .seconds(10),
            idleTimeout: .seconds(60)
        )
        deadlines.headReceived(at: at(1))
        deadlines.requestEnded()
        deadlines.headReceived(at: at(1))
        deadlines.requestEnded()
        deadlines.responseEnded(at: at(2))
        #expect(deadlines.phase == .responding)
        deadlines.responseEnded(at: at(3))
        #expect(deadlines.phase == .idle)
    }

    @Test func theConnectionCountStopsAtItsLimit() {
        let count = HTTPConnectionCount(limit: 2)
        #expect(count.tryOpen())
        #expect(count.tryOpen())
        #expect(!count.tryOpen())
        count.closed()
        #expect(count.tryOpen())
        #expect(count.current == 2)
    }
}
