import Logging
import Synchronization

/// Keeps every log record, for tests of what reaches the log. The one recording log handler
/// for every test target.
public final class CapturedLog: Sendable {
    public struct Record: Sendable {
        public let level: Logger.Level
        public let message: String
        public let metadata: [String: String]

        /// `message key=value …`, the keys sorted.
        public var line: String {
            ([message] + metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }).joined(separator: " ")
        }
    }

    public let records = Mutex<[Record]>([])

    public init() {}

    public func logger(level: Logger.Level = .trace) -> Logger {
        var logger = Logger(label: "captured") { _ in Handler(log: self) }
        logger.logLevel = level
        return logger
    }

    struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            var merged = metadata
            for (key, value) in event.metadata ?? [:] { merged[key] = value }
            let record = Record(level: event.level, message: "\(event.message)", metadata: merged.mapValues { "\($0)" })
            log.records.withLock { $0.append(record) }
        }
    }

    /// Each record as ``Record/line``.
    public var lines: [String] { records.withLock { $0.map(\.line) } }

    /// Whether one record, as a line `level message key=value …` (keys sorted), contains every
    /// part.
    public func contains(_ parts: String...) -> Bool {
        records.withLock { records in
            records.contains { record in
                let fields = record.metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
                let line = "\(record.level) \(record.message) " + fields.joined(separator: " ")
                return parts.allSatisfy { line.contains($0) }
            }
        }
    }
}
