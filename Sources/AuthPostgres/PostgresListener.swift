import AuthBackoff
import Logging
import NIOPosix
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A notification delivered to a `LISTEN`er (sent with `NOTIFY` or `pg_notify`).
public struct PostgresNotification: Sendable, Hashable {
    /// The channel it was sent on.
    public var channel: String
    /// The payload ("" when none was given).
    public var payload: String
    /// The server process that sent it (0 for a resumption).
    public var backendPID: Int32
    /// Not a `NOTIFY` but the listener saying it is listening again after its connection was
    /// lost and re-established: notifications sent in between are gone (PostgreSQL keeps none
    /// for a listener that is not connected), so a subscriber re-reads whatever the channel
    /// signals (an outbox sweeps). Payload "", backend 0.
    public var isResumption: Bool

    /// Creates a notification.
    public init(channel: String, payload: String, backendPID: Int32, isResumption: Bool = false) {
        self.channel = channel
        self.payload = payload
        self.backendPID = backendPID
        self.isResumption = isResumption
    }
}

/// The pool's dedicated LISTEN connection, served by one thread of its own: the thread owns the
/// libpq connection, waits on its socket with `poll(2)`, feeds the subscribers' `AsyncStream`s,
/// runs `LISTEN`/`UNLISTEN` for new and departing subscribers, and after the connection breaks
/// reconnects with backoff and `LISTEN`s again on every channel that still has subscribers,
/// then hands each subscriber a resumption (``PostgresNotification/isResumption``): what was
/// notified while it was away is lost, so the subscriber re-reads its state.
///
/// Why a thread and not a `DispatchSource`: libdispatch's epoll back end on Linux keeps per-
/// descriptor records that other code in the process can corrupt (registering and tearing down
/// read sources concurrently, as Foundation's `FileHandle.readabilityHandler` and `Process` do:
/// swift-corelibs-libdispatch issue 949), and libpq closes its socket by itself when it meets
/// EOF, under a still-registered source. Either way a source for the reconnected socket could
/// stay silent forever (notifications stranded) or libdispatch's event loop could crash; both
/// were seen in this project's test runs. Here the descriptor is polled only by the thread that
/// also calls libpq on it, and never after libpq reported the connection broken, so a number
/// that libpq freed and another socket took is never watched by mistake.
final class PostgresListener: @unchecked Sendable {
    // @unchecked Sendable: the properties under "Thread-confined" are read and written only by
    // the listener thread (`run()` and what it calls). Other threads talk to it only through
    // `shared` (a Mutex) and the wake-up pipe, which is written and closed only while
    // holding that lock.
    private let configuration: PostgresConfiguration
    private let logger: Logger
    private let shared: Mutex<Shared>
    /// A pipe: the thread polls its read end; `wake` writes a byte to its write end.
    private let wakeReader: Int32
    private let wakeWriter: Int32
    /// The listener thread: one thread of its own, started on first use.
    private let thread = NIOThreadPool(numberOfThreads: 1)

    private struct Shared {
        var commands: [Command] = []
        var isShutdown = false
        var wakeDescriptorOpen = true
        var threadStarted = false
    }

    private enum Command {
        case subscribe(
            channel: String,
            id: Int,
            stream: AsyncStream<PostgresNotification>.Continuation,
            reply: CheckedContinuation<Void, any Error>
        )
        case unsubscribe(channel: String, id: Int)
    }

    // MARK: Thread-confined
    private var connection: PostgresConnection?
    private var listening: Set<String> = []
    private var subscribers: [String: [Int: AsyncStream<PostgresNotification>.Continuation]] = [:]
    private var failures = 0
    private var reconnectAt: ContinuousClock.Instant?

    private let nextSubscriberID = Atomic<Int>(0)

    /// Notifications buffered per subscriber before the oldest are dropped.
    static let bufferSize = 10_000

    init(configuration: PostgresConfiguration, logger: Logger) throws(PostgresError) {
        var configuration = configuration
        configuration.applicationName = (configuration.applicationName ?? "auth") + " listener"
        self.configuration = configuration
        self.logger = logger
        var descriptors: [Int32] = [-1, -1]
        guard pipe(&descriptors) == 0 else {
            throw PostgresError(code: .unavailable, message: "could not create the listener's pipe (errno \(errno))")
        }
        for descriptor in descriptors {
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        }
        self.wakeReader = descriptors[0]
        self.wakeWriter = descriptors[1]
        self.shared = Mutex(Shared())
    }

    /// Subscribes to `channel` (already validated as an identifier), returning once the
    /// connection LISTENs on it.
    func subscribe(channel: String) async throws -> AsyncStream<PostgresNotification> {
        let id = self.nextSubscriberID.add(1, ordering: .relaxed).newValue
        let (stream, continuation) = AsyncStream.makeStream(
            of: PostgresNotification.self,
            bufferingPolicy: .bufferingNewest(Self.bufferSize)
        )
        continuation.onTermination = { [weak self] _ in
            self?.send(.unsubscribe(channel: channel, id: id))
        }
        try await withCheckedThrowingContinuation { (reply: CheckedContinuation<Void, any Error>) in
            let command = Command.subscribe(channel: channel, id: id, stream: continuation, reply: reply)
            if !self.send(command) {
                reply.resume(throwing: PostgresError.poolClosed)
            }
        }
        return stream
    }

    /// Finishes every stream and closes the connection (on the listener thread, soon after).
    func shutdown() {
        let wasStarted = self.shared.withLock { shared in
            shared.isShutdown = true
            self.wake(&shared)
            return shared.threadStarted
        }
        if wasStarted {
            // The thread's loop sees the shutdown and returns; then the thread ends.
            self.thread.shutdownGracefully { _ in }
        } else {
            self.shared.withLock { self.closeWakeDescriptor(&$0) }
        }
    }

    // MARK: Talking to the thread

    /// Queues a command for the thread (starting it on first use); false once shut down.
    @discardableResult
    private func send(_ command: Command) -> Bool {
        let startThread: Bool? = self.shared.withLock { shared in
            guard !shared.isShutdown else { return nil }
            shared.commands.append(command)
            self.wake(&shared)
            defer { shared.threadStarted = true }
            return !shared.threadStarted
        }
        guard let startThread else { return false }
        if startThread {
            self.thread.start()
            self.thread.submit { [self] state in
                if state == .active { self.run() }
            }
        }
        return true
    }

    private func wake(_ shared: inout Shared) {
        guard shared.wakeDescriptorOpen else { return }
        // A full pipe (EAGAIN) already wakes the thread.
        var byte: UInt8 = 1
        _ = write(self.wakeWriter, &byte, 1)
    }

    private func closeWakeDescriptor(_ shared: inout Shared) {
        guard shared.wakeDescriptorOpen else { return }
        shared.wakeDescriptorOpen = false
        close(self.wakeReader)
        close(self.wakeWriter)
    }

    // MARK: On the listener thread

    private func run() {
        while true {
            let (commands, isShutdown) = self.shared.withLock { shared in
                defer { shared.commands.removeAll() }
                return (shared.commands, shared.isShutdown)
            }
            if isShutdown {
                self.finish(pending: commands)
                return
            }
            commands.forEach(self.perform)
            if self.connection == nil, let reconnectAt, ContinuousClock.now >= reconnectAt {
                self.reconnect()
            }
            self.waitForEvents()
        }
    }

    /// Blocks until the socket is readable, a command arrives, or a reconnect is due.
    private func waitForEvents() {
        var descriptors = [pollfd(fd: self.wakeReader, events: Int16(POLLIN), revents: 0)]
        if let connection = self.connection {
            descriptors.append(pollfd(fd: connection.socket, events: Int16(POLLIN), revents: 0))
        }
        var timeout: Int32 = -1
        if self.connection == nil, let reconnectAt {
            let (seconds, attoseconds) = (reconnectAt - .now).components
            let milliseconds = max(0, seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
            timeout = Int32(min(milliseconds, 60_000))
        }
        let ready = poll(&descriptors, nfds_t(descriptors.count), timeout)
        guard ready > 0 else { return }  // timeout, or EINTR: the loop looks again
        if descriptors[0].revents != 0 {
            var buffer = [UInt8](repeating: 0, count: 64)
            while read(self.wakeReader, &buffer, buffer.count) > 0 {}
        }
        if descriptors.count > 1, descriptors[1].revents != 0 {
            self.readAvailable()
        }
    }

    private func perform(_ command: Command) {
        switch command {
        case .subscribe(let channel, let id, let stream, let reply):
            do {
                let connection = try self.connectIfNeeded()
                if !self.listening.contains(channel) {
                    do {
                        try connection.executeScript("LISTEN \(PostgresStatement.quotedIdentifier(channel))")
                    } catch {
                        if connection.isBroken { self.connectionFailed() }
                        throw error
                    }
                    self.listening.insert(channel)
                }
                self.subscribers[channel, default: [:]][id] = stream
                // LISTEN may have read notifications along with its reply.
                self.deliver(connection.takeNotifications())
                reply.resume()
            } catch {
                reply.resume(throwing: error)
            }
        case .unsubscribe(let channel, let id):
            self.unsubscribe(channel: channel, id: id)
        }
    }

    private func finish(pending commands: [Command]) {
        for case .subscribe(_, _, let stream, let reply) in commands {
            stream.finish()
            reply.resume(throwing: PostgresError.poolClosed)
        }
        let continuations = self.subscribers.values.flatMap(\.values)
        self.subscribers.removeAll()
        continuations.forEach { $0.finish() }
        self.dropConnection()
        self.shared.withLock { self.closeWakeDescriptor(&$0) }
    }

    private func unsubscribe(channel: String, id: Int) {
        guard self.subscribers[channel]?.removeValue(forKey: id) != nil else { return }
        guard self.subscribers[channel]?.isEmpty == true else { return }
        self.subscribers[channel] = nil
        if self.subscribers.isEmpty { self.reconnectAt = nil }
        guard let connection = self.connection, self.listening.contains(channel) else { return }
        self.listening.remove(channel)
        do {
            try connection.executeScript("UNLISTEN \(PostgresStatement.quotedIdentifier(channel))")
            self.deliver(connection.takeNotifications())
        } catch {
            if connection.isBroken { self.connectionFailed() }
        }
    }

    private func connectIfNeeded() throws(PostgresError) -> PostgresConnection {
        if let connection = self.connection { return connection }
        let connection = try PostgresConnection.connect(configuration: self.configuration, logger: self.logger)
        for channel in self.subscribers.keys.sorted() {
            do {
                try connection.executeScript("LISTEN \(PostgresStatement.quotedIdentifier(channel))")
            } catch {
                connection.close()
                throw error
            }
        }
        self.listening = Set(self.subscribers.keys)
        self.connection = connection
        self.failures = 0
        self.reconnectAt = nil
        return connection
    }

    private func readAvailable() {
        guard let connection = self.connection else { return }
        guard connection.consumeInput() else {
            self.connectionFailed()
            return
        }
        self.deliver(connection.takeNotifications())
    }

    private func deliver(_ notifications: [PostgresNotification]) {
        for notification in notifications {
            for continuation in (self.subscribers[notification.channel] ?? [:]).values {
                continuation.yield(notification)
            }
        }
    }

    private func connectionFailed() {
        self.logger.warning("PostgreSQL LISTEN connection lost; reconnecting")
        self.dropConnection()
        self.scheduleReconnect()
    }

    private func dropConnection() {
        self.connection?.close()
        self.connection = nil
        self.listening.removeAll()
    }

    private func scheduleReconnect() {
        guard !self.subscribers.isEmpty else {
            self.reconnectAt = nil
            return
        }
        // `failures` counts failed reconnects; the loss itself is the first failure.
        self.reconnectAt = .now + self.configuration.reconnectBackoffRule.delay(afterFailures: self.failures + 1)
    }

    private func reconnect() {
        do {
            let connection = try self.connectIfNeeded()
            self.logger.info("PostgreSQL LISTEN connection re-established")
            // What was sent while the connection was down is lost: tell every subscriber.
            self.deliver(
                self.subscribers.keys.sorted().map {
                    PostgresNotification(channel: $0, payload: "", backendPID: 0, isResumption: true)
                }
            )
            self.deliver(connection.takeNotifications())
        } catch {
            self.failures += 1
            self.logger.debug("PostgreSQL LISTEN reconnect failed", metadata: ["postgres.error": "\(error)"])
            self.scheduleReconnect()
        }
    }
}
