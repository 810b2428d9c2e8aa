import AuthAPI
import AuthPostgres
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import Foundation
import Logging
import Synchronization
import Testing

@testable import OTPService

/// The dispatcher running as in the process (LISTEN/NOTIFY, sweep, workers, real time)
/// against a webhook receiver that fails, is down, or whose database restarts.
@Suite struct DeliveryResilienceTests {
    /// The ids a receiver accepted (answered 2xx), counted per id.
    final class Accepted: Sendable {
        private let counts = Mutex<[String: Int]>([:])

        func add(_ request: HTTPReceiver.Received) {
            guard let json = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any],
                let id = json["id"] as? String
            else { return }
            counts.withLock { $0[id, default: 0] += 1 }
        }

        var distinct: Int { counts.withLock { $0.count } }
    }

    static func configureWebhook(_ configuration: inout OTPServiceConfiguration, port: Int) {
        configuration.emailProvider = .webhook
        configuration.smsProvider = .webhook
        configuration.webhookURL = "http://127.0.0.1:\(port)/hook"
        configuration.webhookSecret = "secret"
        configuration.retryBackoff = .milliseconds(20)
        configuration.retryBackoffLimit = .milliseconds(500)
        configuration.deliveryAttempts = 100
        configuration.httpTimeout = .seconds(2)
        configuration.dispatchWorkers = 4
    }

    /// An otp service on a fresh schema (real time) whose dispatcher runs with the webhook
    /// provider pointed at `port`, with only NOTIFY and the scheduled retries waking the
    /// workers (the sweep set to an hour) unless `configure` says otherwise.
    static func withWebhookDispatcher(
        port: Int,
        takesStartHandoffs: Bool = true,
        configure: (inout OTPServiceConfiguration) -> Void = { _ in },
        _ body: (OTPFixture) async throws -> Void
    ) async throws {
        try await withOTPService(
            clock: ManualClock(realTime: true),
            maxConnections: 12,
            configure: {
                Self.configureWebhook(&$0, port: port)
                $0.sweepInterval = .seconds(3_600)
                configure(&$0)
            }
        ) { otp in
            let factory = ProviderFactory(configuration: otp.configuration, logger: testLogger)
            let dispatcher = otp.service.makeDispatcher(
                providers: factory.providerSet(),
                closing: factory,
                takesStartHandoffs: takesStartHandoffs
            )
            try await withRunningDispatcher(dispatcher) { try await body(otp) }
        }
    }

    @Test func aReceiverFailingHalfTheCallsStillGetsEveryMessage() async throws {
        let accepted = Accepted()
        try await HTTPReceiver.with(respond: { request, index in
            if index % 2 == 0 { return (500, "{}") }
            accepted.add(request)
            return (200, "{}")
        }) { receiver in
            try await Self.withWebhookDispatcher(port: receiver.port) { otp in
                for index in 0..<100 { _ = try await otp.start("half\(index)@example.com", clientIP: "") }
                let all = try await waitForAllMessages(otp, state: "sent", count: 100)
                #expect(all)
                #expect(accepted.distinct == 100)
                #expect(receiver.requests.count >= 150)
            }
        }
    }

    /// Bursts of starts from many callers at once, faster than the workers send, with no sweep
    /// to catch a lost wake-up; every message still goes out. Through the NOTIFY path alone
    /// (each notification makes one worker claim once), and with the in-process hand-over,
    /// whose bounded queue overflows to the NOTIFY path during the bursts.
    @Test(arguments: [false, true])
    func burstsOfStartsAreAllSentWithoutTheSweep(handingOver: Bool) async throws {
        let accepted = Accepted()
        try await HTTPReceiver.with(respond: { request, _ in
            accepted.add(request)
            return (200, "{}")
        }) { receiver in
            try await Self.withWebhookDispatcher(port: receiver.port, takesStartHandoffs: handingOver) { otp in
                for burst in 0..<5 {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for caller in 0..<16 {
                            group.addTask {
                                for index in 0..<5 {
                                    _ = try await otp.start(
                                        "burst\(burst)-\(caller)-\(index)@example.com",
                                        clientIP: ""
                                    )
                                }
                            }
                        }
                        try await group.waitForAll()
                    }
                }
                let all = try await waitForAllMessages(otp, state: "sent", count: 400)
                #expect(all)
                #expect(accepted.distinct == 400)
            }
        }
    }

    /// A claim woken by one message's notification may take another message: an older one
    /// due at the same time (another worker's claim skipped it while locked, or did not yet see
    /// it). The notified message must not be left behind then: a woken worker claims until a
    /// claim comes back empty. Here an already sent message is put back in the queue without a
    /// notification, older than anything else, and one worker is woken by a new message's
    /// notification: its first claim takes the old one, and the new one is sent all the same,
    /// with no sweep to pick it up.
    @Test func aNotifiedMessageIsSentWhenItsWakeUpClaimedAnotherOne() async throws {
        try await HTTPReceiver.with(respond: { _, _ in (200, "{}") }) { receiver in
            try await Self.withWebhookDispatcher(
                port: receiver.port,
                takesStartHandoffs: false,
                configure: { $0.dispatchWorkers = 1 }
            ) { otp in
                _ = try await otp.start("first@example.com", clientIP: "")
                #expect(try await waitForAllMessages(otp, state: "sent", count: 1, timeout: .seconds(30)))
                _ = try await otp.query(
                    """
                    UPDATE @messages SET state = 'queued', next_attempt_at = next_attempt_at - interval '1 hour',
                        code = '123456', claimed_until = NULL, claimed_by = NULL
                    """
                )
                _ = try await otp.start("second@example.com", clientIP: "")
                #expect(try await waitForAllMessages(otp, state: "sent", count: 2, timeout: .seconds(30)))
                let destinations = receiver.requests.compactMap { request -> String? in
                    let json = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any]
                    return json?["to"] as? String
                }
                #expect(destinations.sorted() == ["first@example.com", "first@example.com", "second@example.com"])
            }
        }
    }

    /// The sweep sends what no notification announced: a message put back in the queue without
    /// one is left until the sweep interval passes on the dispatcher's (hand-moved) sleep clock,
    /// then sent.
    @Test func theSweepSendsWhatNoNotificationAnnounced() async throws {
        let sleeps = TestSleepClock()
        try await HTTPReceiver.with(respond: { _, _ in (200, "{}") }) { receiver in
            try await withOTPService(
                clock: ManualClock(realTime: true),
                configure: {
                    Self.configureWebhook(&$0, port: receiver.port)
                    $0.dispatchWorkers = 1
                    $0.sweepInterval = .seconds(3_600)
                }
            ) { otp in
                let factory = ProviderFactory(configuration: otp.configuration, logger: testLogger)
                let dispatcher = otp.service.makeDispatcher(
                    providers: factory.providerSet(),
                    closing: factory,
                    takesStartHandoffs: false,
                    sleepClock: sleeps
                )
                try await withRunningDispatcher(dispatcher) {
                    _ = try await otp.start("swept@example.com", clientIP: "")
                    #expect(try await waitForAllMessages(otp, state: "sent", count: 1, timeout: .seconds(30)))
                    _ = try await otp.query(
                        "UPDATE @messages SET state = 'queued', code = '123456', claimed_until = NULL, claimed_by = NULL"
                    )
                    // The sweep is asleep for its hour: the first sleep of the run.
                    await sleeps.waitForSleeps(1)
                    #expect(receiver.requests.count == 1)
                    sleeps.advance(by: .seconds(3_600))
                    #expect(try await waitForAllMessages(otp, state: "sent", count: 1, timeout: .seconds(30)))
                    let arrived = await receiver.wait(timeout: .seconds(30)) { $0.count == 2 }
                    #expect(arrived)
                }
            }
        }
    }

    /// The receiver is not listening at all (connection refused) for 30 s, then comes up on
    /// the same port: every message queued meanwhile arrives.
    @Test func aReceiverDownForThirtySecondsStillGetsEveryMessage() async throws {
        // A port nobody listens on (connections are refused), held by a bound socket so that
        // no other socket takes it until the receiver comes up on it.
        let reserved = try ReservedPort()
        let port = reserved.port
        try await Self.withWebhookDispatcher(
            port: port,
            configure: {
                $0.retryBackoffLimit = .seconds(2)
                $0.sweepInterval = .seconds(1)
            }
        ) { otp in
            for index in 0..<20 { _ = try await otp.start("down\(index)@example.com", clientIP: "") }
            try await Task.sleep(for: .seconds(30))
            let failures = try await otp.query("SELECT count(*) FROM @messages WHERE state = 'sent'")
            #expect(try failures[0][0].int == 0)
            let accepted = Accepted()
            reserved.release()
            try await HTTPReceiver.with(
                port: port,
                respond: { request, _ in
                    accepted.add(request)
                    return (200, "{}")
                }
            ) { _ in
                let all = try await waitForAllMessages(otp, state: "sent", count: 20)
                #expect(all)
            }
            #expect(accepted.distinct == 20)
        }
    }

    /// PostgreSQL restarted under the running dispatcher: the pool
    /// reconnects, the LISTEN connection re-subscribes, and messages written after the
    /// restart are sent without restarting anything. A NOTIFY sent before the LISTEN connection
    /// is back is lost (docs/database.md); the listener's resumption wakes the workers for
    /// those, so the sweep is set to an hour here: nothing but LISTEN delivers.
    @Test func deliveriesResumeAfterPostgreSQLRestarts() async throws {
        let accepted = Accepted()
        try await HTTPReceiver.with(respond: { request, _ in
            accepted.add(request)
            return (200, "{}")
        }) { receiver in
            try await PostgresTestCluster.withCluster { cluster in
                var poolConfiguration = PostgresConfiguration(
                    connectionString: cluster.connectionString,
                    maxConnections: 6,
                    applicationName: "otp-restart-test"
                )
                poolConfiguration.reconnectBackoff = .milliseconds(50)
                poolConfiguration.reconnectBackoffLimit = .milliseconds(500)
                let pool = PostgresPool(configuration: poolConfiguration, logger: testLogger)
                var configuration = testConfiguration()
                Self.configureWebhook(&configuration, port: receiver.port)
                configuration.sweepInterval = .seconds(3_600)
                let service = try await OTPService.start(
                    database: pool,
                    configuration: configuration,
                    clock: ManualClock(realTime: true),
                    logger: testLogger
                )
                let client = makeClient(service)
                let factory = ProviderFactory(configuration: configuration, logger: testLogger)
                // The NOTIFY path (a Start of another replica): no hand-over in this process.
                let dispatcher = service.makeDispatcher(
                    providers: factory.providerSet(),
                    closing: factory,
                    takesStartHandoffs: false
                )
                try await withRunningDispatcher(dispatcher) {
                    for index in 0..<5 {
                        _ = try await client.start(.init(destination: "before\(index)@example.com", purpose: .login))
                    }
                    let before = await receiver.wait(timeout: .seconds(30)) { $0.count >= 5 }
                    #expect(before)
                    // A fast shutdown: every connection is cut (the pool's and the LISTEN one). An
                    // immediate one would also do, but the test cluster runs with
                    // synchronous_commit off, so a crash may lose the last commits themselves.
                    try await cluster.stop(immediate: false)
                    try await cluster.start()
                    // Starts fail while the pool reconnects; then they go through again.
                    var started = 0
                    let deadline = ContinuousClock.now + .seconds(30)
                    while started < 5, ContinuousClock.now < deadline {
                        do {
                            _ = try await client.start(
                                .init(destination: "after\(started)@example.com", purpose: .login)
                            )
                            started += 1
                        } catch {
                            try await Task.sleep(for: .milliseconds(100))
                        }
                    }
                    #expect(started == 5)
                    let after = await receiver.wait(timeout: .seconds(30)) { $0.count >= 10 }
                    #expect(after)
                    // The LISTEN path itself is back: a start's NOTIFY reaches the dispatcher.
                    let notified = dispatcher.notificationsReceived.load(ordering: .relaxed)
                    var extra = 0
                    var heard = false
                    while !heard, extra < 30 {
                        _ = try await client.start(.init(destination: "listen\(extra)@example.com", purpose: .login))
                        extra += 1
                        for _ in 0..<50 where !heard {
                            heard = dispatcher.notificationsReceived.load(ordering: .relaxed) > notified
                            if !heard { try await Task.sleep(for: .milliseconds(20)) }
                        }
                    }
                    #expect(heard)
                    // A start whose commit the outage hid from the caller may have been retried: count
                    // what the outbox holds.
                    let stored = try await pool.query("SELECT count(*) FROM otp.messages")[0][0].int
                    #expect(stored >= 10 + extra)
                    let deadline2 = ContinuousClock.now + .seconds(30)
                    while try await pool.query("SELECT count(*) FROM otp.messages WHERE state <> 'sent'")[0][0].int > 0,
                        ContinuousClock.now < deadline2
                    {
                        try await Task.sleep(for: .milliseconds(50))
                    }
                    #expect(accepted.distinct == stored)
                }
                await pool.close()
            }
        }
    }
}

/// A loopback TCP port bound but not listening: connections to it are refused.
final class ReservedPort: Sendable {
    let port: Int
    private let descriptor: Int32

    init() throws {
        let fd = closeOnExecTCPSocket()
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.port = Int(UInt16(bigEndian: address.sin_port))
        self.descriptor = fd
    }

    func release() {
        close(descriptor)
    }
}
