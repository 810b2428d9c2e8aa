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

    @Test func unfinishedFrameTimesOutWhenNoBytesArrive() {
        var watchdog = ConnectionWatchdog(limits: limits, now: start)
        watchdog.frameReceived(isHello: true, now: start)
        watchdog.bytesBuffered(partialFrame: true, now: start + .seconds(1))
        #expect(watchdog.check(now: start + .seconds(5), openCalls: 1) == .keep)
        #expect(watchdog.check(now: start + .seconds(6), openCalls: 1) == .readTimedOut)
        // More bytes of the frame are progress: the clock restarts from them.
        watchdog.bytesBuffered(partialFrame: true, now: start + .seconds(5))
        #expect(watchdog.check(now: start + .seconds(9), openCalls: 1) == .keep)
        #expect(watchdog.check(now: start + .seconds(10), openCalls: 1) == .readTimedOut)
        watchdog.bytesBuffered(partialFrame: false, now: start + .seconds(10))
        #expect(watchdog.check(now: start + .seconds(60), openCalls: 1) == .keep)
    }

    /// A connection that streams frames back to back always has the start of its next frame
    /// buffered after a read; as long as bytes keep coming it is busy, not stalled.
    @Test func busyConnectionIsNotCutOff() {
        var watchdog = ConnectionWatchdog(limits: limits, now: start)
        watchdog.frameReceived(isHello: true, now: start)
        for second in stride(from: 1, through: 60, by: 2) {
            let now = start + .seconds(second)
            watchdog.frameReceived(isHello: false, now: now)
            watchdog.bytesBuffered(partialFrame: true, now: now)
            #expect(watchdog.check(now: now + .seconds(1), openCalls: 3) == .keep)
        }
        // Then it stops mid-frame.
        #expect(watchdog.check(now: start + .seconds(59 + 5), openCalls: 3) == .readTimedOut)
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
