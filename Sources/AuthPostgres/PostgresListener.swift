import Dispatch
import Logging

/// A notification delivered to a `LISTEN`er (sent with `NOTIFY` or `pg_notify`).
public struct PostgresNotification: Sendable, Hashable {
    /// The channel it was sent on.
    public var channel: String
    /// The payload ("" when none was given).
    public var payload: String
    /// The server process that sent it.
    public var backendPID: Int32

    /// Creates a notification.
    public init(channel: String, payload: String, backendPID: Int32) {
        self.channel = channel
        self.payload = payload
        self.backendPID = backendPID
    }
}

/// The pool's dedicated LISTEN connection: a `DispatchSource` watching its socket feeds the
/// subscribers' `AsyncStream`s; after the connection breaks it reconnects with backoff and
/// LISTENs again on every channel that still has subscribers.
final class PostgresListener: @unchecked Sendable {
    // @unchecked Sendable: every mutable property below is read and written only on `queue`
    // (a serial queue): public entry points hop onto it with `queue.async`, and the dispatch
    // source's handlers are installed on it. The connection is therefore used by one thread at
    // a time, as libpq requires.
    private let queue = DispatchQueue(label: "AuthPostgres.PostgresListener")
    private let configuration: PostgresConfiguration
    private let logger: Logger

    private var connection: PostgresConnection?
    private var source: (any DispatchSourceRead)?
    /// Polls the connection as well, every `pollInterval`: libdispatch on Linux can miss
    /// readability of a new socket that reuses the number of one whose source was just
    /// cancelled (seen after a reconnect under load), and then notifications would wait forever.
    private var pollTimer: (any DispatchSourceTimer)?
    static let pollInterval: DispatchTimeInterval = .milliseconds(100)
    private var listening: Set<String> = []
    private var subscribers: [String: [Int: AsyncStream<PostgresNotification>.Continuation]] = [:]
    private var nextSubscriberID = 0
    private var failures = 0
    private var reconnectScheduled = false
    private var isShutdown = false

    /// Notifications buffered per subscriber before the oldest are dropped.
    static let bufferSize = 10_000

    init(configuration: PostgresConfiguration, logger: Logger) {
        var configuration = configuration
        configuration.applicationName = (configuration.applicationName ?? "auth") + " listener"
        self.configuration = configuration
        self.logger = logger
    }

    /// Subscribes to `channel` (already validated as an identifier), returning once the
    /// connection LISTENs on it.
    func subscribe(channel: String) async throws -> AsyncStream<PostgresNotification> {
        try await withCheckedThrowingContinuation { continuation in
            self.queue.async {
                continuation.resume(with: Result { () throws(PostgresError) in try self.subscribeOnQueue(channel) })
            }
        }
    }

    /// Finishes every stream and closes the connection.
    func shutdown() {
        self.queue.async {
            self.isShutdown = true
            self.pollTimer?.cancel()
            self.pollTimer = nil
            let continuations = self.subscribers.values.flatMap(\.values)
            self.subscribers.removeAll()
            continuations.forEach { $0.finish() }
            self.dropConnection()
        }
    }

    // MARK: On the queue

    private func subscribeOnQueue(_ channel: String) throws(PostgresError) -> AsyncStream<PostgresNotification> {
        dispatchPrecondition(condition: .onQueue(self.queue))
        if self.isShutdown { throw PostgresError.poolClosed }
        let connection = try self.connectIfNeeded()
        if !self.listening.contains(channel) {
            do {
                try connection.executeScript("LISTEN \(quoteIdentifier(channel))")
            } catch {
                if connection.isBroken { self.connectionFailed() }
                throw error
            }
            self.listening.insert(channel)
        }
        let id = self.nextSubscriberID
        self.nextSubscriberID += 1
        let (stream, continuation) = AsyncStream.makeStream(
            of: PostgresNotification.self, bufferingPolicy: .bufferingNewest(Self.bufferSize))
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            self.queue.async { self.unsubscribe(channel: channel, id: id) }
        }
        self.subscribers[channel, default: [:]][id] = continuation
        // LISTEN may have read notifications along with its reply.
        self.deliver(connection.takeNotifications())
        return stream
    }

    private func unsubscribe(channel: String, id: Int) {
        guard self.subscribers[channel]?.removeValue(forKey: id) != nil else { return }
        guard self.subscribers[channel]?.isEmpty == true else { return }
        self.subscribers[channel] = nil
        guard let connection = self.connection, self.listening.contains(channel) else { return }
        self.listening.remove(channel)
        do {
            try connection.executeScript("UNLISTEN \(quoteIdentifier(channel))")
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
                try connection.executeScript("LISTEN \(quoteIdentifier(channel))")
            } catch {
                connection.close()
                throw error
            }
        }
        self.listening = Set(self.subscribers.keys)
        self.connection = connection
        self.failures = 0

        let source = DispatchSource.makeReadSource(fileDescriptor: connection.socket, queue: self.queue)
        // `@Sendable` explicitly: an inferred main-actor closure would trap when fired here.
        source.setEventHandler { @Sendable [weak self] in
            self?.readAvailable()
        }
        source.resume()
        self.source = source
        if self.pollTimer == nil {
            let timer = DispatchSource.makeTimerSource(queue: self.queue)
            timer.schedule(deadline: .now() + Self.pollInterval, repeating: Self.pollInterval)
            timer.setEventHandler { @Sendable [weak self] in
                self?.readAvailable()
            }
            timer.resume()
            self.pollTimer = timer
        }
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

    /// Stops watching the socket, then closes the connection once the source is cancelled
    /// (closing the socket under a live dispatch source is not allowed).
    private func dropConnection() {
        let retired = self.connection.map(RetiredConnection.init)
        self.connection = nil
        self.listening.removeAll()
        if let source = self.source {
            self.source = nil
            source.setCancelHandler { @Sendable in retired?.connection.close() }
            source.cancel()
        } else {
            retired?.connection.close()
        }
    }

    private func scheduleReconnect() {
        guard !self.isShutdown, !self.reconnectScheduled, !self.subscribers.isEmpty else { return }
        self.reconnectScheduled = true
        let exponent = min(self.failures, 10)
        var delay = self.configuration.reconnectBackoff * (1 << exponent)
        if delay > self.configuration.reconnectBackoffLimit { delay = self.configuration.reconnectBackoffLimit }
        let nanoseconds = Int(delay.seconds * 1e9 * Double.random(in: 0.75...1.25))
        self.queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak self] in
            self?.reconnect()
        }
    }

    private func reconnect() {
        self.reconnectScheduled = false
        guard !self.isShutdown, self.connection == nil, !self.subscribers.isEmpty else { return }
        do {
            let connection = try self.connectIfNeeded()
            self.logger.info("PostgreSQL LISTEN connection re-established")
            self.deliver(connection.takeNotifications())
        } catch {
            self.failures += 1
            self.logger.debug("PostgreSQL LISTEN reconnect failed", metadata: ["postgres.error": "\(error)"])
            self.scheduleReconnect()
        }
    }
}

/// A listener connection on its way to being closed in a dispatch source's cancel handler.
private final class RetiredConnection: @unchecked Sendable {
    // @unchecked Sendable: created on the listener queue when the listener lets go of the
    // connection, then touched only once, by the source's cancel handler, which runs on that
    // same serial queue.
    let connection: PostgresConnection

    init(_ connection: PostgresConnection) { self.connection = connection }
}
