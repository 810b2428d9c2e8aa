import ArgumentParser
import AuthCrypto
import AuthText
import BenchmarkHarness
import Foundation
import Histogram
import NIOCore
import NIOPosix
import Synchronization

extension GatewayBenchmark {
    /// Full phone sign-ins through the gateway's HTTP API, the code taken from otp-dispatch's
    /// webhook provider by a receiver this command serves. wrk cannot do this: its Lua scripts
    /// only see the answers to their own requests, and the code reaches nobody but the webhook.
    struct SignIns: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "signins",
            abstract: "Full phone sign-ins over HTTP: POST /v1/otp/send, the code by webhook, POST /v1/otp/verify.",
            discussion: """
                otp-dispatch must run with AUTH_OTP_SMS_PROVIDER=webhook, \
                AUTH_OTP_WEBHOOK_URL=http://127.0.0.1:PORT/otp (PORT: --webhook-port) and \
                AUTH_OTP_WEBHOOK_SECRET equal to --webhook-secret. Closed loop by default (--concurrency \
                sign-ins in flight, each started when the previous one ends); with --rate, open loop: \
                sign-in n is due at start + n / rate and its latency counts from then (no coordinated \
                omission), --concurrency being the most in flight. Each sign-in uses a new random +91 \
                number (purpose auto: a new account).
                """
        )

        @Option(help: "The gateway's base URL.")
        var gateway = "http://127.0.0.1:8080"

        @Option(help: "Port of the webhook receiver (otp-dispatch's AUTH_OTP_WEBHOOK_URL points at it).")
        var webhookPort: Int

        @Option(help: "AUTH_OTP_WEBHOOK_SECRET of otp-dispatch: the receiver checks X-Auth-Signature with it.")
        var webhookSecret: String

        @Option(help: "Sign-ins per second, open loop (default: closed loop).")
        var rate: Double?

        @Option(help: "Seconds a sign-in waits for its code before it counts as failed.")
        var codeTimeout: Double = 10

        @Option(
            help: """
                Event-loop threads of the load generator, shared by its connections to the gateway and the \
                webhook receiver. One serves hundreds of sign-ins per second with a few percent of a core, \
                and keeps each code's handoff from the webhook to its sign-in on one thread.
                """
        )
        var threads = 1

        @Flag(
            help: """
                Send each sign-in's requests with X-Forwarded-For: a random 10.x.y.z, as many app users behind \
                a trusted proxy would (the gateway must list this host in AUTH_GATEWAY_TRUSTED_PROXIES); \
                without it every sign-in comes from this host's one address.
                """
        )
        var forwardedFor = false

        @Option(
            help:
                "Write one tab-separated line per row to this file: mode, sign-ins/s, p50 ms, p99 ms, failed, p99.9 ms, max ms."
        )
        var resultFile: String?

        @OptionGroup var load: LoadOptions

        func validate() throws {
            guard (1...65535).contains(webhookPort) else {
                throw ValidationError("--webhook-port must be in 1...65535")
            }
            if let rate, !(rate > 0 && rate <= 1_000_000) { throw ValidationError("--rate must be in (0, 1000000]") }
            guard codeTimeout > 0, codeTimeout <= 120 else {
                throw ValidationError("--code-timeout must be in (0, 120]")
            }
            guard (1...64).contains(threads) else { throw ValidationError("--threads must be in 1...64") }
        }

        func run() async throws {
            let levels = try load.levels(default: [16])
            let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
            do {
                try await signIns(levels: levels, on: group)
            } catch {
                try? await group.shutdownGracefully()
                throw error
            }
            try await group.shutdownGracefully()
        }

        private func signIns(levels: [Int], on group: MultiThreadedEventLoopGroup) async throws {
            let mailbox = CodeMailbox(timeout: .milliseconds(Int64(codeTimeout * 1000)))
            let expiry = Task { await mailbox.expireWaits(every: .milliseconds(100)) }
            defer { expiry.cancel() }
            let receiver = try await WebhookReceiver.start(
                port: webhookPort,
                secret: webhookSecret,
                mailbox: mailbox,
                on: group
            )
            defer { receiver.stop() }

            let flow = SignInFlow(
                gateway: try GatewayAddress(gateway),
                mailbox: mailbox,
                forwardedFor: forwardedFor
            )

            let mode = rate.map { "open loop, \(LoadResult.formatCount($0)) sign-ins/s due" } ?? "closed loop"
            print("Phone sign-ins through \(gateway) (\(mode); \(load.description)):\n")
            let table = MarkdownTable([
                .right("in flight"), .left("measured"), .right("per second"), .right("p50"), .right("p90"),
                .right("p99"), .right("max"), .right("failed"),
            ])
            var lines: [String] = []
            for concurrency in levels {
                let run = SignInRun(
                    concurrency: concurrency,
                    rate: rate,
                    warmup: load.warmup,
                    seconds: load.seconds,
                    group: group
                )
                await run.drive(flow)
                let report = run.report()
                let label = rate == nil ? "\(concurrency)" : "≤ \(concurrency)"
                for (name, result) in [
                    ("sign-in (send → code → verify)\(rate == nil ? "" : ", from its due time")", report.signIn),
                    ("POST /v1/otp/send", report.send),
                    ("code: send → webhook", report.delivery),
                    ("POST /v1/otp/verify", report.verify),
                ] {
                    table.row([
                        label, name, LoadResult.formatCount(Double(result.calls) / report.elapsed.seconds),
                        result.p50, result.p90, result.p99, result.max,
                        name.hasPrefix("sign-in") ? "\(report.failures.values.reduce(0, +))" : "",
                    ])
                }
                if !report.failures.isEmpty {
                    print(
                        "\nFailed sign-ins: "
                            + report.failures.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(
                                separator: ", "
                            ) + "\n"
                    )
                }
                lines.append(
                    [
                        rate == nil
                            ? "closed \(concurrency)" : "open \(LoadResult.formatCount(rate ?? 0))/s ≤ \(concurrency)",
                        String(format: "%.1f", Double(report.signIn.calls) / report.elapsed.seconds),
                        String(format: "%.2f", Double(report.signIn.histogram.valueAtPercentile(50)) / 1e6),
                        String(format: "%.2f", Double(report.signIn.histogram.valueAtPercentile(99)) / 1e6),
                        "\(report.failures.values.reduce(0, +))",
                        String(format: "%.2f", Double(report.signIn.histogram.valueAtPercentile(99.9)) / 1e6),
                        String(format: "%.2f", Double(report.signIn.histogram.max) / 1e6),
                    ].joined(separator: "\t")
                )
            }
            let unclaimed = mailbox.unclaimed.load(ordering: .relaxed)
            if unclaimed > 0 { print("\n\(unclaimed) webhook deliveries matched no sign-in (retries or late codes).") }
            if let resultFile {
                try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: resultFile))
            }
        }
    }
}

/// `http://HOST:PORT` of the gateway (plaintext only: the load stays on this machine).
struct GatewayAddress: Sendable {
    var host: String
    var port: Int

    init(_ url: String) throws {
        guard url.hasPrefix("http://") else { throw ValidationError("--gateway must be http://HOST:PORT") }
        var rest = url.dropFirst("http://".count)
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]),
            (1...65535).contains(port), colon > rest.startIndex
        else { throw ValidationError("--gateway must be http://HOST:PORT") }
        self.host = String(rest[..<colon])
        self.port = port
    }
}

/// What each sign-in of a ``SignInLoop`` needs: where the gateway is, where codes arrive, and
/// whether each sign-in comes from its own address.
struct SignInFlow: Sendable {
    let gateway: GatewayAddress
    let mailbox: CodeMailbox
    /// Each sign-in from its own random 10.x.y.z, through X-Forwarded-For.
    var forwardedFor = false

    struct Failure: Error {
        /// What the tally counts, e.g. "send 429" or "code timeout".
        var kind: String
    }

    /// A new keep-alive connection to the gateway on `eventLoop`, for one loop's sign-ins.
    func connect(on eventLoop: any EventLoop) -> EventLoopFuture<GatewayConnection> {
        GatewayConnection.connect(host: gateway.host, port: gateway.port, on: eventLoop)
            .flatMapErrorThrowing { error in throw Failure(kind: "connect: \(type(of: error))") }
    }

    /// The X-Forwarded-For header of a new sign-in: a random 10.x.y.z, or none.
    func clientHeaders() -> [(name: String, value: String)] {
        guard forwardedFor else { return [] }
        var random = SystemRandomNumberGenerator()
        let address = random.next() as UInt32
        let (b, c, d) = (address >> 16 & 0xFF, address >> 8 & 0xFF, (address >> 24) % 254 + 1)
        return [("x-forwarded-for", "10.\(b).\(c).\(d)")]
    }

    /// The body of a 200 answer to `step`; anything else is a ``Failure`` named by the step
    /// and the status (or the connection's error).
    static func body(of answer: Result<HTTP1Response, any Error>, step: String) -> Result<ByteBuffer, Failure> {
        switch answer {
        case .success(let response) where response.status == 200: .success(response.body)
        case .success(let response): .failure(Failure(kind: "\(step) \(response.status)"))
        case .failure(let error): .failure(Failure(kind: "\(step): \(type(of: error))"))
        }
    }
}

/// Drives sign-ins closed or open loop, like `authctl bench` drives calls, and keeps a
/// histogram per step. Each sign-in loop is a ``SignInLoop`` on one of the event loops.
final class SignInRun: Sendable {
    let concurrency: Int
    let rate: Double?
    /// Where the sign-in loops run, spread over its event loops.
    let group: any EventLoopGroup
    let warmup: Duration
    let duration: Duration
    private let issued = Atomic<Int>(0)
    private let results = Mutex<Results>(Results())
    private let clock = ContinuousClock()

    struct Results: Sendable {
        var signIn = LoadResult.emptyHistogram()
        var send = LoadResult.emptyHistogram()
        var delivery = LoadResult.emptyHistogram()
        var verify = LoadResult.emptyHistogram()
        var failures: [String: Int] = [:]
    }

    struct Report {
        var signIn: LoadResult
        var send: LoadResult
        var delivery: LoadResult
        var verify: LoadResult
        var failures: [String: Int]
        var elapsed: Duration
    }

    /// When sign-ins are due: `interval` apart from `started` (open loop) or as soon as the
    /// previous one ends (closed loop, `interval` nil); recorded from `measuredStart`, none
    /// started from `measuredEnd`.
    struct Plan: Sendable {
        var started: ContinuousClock.Instant
        var measuredStart: ContinuousClock.Instant
        var measuredEnd: ContinuousClock.Instant
        var interval: Duration?
    }

    init(concurrency: Int, rate: Double?, warmup: Double, seconds: Double, group: any EventLoopGroup) {
        self.concurrency = concurrency
        self.group = group
        self.rate = rate
        self.warmup = .milliseconds(Int64((warmup * 1000).rounded()))
        self.duration = .milliseconds(Int64((seconds * 1000).rounded()))
    }

    private let window = Mutex<(start: ContinuousClock.Instant, end: ContinuousClock.Instant)?>(nil)

    /// The number of the next sign-in, across the loops.
    func issue() -> Int { issued.add(1, ordering: .relaxed).oldValue }

    /// Runs sign-ins until the warm-up and the measured time are over; sign-ins due in the
    /// measured time are recorded (an open-loop sign-in from its due time).
    func drive(_ flow: SignInFlow) async {
        let started = clock.now
        let plan = Plan(
            started: started,
            measuredStart: started + warmup,
            measuredEnd: started + warmup + duration,
            interval: rate.map { Duration.nanoseconds(Int64(1e9 / $0)) }
        )
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<concurrency {
                let eventLoop = self.group.next()
                group.addTask {
                    let ended = eventLoop.flatSubmit {
                        SignInLoop(eventLoop: eventLoop, flow: flow, run: self, plan: plan).start()
                    }
                    guard let local = try? await ended.get() else { return }
                    self.results.withLock { results in
                        results.signIn.add(local.signIn)
                        results.send.add(local.send)
                        results.delivery.add(local.delivery)
                        results.verify.add(local.verify)
                        results.failures.merge(local.failures, uniquingKeysWith: +)
                    }
                }
            }
        }
        // Closed loop: the measured time is as planned, plus the last sign-ins' tail; open loop:
        // sign-ins were due during exactly `duration`.
        window.withLock { $0 = (plan.measuredStart, rate == nil ? clock.now : plan.measuredEnd) }
    }

    func report() -> Report {
        let results = self.results.withLock { $0 }
        let elapsed = window.withLock { window in window.map { $0.end - $0.start } ?? duration }
        func result(_ histogram: Histogram<UInt64>) -> LoadResult {
            LoadResult(calls: Int(histogram.totalCount), elapsed: elapsed, histogram: histogram)
        }
        return Report(
            signIn: result(results.signIn),
            send: result(results.send),
            delivery: result(results.delivery),
            verify: result(results.verify),
            failures: results.failures,
            elapsed: elapsed
        )
    }
}

/// One sign-in loop of a ``SignInRun``: phone sign-ins one after another on one keep-alive
/// connection (made again after a failure), all on `eventLoop`, where every member is used.
/// Each sign-in is timed call by call and carried from step to step by callbacks on the
/// event loop (the answer to send, the code from the mailbox, the answer to verify): no task,
/// no hop between the loop and Swift's cooperative pool, and one future per sign-in (the
/// code's) instead of one per step (the load generator's own CPU hides the system's headroom,
/// docs/benchmarks.md, "The load generator").
final class SignInLoop {
    private let eventLoop: any EventLoop
    private let flow: SignInFlow
    private let run: SignInRun
    private let plan: SignInRun.Plan
    private var connection: GatewayConnection?
    private var local = SignInRun.Results()
    private let ended: EventLoopPromise<SignInRun.Results>

    /// The sign-in in flight: what its later steps need from its earlier ones.
    private struct Attempt {
        var due: ContinuousClock.Instant
        var phone: String
        var headers: [(name: String, value: String)]
        var sendStarted = ContinuousClock.now
        var sendEnded = ContinuousClock.now
    }

    init(eventLoop: any EventLoop, flow: SignInFlow, run: SignInRun, plan: SignInRun.Plan) {
        self.eventLoop = eventLoop
        self.flow = flow
        self.run = run
        self.plan = plan
        self.ended = eventLoop.makePromise()
    }

    /// Starts the loop; the future gives its results once no more sign-ins are due.
    func start() -> EventLoopFuture<SignInRun.Results> {
        next()
        return ended.futureResult
    }

    private func next() {
        eventLoop.preconditionInEventLoop()
        let now = ContinuousClock.now
        var due = now
        if let interval = plan.interval { due = plan.started + interval * run.issue() } else { _ = run.issue() }
        guard due < plan.measuredEnd else {
            connection?.close()
            ended.succeed(local)
            return
        }
        if due > now {
            eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(Int64((due - now).nanoseconds))) {
                self.signIn(due: due)
            }
        } else {
            signIn(due: due)
        }
    }

    private func signIn(due: ContinuousClock.Instant) {
        let attempt = Attempt(due: due, phone: randomIndianMobile(), headers: flow.clientHeaders())
        if let connection, connection.isActive {
            send(attempt, over: connection)
            return
        }
        connection?.close()
        connection = nil
        flow.connect(on: eventLoop).assumeIsolated().whenComplete { connected in
            switch connected {
            case .success(let connection):
                self.connection = connection
                self.send(attempt, over: connection)
            case .failure(let error):
                self.failed(attempt, error)
            }
        }
    }

    /// POST /v1/otp/send, then the wait for its code.
    private func send(_ attempt: Attempt, over connection: GatewayConnection) {
        var attempt = attempt
        attempt.sendStarted = .now
        connection.post("/v1/otp/send", body: #"{"phone":"\#(attempt.phone)"}"#, headers: attempt.headers) { answer in
            attempt.sendEnded = .now
            let verificationID: String
            switch SignInFlow.body(of: answer, step: "send") {
            case .failure(let failure):
                return self.failed(attempt, failure)
            case .success(let body):
                guard case .object(let fields)? = body.withUnsafeReadableBytes({ try? JSONValue.parse($0) }),
                    let id = fields["verification_id"]?.stringValue
                else { return self.failed(attempt, SignInFlow.Failure(kind: "send: no verification_id")) }
                verificationID = id
            }
            self.flow.mailbox.code(for: attempt.phone, on: self.eventLoop).assumeIsolated().whenComplete { code in
                switch code {
                case .success(let delivery):
                    self.verify(attempt, verificationID: verificationID, delivery: delivery, over: connection)
                case .failure:
                    self.failed(attempt, SignInFlow.Failure(kind: "code timeout"))
                }
            }
        }
    }

    /// POST /v1/otp/verify with the code, then the sign-in's timings.
    private func verify(
        _ attempt: Attempt,
        verificationID: String,
        delivery: CodeMailbox.Delivery,
        over connection: GatewayConnection
    ) {
        let verifyStarted = ContinuousClock.now
        connection.post(
            "/v1/otp/verify",
            body: #"{"verification_id":"\#(verificationID)","code":"\#(delivery.code)"}"#,
            headers: attempt.headers
        ) { answer in
            let verifyEnded = ContinuousClock.now
            if case .failure(let failure) = SignInFlow.body(of: answer, step: "verify") {
                return self.failed(attempt, failure)
            }
            if attempt.due >= self.plan.measuredStart {
                _ = self.local.signIn.record((verifyEnded - attempt.due).nanoseconds)
                _ = self.local.send.record((attempt.sendEnded - attempt.sendStarted).nanoseconds)
                _ = self.local.delivery.record((delivery.arrived - attempt.sendStarted).nanoseconds)
                _ = self.local.verify.record((verifyEnded - verifyStarted).nanoseconds)
            }
            self.next()
        }
    }

    /// Counts the failure (when measured) and starts the next sign-in on a new connection: the
    /// connection's state after a failure is unknown. Next on a later tick, so failures that
    /// come at once do not recurse.
    private func failed(_ attempt: Attempt, _ error: any Error) {
        connection?.close()
        connection = nil
        if attempt.due >= plan.measuredStart {
            let kind = (error as? SignInFlow.Failure)?.kind ?? "\(type(of: error))"
            local.failures[kind, default: 0] += 1
        }
        eventLoop.assumeIsolated().execute { self.next() }
    }
}
