import Testing

@testable import AuthRPC

@Suite struct ConnectionWatchdogTests {
    let limits = ConnectionLimits(idleTimeout: .seconds(30), readTimeout: .seconds(5))
    let start = ContinuousClock.now

    @Test func helloMustArriveInTime() {
        let watchdog = ConnectionWatchdog(limits: limits, now: start)
        #expect(watchdog.check(now: start + .seconds(4), openCalls: 0) == .keep)
        #expect(watchdog.check(now: start + .seconds(5), openCalls: 0) == .helloTimedOut)
    }

    @Test func unfinishedFrameTimesOut() {
        var watchdog = ConnectionWatchdog(limits: limits, now: start)
        watchdog.frameReceived(isHello: true, now: start)
        watchdog.bytesBuffered(partialFrame: true, now: start + .seconds(1))
        // More bytes of the same frame do not restart the clock.
        watchdog.bytesBuffered(partialFrame: true, now: start + .seconds(5))
        #expect(watchdog.check(now: start + .seconds(5), openCalls: 1) == .keep)
        #expect(watchdog.check(now: start + .seconds(6), openCalls: 1) == .readTimedOut)
        watchdog.bytesBuffered(partialFrame: false, now: start + .seconds(6))
        #expect(watchdog.check(now: start + .seconds(6), openCalls: 1) == .keep)
    }

    @Test func idleOnlyWithoutOpenCalls() {
        var watchdog = ConnectionWatchdog(limits: limits, now: start)
        watchdog.frameReceived(isHello: true, now: start)
        #expect(watchdog.check(now: start + .seconds(31), openCalls: 1) == .keep)
        #expect(watchdog.check(now: start + .seconds(31), openCalls: 0) == .idle)
    }

    @Test func stalledWriterIsCut() {
        var watchdog = ConnectionWatchdog(limits: limits, now: start)
        watchdog.frameReceived(isHello: true, now: start)
        watchdog.writabilityChanged(isWritable: false, now: start + .seconds(1))
        #expect(watchdog.check(now: start + .seconds(5), openCalls: 1) == .keep)
        #expect(watchdog.check(now: start + .seconds(6), openCalls: 1) == .writeStalled)
    }
}
