import Synchronization
import Tracing

/// The statements one leased connection ran, for the trace span of
/// ``PostgresPool/withConnection(_:)``: appended on the pool's thread, read after it is done.
final class PostgresStatementLog: Sendable {
    private let statements = Mutex<[String]>([])
    /// The most text a span carries; statements past it are counted, not listed.
    static let maxText = 4_096

    func append(_ sql: String) {
        statements.withLock { $0.append(sql) }
    }

    /// Sets the OpenTelemetry database attributes: `db.system.name`, `db.query.text` (the
    /// statements, `;`-separated, cut at ``maxText`` characters) and `db.operation.batch.size`.
    func annotate(_ span: any Span) {
        let statements = self.statements.withLock { $0 }
        var text = ""
        for sql in statements {
            if !text.isEmpty { text += ";\n" }
            text += sql
            if text.count > Self.maxText {
                text = String(text.prefix(Self.maxText)) + "…"
                break
            }
        }
        span.attributes["db.system.name"] = "postgresql"
        span.attributes["db.query.text"] = text
        span.attributes["db.operation.batch.size"] = statements.count
    }
}
