import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A PgBouncer of a test's own (Debian's `pgbouncer` package, `scripts/lib/system-packages.sh`)
/// on a free loopback port in transaction pooling mode, in front of one database of the test
/// cluster: as production runs the services ([deployment.md](../../docs/deployment.md)).
public final class PgBouncer: Sendable {
    /// Where Debian installs it.
    public static let executable = "/usr/sbin/pgbouncer"

    /// The loopback port it listens on.
    public let port: Int
    /// A libpq connection string to the database through PgBouncer.
    public let connectionString: String
    /// The running process (its log is PgBouncer's).
    public let process: ServiceProcess
    private let directory: URL

    private init(port: Int, connectionString: String, process: ServiceProcess, directory: URL) {
        self.port = port
        self.connectionString = connectionString
        self.process = process
        self.directory = directory
    }

    /// The `pgbouncer.ini` the tests use: one database, transaction pooling, at most `poolSize`
    /// server connections however many clients connect. `server_reset_query` is empty because
    /// transaction pooling never runs it (the services keep nothing in a session).
    public static func configuration(
        serverHost: String,
        serverPort: Int,
        database: String,
        listenPort: Int,
        authFile: String,
        poolSize: Int
    ) -> String {
        """
        [databases]
        \(database) = host=\(serverHost) port=\(serverPort) dbname=\(database)

        [pgbouncer]
        listen_addr = 127.0.0.1
        listen_port = \(listenPort)
        unix_socket_dir =
        auth_type = trust
        auth_file = \(authFile)
        pool_mode = transaction
        default_pool_size = \(poolSize)
        max_db_connections = \(poolSize)
        reserve_pool_size = 0
        max_client_conn = 1000
        server_reset_query =
        ignore_startup_parameters = extra_float_digits

        """
    }

    /// Runs `body` with a PgBouncer in front of the database `serverConnectionString` names
    /// (a libpq key/value string with `host`, `port`, `dbname`, `user`), stopped afterwards.
    public static func withPgBouncer<R>(
        server serverConnectionString: String,
        poolSize: Int = 8,
        _ body: (PgBouncer) async throws -> R
    ) async throws -> R {
        let bouncer = try await start(serverConnectionString: serverConnectionString, poolSize: poolSize)
        do {
            let result = try await body(bouncer)
            await bouncer.stop()
            return result
        } catch {
            await bouncer.stop()
            throw error
        }
    }

    static func start(serverConnectionString: String, poolSize: Int) async throws -> PgBouncer {
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw ServiceProcessError(
                message: "\(executable) is missing: apt-get install pgbouncer (scripts/test.sh does)"
            )
        }
        var settings: [String: String] = [:]
        for pair in serverConnectionString.split(separator: " ") {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2 { settings[parts[0]] = parts[1] }
        }
        guard let host = settings["host"], let serverPort = settings["port"].flatMap(Int.init),
            let database = settings["dbname"], let user = settings["user"]
        else {
            throw ServiceProcessError(message: "expected host, port, dbname and user in the connection string")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "auth-pgbouncer-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // Read by PgBouncer after it dropped root's privileges (below).
        chmod(directory.path, 0o755)
        let authFile = directory.appendingPathComponent("userlist.txt").path
        try Data("\"\(user)\" \"\"\n".utf8).write(to: URL(fileURLWithPath: authFile))
        var lastLog = ""
        // A port picked free may be taken before PgBouncer binds it: then try another.
        for _ in 0..<3 {
            let port = try freeLoopbackPort()
            let ini = directory.appendingPathComponent("pgbouncer.ini")
            try Data(
                configuration(
                    serverHost: host,
                    serverPort: serverPort,
                    database: database,
                    listenPort: port,
                    authFile: authFile,
                    poolSize: poolSize
                ).utf8
            ).write(to: ini)
            // PgBouncer refuses to run as root; -u makes it drop to nobody.
            let arguments = (getuid() == 0 ? ["-u", "nobody"] : []) + [ini.path]
            let process = try ServiceProcess(
                name: "pgbouncer",
                executableURL: URL(fileURLWithPath: executable),
                arguments: arguments,
                environment: [:]
            )
            if (try? await process.waitForLog("process up: PgBouncer")) != nil {
                return PgBouncer(
                    port: port,
                    connectionString: "host=127.0.0.1 port=\(port) dbname=\(database) user=\(user)",
                    process: process,
                    directory: directory
                )
            }
            lastLog = process.log
            await process.terminate(grace: .seconds(5))
        }
        try? FileManager.default.removeItem(at: directory)
        throw ServiceProcessError(message: "pgbouncer did not start; its log:\n\(lastLog)")
    }

    /// Stops PgBouncer (SIGTERM) and removes its files.
    public func stop() async {
        await process.terminate(grace: .seconds(10))
        try? FileManager.default.removeItem(at: directory)
    }
}

/// A TCP port on 127.0.0.1 that nothing listened on a moment ago.
public func freeLoopbackPort() throws -> Int {
    let descriptor = closeOnExecTCPSocket()
    guard descriptor >= 0 else { throw ServiceProcessError(message: "socket() failed: errno \(errno)") }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
            bind(descriptor, socketAddress, length) == 0 && getsockname(descriptor, socketAddress, &length) == 0
        }
    }
    guard bound else { throw ServiceProcessError(message: "bind() failed: errno \(errno)") }
    return Int(UInt16(bigEndian: address.sin_port))
}
