import AuthAPI
import AuthConcurrency
import AuthTestSupport
import Foundation
import Testing

@testable import OTPService

/// Starts hand their messages to the dispatcher running in the same process, already claimed
/// (docs/otp.md, "The outbox").
@Suite struct OutboxHandoffTests {
    private func message(_ index: Int) -> ClaimedMessage {
        ClaimedMessage(
            id: UUID(),
            verificationID: UUID(),
            channel: .email,
            destination: "m\(index)@example.com",
            callingCode: "",
            code: "123456",
            purpose: "login",
            locale: "en",
            createdAt: Date(),
            providerIndex: 0,
            attempts: 1
        )
    }

    @Test func placesAreBoundedAndOnlyWhileADispatcherTakesThem() async throws {
        try await withOTPService { otp in
            let handoff = OutboxHandoff()
            let now = Date(timeIntervalSince1970: 1_000)
            #expect(handoff.reserve(now: now) == nil)  // no dispatcher
            let a = otp.service.makeDispatcher(providers: ProviderSet(sms: [], email: []), workerName: "a")
            let b = otp.service.makeDispatcher(providers: ProviderSet(sms: [], email: []), workerName: "b")
            let wake = WakeSignal()
            #expect(handoff.open(owner: a, worker: a.handoffWorker, lease: .seconds(30), capacity: 2, wake: wake))
            #expect(!handoff.open(owner: b, worker: b.handoffWorker, lease: .seconds(30), capacity: 2, wake: wake))
            let first = try #require(handoff.reserve(now: now))
            #expect(first.worker == "a#start")
            #expect(first.leaseUntil == now.addingTimeInterval(30))
            #expect(handoff.reserve(now: now) != nil)
            #expect(handoff.reserve(now: now) == nil)  // full: reserved places count
            handoff.release()
            #expect(handoff.reserve(now: now) != nil)
            handoff.hand(message(1))
            #expect(handoff.backlog == (queued: 1, reserved: 1))
            #expect(handoff.reserve(now: now) == nil)  // full: queued messages count too
            #expect(handoff.take() != nil)
            #expect(handoff.take() == nil)
            // Graceful shutdown: no new places; a reserved Start still hands over; close returns it.
            handoff.stopReserving(owner: a)
            #expect(handoff.reserve(now: now) == nil)
            handoff.hand(message(2))
            #expect(handoff.close(owner: a).map(\.destination) == ["m2@example.com"])
            handoff.hand(message(3))  // after close: left to its lease
            #expect(handoff.backlog == (queued: 0, reserved: 0))
            #expect(handoff.take() == nil)
        }
    }

    @Test func startsAreSentWithoutAClaimOrANotification() async throws {
        try await withOTPService(clock: ManualClock(realTime: true)) { otp in
            let provider = ScriptedProvider(name: "log")
            let dispatcher = otp.service.makeDispatcher(providers: ProviderSet(sms: [provider], email: [provider]))
            try await withRunningDispatcher(dispatcher) {
                // run() opens the hand-over as it begins; a Start before that takes the NOTIFY path.
                let deadline = ContinuousClock.now + .seconds(10)
                while !otp.service.handoff.isOpen, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(5))
                }
                for index in 0..<20 { _ = try await otp.start("handed\(index)@example.com", clientIP: "") }
                let all = try await waitForAllMessages(otp, state: "sent", count: 20)
                #expect(all)
                #expect(provider.sent.count == 20)
                #expect(Set(provider.sent.map(\.id)).count == 20)
            }
            #expect(dispatcher.handoffsTaken.load(ordering: .relaxed) == 20)
            // No NOTIFY was sent for them: nothing reached the LISTEN connection.
            #expect(dispatcher.notificationsReceived.load(ordering: .relaxed) == 0)
            let attempts = try await otp.query("SELECT sum(total_attempts), count(*) FROM @messages")
            #expect(try attempts[0][0].int == 20)
            #expect(otp.service.handoff.backlog == (queued: 0, reserved: 0))
        }
    }

    /// The process that wrote a message already claimed dies before sending it: once its lease
    /// runs out, any dispatcher claims and sends it, with its code.
    @Test func aHandedOverMessageOfADeadProcessIsSentAfterItsLease() async throws {
        try await withOTPService { otp in
            let dead = otp.service.makeDispatcher(providers: ProviderSet(sms: [], email: []), workerName: "dead")
            #expect(
                otp.service.handoff.open(
                    owner: dead,
                    worker: dead.handoffWorker,
                    lease: otp.configuration.claimLease,
                    capacity: 4,
                    wake: WakeSignal()
                )
            )
            let started = try await otp.start("+919999900077")
            let row = try await otp.query("SELECT state, claimed_by, code FROM @messages")
            #expect(try row[0][0].string == "sending")
            #expect(try row[0][1].string == "dead#start")
            let code = try row[0][2].string
            // The process is gone: nobody takes the hand-over.
            let provider = ScriptedProvider(name: "log")
            let other = otp.service.makeDispatcher(
                providers: ProviderSet(sms: [provider], email: [provider]),
                workerName: "other"
            )
            #expect(try await other.deliverDue() == 0)  // leased
            otp.clock.advance(seconds: otp.configuration.claimLease.timeInterval + 1)
            #expect(try await other.deliverDue() == 1)
            #expect(provider.sent.map(\.code) == [code])
            let status = try await otp.operatorClient.getDeliveryStatus(.init(verificationID: started.verificationID))
            #expect(status.state == .sent)
        }
    }
}
