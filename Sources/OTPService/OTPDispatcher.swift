import AuthBackoff
import AuthConcurrency
import AuthPostgres
import AuthTime
import Logging
import ServiceLifecycle
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Sends the outbox: workers take what this process's Starts hand over (``OutboxHandoff``:
/// written already claimed, no claim needed) and claim due messages with `FOR UPDATE SKIP
/// LOCKED` (so any number of replicas share the work), send each through its channel's
/// provider, and record the outcome. Each of the outbox's `NOTIFY`s (written in the same
/// transaction as the message) makes one worker claim until nothing is due; a periodic sweep
/// makes all of them do so, which also picks up retries that came due and claims whose lease
/// expired (a worker that died mid-send): such a message is sent again within
/// ``OTPServiceConfiguration/claimLease`` + ``OTPServiceConfiguration/sweepInterval``.
///
/// Failures are retried with exponential backoff and jitter (`AuthBackoff`), up to
/// ``OTPServiceConfiguration/deliveryAttempts`` per provider; then the message fails over to
/// the channel's secondary provider (same message, same code), and when that is spent too it
/// is dead-lettered (`failed`, counted, logged). A sent or dead message's code is wiped.
///
/// Delivery is at least once: a crash between a provider's acceptance and the row's update
/// sends the message again after the lease. Receivers deduplicate by the message id.
public final class OTPDispatcher: Service, Sendable {
    let store: OTPStore
    let configuration: OTPServiceConfiguration
    let providers: ProviderSet
    let clock: any WallClock
    /// What the sweep, the retries and the LISTEN's backoff sleep on (tests move it by hand).
    let sleepClock: any Clock<Duration>
    let metrics: OTPMetrics
    let workerName: String
    let logger: Logger
    let wake: WakeSignal
    /// Notifications received on the outbox channel (tests see the LISTEN path work with it).
    let notificationsReceived = Atomic<Int>(0)
    /// Messages taken from Starts' hand-overs (tests see that path work with it).
    let handoffsTaken = Atomic<Int>(0)
    private let stopping = Atomic<Bool>(false)
    private let backoff: ExponentialBackoff
    /// Each provider's concurrent requests (``OTPServiceConfiguration/providerConcurrency``).
    private let providerLimits: [String: ConcurrencyLimit]

    /// Shut down (its HTTP client) when ``run()`` ends.
    let factory: ProviderFactory?
    /// The service's Start hand-overs, taken while this dispatcher runs (nil: it only claims).
    let handoff: OutboxHandoff?
    /// The `claimed_by` of messages a Start hands over.
    var handoffWorker: String { "\(workerName)#start" }

    init(
        factory: ProviderFactory?,
        handoff: OutboxHandoff?,
        store: OTPStore,
        configuration: OTPServiceConfiguration,
        providers: ProviderSet,
        clock: any WallClock,
        sleepClock: any Clock<Duration> = ContinuousClock(),
        metrics: OTPMetrics,
        workerName: String,
        logger: Logger
    ) {
        self.sleepClock = sleepClock
        self.factory = factory
        self.handoff = handoff
        self.store = store
        self.configuration = configuration
        self.providers = providers
        self.clock = clock
        self.metrics = metrics
        self.workerName = workerName
        self.logger = logger
        self.wake = WakeSignal()
        // One limit per provider, shared by its channels (a webhook may send both).
        var limits: [String: ConcurrencyLimit] = [:]
        for provider in providers.sms + providers.email where limits[provider.name] == nil {
            limits[provider.name] = ConcurrencyLimit(limit: configuration.providerConcurrency)
        }
        self.providerLimits = limits
        self.backoff = ExponentialBackoff(
            initial: configuration.retryBackoff,
            limit: configuration.retryBackoffLimit,
            jitter: 0.5...1.5
        )
    }

    public func run() async throws {
        logger.info(
            "OTP dispatcher running",
            metadata: [
                "otp.workers": "\(configuration.dispatchWorkers)",
                "otp.sms_providers": "\(providers.sms.map(\.name).joined(separator: ","))",
                "otp.email_providers": "\(providers.email.map(\.name).joined(separator: ","))",
                "otp.notify_channel": "\(store.notifyChannel)",
            ]
        )
        // Starts in this process hand their messages straight to the workers (OutboxHandoff).
        let handsOver =
            handoff?.open(
                owner: self,
                worker: handoffWorker,
                lease: configuration.claimLease,
                capacity: 4 * configuration.dispatchWorkers,
                wake: wake
            ) ?? false
        // At graceful shutdown the workers finish the message in hand (its send and the record
        // of its outcome) and claim no more; then the listener and the sweep are cancelled.
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.listen() }
                group.addTask { await self.sweep() }
                await withTaskGroup(of: Void.self) { workers in
                    for index in 0..<self.configuration.dispatchWorkers {
                        workers.addTask { await self.work(index, takesHandoffs: handsOver) }
                    }
                }
                group.cancelAll()
            }
        } onGracefulShutdown: {
            if handsOver { self.handoff?.stopReserving(owner: self) }
            self.stopping.store(true, ordering: .relaxed)
            self.wake.wake()
        }
        // What Starts handed over while the workers stopped: sent now rather than after the
        // lease (the RPC server has drained its calls by now, so no more come).
        if handsOver, let left = handoff?.close(owner: self), !left.isEmpty {
            await withTaskGroup(of: Void.self) { group in
                for message in left {
                    group.addTask { await self.deliver(message, worker: self.handoffWorker) }
                }
            }
        }
        await factory?.shutdown()
        logger.info("OTP dispatcher stopped")
    }

    /// Wakes one worker on every `NOTIFY` of the outbox channel (waking all of them would make
    /// all but one claim nothing: one message per notification). The pool's listener
    /// reconnects by itself after a database restart; a first `LISTEN` that fails (database
    /// down at start) is tried again with backoff. After a reconnect the listener hands over a
    /// resumption (notifications sent while it was away are lost), which wakes the workers like
    /// any notification, so they claim what was queued meanwhile without waiting for the sweep.
    private func listen() async {
        let retry = ExponentialBackoff(initial: .milliseconds(100), limit: .seconds(5), jitter: 0.5...1.5)
        var failures = 0
        while !Task.isCancelled {
            do {
                let stream = try await store.pool.listen(channel: store.notifyChannel)
                failures = 0
                wake.wake()
                for await notification in stream {
                    if notification.isResumption {
                        // Notifications may have been lost: everyone drains.
                        wake.wake()
                    } else {
                        notificationsReceived.add(1, ordering: .relaxed)
                        wake.wakeOne()
                    }
                }
                // The stream ends when the pool closes.
                return
            } catch {
                failures += 1
                logger.warning("Could not LISTEN for the outbox; trying again", metadata: ["error": "\(error)"])
                try? await sleepClock.sleep(for: retry.delay(afterFailures: failures))
            }
        }
    }

    private func sweep() async {
        while !Task.isCancelled {
            do {
                try await sleepClock.sleep(for: configuration.sweepInterval)
            } catch {
                return
            }
            wake.wake()
        }
    }

    /// One worker. Woken by a notification (``WakeSignal/wakeOne()``), it claims until a claim
    /// comes back empty: usually that notification's message, then nothing. Woken by the sweep,
    /// a resumption or a retry coming due (``WakeSignal/wake()``), at start and after a failed
    /// claim, all workers do so at once. Woken for a Start's hand-over, it takes the hand-over
    /// and claims nothing unless it was woken to drain.
    private func work(_ index: Int, takesHandoffs: Bool) async {
        let worker = "\(workerName)#\(index)"
        var failures = 0
        var draining = true
        while !Task.isCancelled, !stopping.load(ordering: .relaxed) {
            let seen = wake.generation
            // A message a Start handed over first: it is claimed already, so it costs no claim.
            // Its wake-up (`wakeOne`) was for it alone: back to waiting unless draining.
            if takesHandoffs, let message = handoff?.take() {
                handoffsTaken.add(1, ordering: .relaxed)
                await deliver(message, worker: handoffWorker)
                if !draining, !stopping.load(ordering: .relaxed) { draining = await wake.wait(past: seen) == .all }
                continue
            }
            do {
                let processed = try await deliverBatch(worker: worker, limit: configuration.claimBatchSize)
                failures = 0
                // Whatever woke it, a worker that claimed something claims again: a claim takes
                // the oldest due message, not necessarily the notified one, which another
                // worker's claim may have missed (its snapshot older than that message's commit,
                // the message it wanted locked by this one). Only an empty claim, made after
                // the notified message's commit, shows that nothing notified is left.
                if processed > 0 { continue }
                if !stopping.load(ordering: .relaxed) { draining = await wake.wait(past: seen) == .all }
            } catch {
                if Task.isCancelled { return }
                // A wake that came during the failures (the sweep, the listener's resumption)
                // would otherwise be lost: drain once the claims work again.
                draining = true
                failures += 1
                logger.warning(
                    "Could not claim outbox messages; trying again",
                    metadata: ["error": "\(error)", "otp.worker": "\(worker)"]
                )
                try? await sleepClock.sleep(
                    for: ExponentialBackoff(initial: .milliseconds(100), limit: .seconds(5), jitter: 0.5...1.5).delay(
                        afterFailures: failures
                    )
                )
            }
        }
    }

    /// Claims and sends every message due now, `limit` at a time, until none is left; returns
    /// how many it handled. (Tests drive the dispatcher with it and a hand-moved clock.)
    @discardableResult
    public func deliverDue(limit: Int = 16) async throws -> Int {
        var total = 0
        while true {
            let processed = try await deliverBatch(worker: "\(workerName)#direct", limit: limit)
            total += processed
            if processed == 0 { return total }
        }
    }

    func deliverBatch(worker: String, limit: Int) async throws -> Int {
        let now = clock.microsecondNow()
        let claimed = try await store.claim(
            now: now,
            leaseUntil: now.addingTimeInterval(configuration.claimLease.timeInterval),
            worker: worker,
            limit: limit
        )
        guard !claimed.isEmpty else { return 0 }
        // Sent concurrently; the sent ones recorded in one statement.
        let attempts = await withTaskGroup(of: SendAttempt?.self) { group in
            for message in claimed {
                group.addTask { await self.send(message) }
            }
            var attempts: [SendAttempt] = []
            for await attempt in group { if let attempt { attempts.append(attempt) } }
            return attempts
        }
        await record(attempts, worker: worker)
        return claimed.count
    }

    /// Sends one claimed message and records the outcome (a Start's hand-over).
    func deliver(_ message: ClaimedMessage, worker: String) async {
        guard let attempt = await send(message) else { return }
        await record([attempt], worker: worker)
    }

    /// One message sent (or not) by one provider of its channel's chain.
    struct SendAttempt: Sendable {
        var message: ClaimedMessage
        /// The provider's index in the chain, and its name.
        var index: Int
        var provider: String
        var result: Result<ProviderReceipt, ProviderError>
    }

    /// Renders a claimed message and hands it to its provider; nil when its channel has none.
    func send(_ message: ClaimedMessage) async -> SendAttempt? {
        let chain = providers.providers(for: message.channel)
        guard !chain.isEmpty else { return nil }
        let index = min(message.providerIndex, chain.count - 1)
        let provider = chain[index]
        let link = LinkToken.link(base: message.linkBase, verificationID: message.verificationID, code: message.code)
        let text =
            MessageTemplates.renderNotice(
                message.purpose,
                channel: message.channel,
                locale: message.locale,
                appName: configuration.appName
            )
            ?? MessageTemplates.render(
                channel: message.channel,
                code: message.code,
                locale: message.locale,
                appName: configuration.appName,
                smsDomain: configuration.smsDomain,
                codeLifetimeMinutes: Int(configuration.codeLifetime.components.seconds / 60),
                link: link
            )
        let outgoing = OutgoingMessage(
            id: message.id,
            verificationID: message.verificationID,
            channel: message.channel,
            to: message.destination,
            code: message.code,
            purpose: message.purpose,
            locale: message.locale,
            createdAt: message.createdAt,
            expiresAt: message.createdAt.addingTimeInterval(configuration.codeLifetime.timeInterval),
            text: text,
            link: link
        )
        let result: Result<ProviderReceipt, ProviderError>
        do {
            if let limit = providerLimits[provider.name] {
                result = .success(try await limit.withPermit { try await provider.send(outgoing) })
            } else {
                result = .success(try await provider.send(outgoing))
            }
        } catch let error as ProviderError {
            result = .failure(error)
        } catch {
            result = .failure(ProviderError(retryable: true, "\(provider.name): \(error)"))
        }
        return SendAttempt(message: message, index: index, provider: provider.name, result: result)
    }

    /// Records what `attempts` came to: the sent messages in one statement, each failure as a
    /// retry, a failover or a dead letter. Errors recording are logged: the claims then expire
    /// and those messages are sent again (at least once).
    func record(_ attempts: [SendAttempt], worker: String) async {
        let now = clock.microsecondNow()
        var sent: [OTPStore.SentMessage] = []
        for attempt in attempts {
            guard case .success(let receipt) = attempt.result else { continue }
            sent.append(
                .init(id: attempt.message.id, provider: attempt.provider, providerMessageID: receipt.providerMessageID)
            )
        }
        if !sent.isEmpty {
            do {
                try await store.markSent(sent, now: now)
                for attempt in attempts where (try? attempt.result.get()) != nil {
                    metrics.sent(
                        channel: attempt.message.channel,
                        provider: attempt.provider,
                        callingCode: attempt.message.callingCode
                    )
                }
                logger.debug("OTP messages sent", metadata: ["otp.count": "\(sent.count)", "otp.worker": "\(worker)"])
            } catch {
                logger.warning(
                    "Could not record sent OTP messages; they will be sent again after their claim expires",
                    metadata: ["otp.message_ids": "\(sent.map(\.id))", "error": "\(error)"]
                )
            }
        }
        for attempt in attempts {
            guard case .failure(let error) = attempt.result else { continue }
            do {
                try await recordFailure(attempt, error, worker: worker, now: now)
            } catch {
                logger.warning(
                    "Could not record an OTP message's outcome; it will be retried after its claim expires",
                    metadata: ["otp.message_id": "\(attempt.message.id)", "error": "\(error)"]
                )
            }
        }
    }

    /// A failed send: retried with backoff within the provider's budget, then failed over to
    /// the chain's next provider, then dead-lettered.
    private func recordFailure(_ attempt: SendAttempt, _ error: ProviderError, worker: String, now: Date) async throws {
        let message = attempt.message
        let chain = providers.providers(for: message.channel)
        let index = attempt.index
        metrics.sendFailed(
            channel: message.channel,
            provider: attempt.provider,
            callingCode: message.callingCode,
            retryable: error.retryable
        )
        if error.retryable && message.attempts < configuration.deliveryAttempts {
            let delay = backoff.delay(afterFailures: message.attempts)
            try await store.markRetry(
                id: message.id,
                worker: worker,
                at: now.addingTimeInterval(delay.timeInterval),
                providerIndex: index,
                resetAttempts: false,
                provider: attempt.provider,
                error: error.message,
                now: now
            )
            scheduleWake(after: delay)
            logger.info(
                "OTP message send failed; retrying",
                metadata: [
                    "otp.message_id": "\(message.id)", "otp.provider": "\(attempt.provider)",
                    "otp.attempt": "\(message.attempts)", "otp.retry_in": "\(delay)", "error": "\(error)",
                ]
            )
        } else if index + 1 < chain.count {
            let next = chain[index + 1]
            try await store.markRetry(
                id: message.id,
                worker: worker,
                at: now,
                providerIndex: index + 1,
                resetAttempts: true,
                provider: next.name,
                error: error.message,
                now: now
            )
            metrics.failedOver(channel: message.channel, from: attempt.provider, to: next.name)
            wake.wake()
            logger.warning(
                "OTP provider failed past its retry budget; failing over",
                metadata: [
                    "otp.message_id": "\(message.id)", "otp.provider": "\(attempt.provider)",
                    "otp.next_provider": "\(next.name)", "error": "\(error)",
                ]
            )
        } else {
            try await store.markDead(id: message.id, provider: attempt.provider, error: error.message, now: now)
            metrics.deadLettered(channel: message.channel, provider: attempt.provider, callingCode: message.callingCode)
            logger.error(
                "OTP message dead-lettered: every provider failed",
                metadata: [
                    "otp.message_id": "\(message.id)", "otp.verification_id": "\(message.verificationID)",
                    "otp.provider": "\(attempt.provider)", "error": "\(error)",
                ]
            )
        }
    }

    private func scheduleWake(after delay: Duration) {
        let wake = self.wake
        let sleepClock = self.sleepClock
        Task {
            try? await sleepClock.sleep(for: delay)
            wake.wake()
        }
    }
}
