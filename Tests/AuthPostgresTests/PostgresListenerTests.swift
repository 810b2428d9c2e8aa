import AuthPostgres
import AuthTestSupport
import Foundation
import Testing

@Suite("LISTEN/NOTIFY")
struct PostgresListenerTests {
    @Test func deliversNotifications() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            let channel = "test_channel_\(uniqueSuffix())"
            let other = "Other_\(uniqueSuffix())"
            let (received, task) = collect(try await pool.listen(channel: channel))
            let (second, secondTask) = collect(try await pool.listen(channel: channel))
            let (otherReceived, otherTask) = collect(try await pool.listen(channel: other))
            defer {
                task.cancel()
                secondTask.cancel()
                otherTask.cancel()
            }

            try await pool.notify(channel: channel, payload: "hello 'world' ✓")
            try await pool.notify(channel: channel)
            try await pool.notify(channel: other, payload: "mixed case channel")
            let twoOnChannel = await received.wait { $0.count == 2 }
            #expect(twoOnChannel)
            #expect(received.elements.map(\.payload) == ["hello 'world' ✓", ""])
            #expect(received.elements.allSatisfy { $0.channel == channel })
            let twoForSecondSubscriber = await second.wait { $0.count == 2 }
            #expect(twoForSecondSubscriber)
            let oneOnOther = await otherReceived.wait { $0.count == 1 }
            #expect(oneOnOther)
            #expect(otherReceived.elements.first?.payload == "mixed case channel")
            #expect(otherReceived.elements.first?.channel == other)

            // A NOTIFY inside a transaction arrives at commit.
            try await pool.transaction { connection in
                try connection.execute("SELECT pg_notify($1, 'in transaction')", [.text(channel)])
            }
            let committedArrived = await received.wait { $0.count == 3 }
            #expect(committedArrived)
        }
    }

    @Test func channelNamesMustBeIdentifiers() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            for bad in ["", "bad-name", "x; DROP TABLE users", "9lives", "quote\"d", String(repeating: "a", count: 64)]
            {
                let listenError = await #expect(throws: PostgresError.self) { try await pool.listen(channel: bad) }
                #expect(listenError?.code == .invalidArgument)
                let notifyError = await #expect(throws: PostgresError.self) { try await pool.notify(channel: bad) }
                #expect(notifyError?.code == .invalidArgument)
            }
        }
    }

    @Test func resubscribesAfterTheConnectionIsKilled() async throws {
        let applicationName = "listen_test_\(uniqueSuffix())"
        try await PostgresTestDatabase.withTestSchema(configure: {
            $0.applicationName = applicationName
            $0.reconnectBackoff = .milliseconds(50)
        }) { pool, _ in
            let channel = "reconnect_\(uniqueSuffix())"
            let (received, task) = collect(try await pool.listen(channel: channel))
            defer { task.cancel() }
            try await pool.notify(channel: channel, payload: "before")
            let beforeArrived = await received.wait { $0.count == 1 }
            #expect(beforeArrived)

            let killed = try await killListenerBackend(of: pool, applicationName: applicationName)
            #expect(killed == 1)

            // Notifications sent while it reconnects are lost; keep sending until one arrives.
            var delivered = false
            let start = ContinuousClock.now
            // Bounded generously: under a loaded machine a reconnect attempt may fail and back off.
            while !delivered && seconds(since: start) < 30 {
                try await pool.notify(channel: channel, payload: "after")
                delivered = await received.wait(timeout: 0.1) { $0.contains { $0.payload == "after" } }
            }
            #expect(delivered)
        }
    }

    /// Notifications sent while the listener is away are lost (PostgreSQL keeps none for it), so
    /// after it is back each subscriber gets a resumption to re-read its state, with no NOTIFY.
    @Test func aReconnectHandsEverySubscriberAResumption() async throws {
        let applicationName = "listen_resume_\(uniqueSuffix())"
        try await PostgresTestDatabase.withTestSchema(configure: {
            $0.applicationName = applicationName
            $0.reconnectBackoff = .milliseconds(20)
        }) { pool, _ in
            let channel = "resume_\(uniqueSuffix())"
            let (received, task) = collect(try await pool.listen(channel: channel))
            defer { task.cancel() }
            try await pool.notify(channel: channel, payload: "before")
            let beforeArrived = await received.wait { $0.count == 1 }
            #expect(beforeArrived)
            let firstIsNotify = await received.wait { $0.first?.isResumption == false }
            #expect(firstIsNotify)

            let killed = try await killListenerBackend(of: pool, applicationName: applicationName)
            #expect(killed == 1)
            let resumed = await received.wait { $0.contains { $0.isResumption } }
            #expect(resumed)
            let resumptionIsEmpty = await received.wait { items in
                items.filter(\.isResumption).allSatisfy {
                    $0.channel == channel && $0.payload == "" && $0.backendPID == 0
                }
            }
            #expect(resumptionIsEmpty)
        }
    }

    /// libpq closes its socket itself when it meets EOF, and a socket opened elsewhere in the
    /// process can take the number at once. This kills the listener's backend again and again
    /// while another thread opens and closes sockets, and requires every reconnect to deliver.
    @Test func resubscribesAfterKillsWhileOtherSocketsComeAndGo() async throws {
        let applicationName = "listen_churn_\(uniqueSuffix())"
        try await PostgresTestDatabase.withTestSchema(configure: {
            $0.applicationName = applicationName
            $0.reconnectBackoff = .milliseconds(5)
        }) { pool, _ in
            let channel = "churn_\(uniqueSuffix())"
            let (received, task) = collect(try await pool.listen(channel: channel))
            defer { task.cancel() }
            let churn = SocketChurn()
            churn.start()
            defer { churn.stop() }

            for round in 1...20 {
                let killed = try await killListenerBackend(of: pool, applicationName: applicationName)
                #expect(killed == 1, "round \(round)")
                // Notifications sent while it reconnects are lost; keep sending until one
                // arrives. A reconnect takes milliseconds; the bound only tells slow from never.
                let payload = "round \(round)"
                var delivered = false
                let start = ContinuousClock.now
                while !delivered && seconds(since: start) < 30 {
                    try await pool.notify(channel: channel, payload: payload)
                    delivered = await received.wait(timeout: 0.05) { $0.contains { $0.payload == payload } }
                }
                #expect(delivered, "nothing delivered after kill \(round)")
                if !delivered { break }
            }
            #expect(churn.stop() > 0, "the churn thread opened sockets")
        }
    }

    @Test func streamsFinishWhenThePoolCloses() async throws {
        let url = try await PostgresTestDatabase.connectionString()
        let pool = PostgresPool(
            configuration: PostgresConfiguration(connectionString: url, maxConnections: 1),
            logger: PostgresTestDatabase.makeLogger()
        )
        let (received, task) = collect(try await pool.listen(channel: "closing_\(uniqueSuffix())"))
        await pool.close()
        #expect(await received.waitUntilFinished())
        await task.value
        let error = await #expect(throws: PostgresError.self) { try await pool.listen(channel: "after_close") }
        #expect(error?.code == .closed)
    }
}

/// Terminates the LISTEN connection of a pool configured with `applicationName`, returning how
/// many backends were terminated. With a timeout, `pg_terminate_backend` returns once the backend
/// has exited, so no notification sent afterwards can come through the old connection.
private func killListenerBackend(of pool: PostgresPool, applicationName: String) async throws -> Int {
    try await pool.query(
        """
        SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000))
        FROM pg_stat_activity WHERE application_name = $1
        """,
        [.text(applicationName + " listener")]
    )[0][0].int
}
