import AuthBackoff

/// How to reach PostgreSQL and how to run the pool.
public struct PostgresConfiguration: Sendable {
    /// A libpq connection string, key/value (`host=127.0.0.1 port=5432 dbname=auth user=identity`)
    /// or URI (`postgresql://identity@127.0.0.1:5432/auth`). It may hold a password: it is never
    /// logged.
    public var connectionString: String
    /// The most connections the pool opens (callers wait beyond that). Default 10.
    public var maxConnections: Int
    /// The connections the pool keeps open while it runs as a `Service`: it opens them when
    /// ``PostgresPool/run()`` starts, so the first requests after a start do not wait for new
    /// server sessions, and opens them again every ``minimumConnectionsCheckInterval`` when
    /// fewer are open (after the database was restarted, say: idle connections whose server
    /// session ended are found and closed first). At most ``maxConnections``.
    /// Default 0: connections are opened only when a call needs one.
    public var minConnections: Int
    /// How often a running pool checks that ``minConnections`` are open. Default 10 s.
    public var minimumConnectionsCheckInterval: Duration
    /// How long connecting may take (libpq `connect_timeout`, whole seconds, at least 2). Default 5 s.
    public var connectTimeout: Duration
    /// The server-side `statement_timeout` set on every connection; `nil` keeps the server's
    /// setting. Default 5 s. A statement that exceeds it fails with ``PostgresError/Code/timeout``.
    public var statementTimeout: Duration?
    /// How long a caller waits for a free pooled connection before failing with
    /// ``PostgresError/Code/poolTimeout``. Default 5 s.
    public var acquireTimeout: Duration
    /// Reported to the server as `application_name` (visible in `pg_stat_activity`).
    public var applicationName: String?
    /// The schemas of the `search_path` set on every connection, in order; empty keeps the
    /// server's default. Each service uses its own schema.
    public var searchPath: [String]
    /// The first wait after a failed connection attempt; doubles with each further failure up to
    /// ``reconnectBackoffLimit``. While waiting, calls that need a new connection fail at once
    /// with ``PostgresError/Code/unavailable``. Default 100 ms.
    public var reconnectBackoff: Duration
    /// The longest wait between connection attempts. Default 2 s.
    public var reconnectBackoffLimit: Duration
    /// The base of the jittered wait before a transaction is retried after a serialization
    /// failure or deadlock; doubles with each attempt. Default 10 ms.
    public var transactionRetryBackoff: Duration
    /// The most prepared statements cached per connection; beyond it the cache is emptied
    /// (`DEALLOCATE ALL`). Default 256.
    public var maxPreparedStatements: Int
    /// What ``connectionString`` reaches: PostgreSQL itself (``PostgresPooler/none``, the default)
    /// or a pooler in transaction mode (``PostgresPooler/transaction``, PgBouncer's
    /// `pool_mode = transaction`), which may run each transaction in a different server session.
    public var pooler: PostgresPooler
    /// A connection string that reaches PostgreSQL itself, not through a transaction pooler:
    /// required with ``PostgresPooler/transaction`` for what needs one server session for a while,
    /// i.e. the LISTEN connection and ``PostgresPool/withSessionConnection(_:)`` (the migrator's
    /// session advisory lock). Not used with ``PostgresPooler/none``. Never logged.
    public var directConnectionString: String?

    /// Creates a configuration with the defaults listed on each property.
    public init(
        connectionString: String,
        maxConnections: Int = 10,
        connectTimeout: Duration = .seconds(5),
        statementTimeout: Duration? = .seconds(5),
        acquireTimeout: Duration = .seconds(5),
        applicationName: String? = nil,
        searchPath: [String] = []
    ) {
        self.connectionString = connectionString
        self.maxConnections = maxConnections
        self.minConnections = 0
        self.minimumConnectionsCheckInterval = .seconds(10)
        self.connectTimeout = connectTimeout
        self.statementTimeout = statementTimeout
        self.acquireTimeout = acquireTimeout
        self.applicationName = applicationName
        self.searchPath = searchPath
        self.reconnectBackoff = .milliseconds(100)
        self.reconnectBackoffLimit = .seconds(2)
        self.transactionRetryBackoff = .milliseconds(10)
        self.maxPreparedStatements = 256
        self.pooler = .none
        self.directConnectionString = nil
    }
}

/// What sits between the pool and PostgreSQL.
public enum PostgresPooler: String, Sendable, Hashable, CaseIterable {
    /// Nothing: each pooled connection is one server session.
    case none
    /// A pooler that hands out a server connection per transaction (PgBouncer
    /// `pool_mode = transaction`): consecutive statements of one connection may run in different
    /// server sessions, so the pool keeps no state in a session. Statements are not prepared
    /// (`PQprepare` names live in one session; PgBouncer before 1.21 cannot carry them) but sent as
    /// unnamed statements (`PQexecParams`), still with bound parameters in binary; no session
    /// setting is sent at connect (a `SET statement_timeout` or `search_path` would stay on
    /// whichever server connection ran it: give the role or database these settings instead,
    /// `ALTER ROLE … SET statement_timeout = '5s'`); LISTEN and session-scoped work use
    /// ``PostgresConfiguration/directConnectionString``.
    case transaction
}

extension PostgresConfiguration {
    /// The configuration of a connection that must stay one server session (LISTEN, session
    /// advisory locks): this one without a pooler; with a transaction pooler, the direct
    /// connection string without pooler, or `nil` when none is configured.
    var sessionConfiguration: PostgresConfiguration? {
        switch self.pooler {
        case .none:
            return self
        case .transaction:
            guard let direct = self.directConnectionString else { return nil }
            var session = self
            session.connectionString = direct
            session.pooler = .none
            session.directConnectionString = nil
            return session
        }
    }

    /// The reconnect rule of the pool and the LISTEN connection: from ``reconnectBackoff``,
    /// doubling up to ``reconnectBackoffLimit``, each wait jittered by ±25 %.
    var reconnectBackoffRule: ExponentialBackoff {
        ExponentialBackoff(initial: self.reconnectBackoff, limit: self.reconnectBackoffLimit, jitter: 0.75...1.25)
    }
}

extension Duration {
    /// Whole milliseconds, rounded up so that a non-zero duration never becomes 0 ("no limit").
    var wholeMillisecondsRoundedUp: Int64 {
        let (seconds, attoseconds) = self.components
        let millis = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return attoseconds % 1_000_000_000_000_000 > 0 ? millis + 1 : millis
    }

    var seconds: Double {
        let (seconds, attoseconds) = self.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
