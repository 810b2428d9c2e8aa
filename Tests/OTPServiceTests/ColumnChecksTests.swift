import AuthPostgres
import AuthTestSupport
import Testing

/// The schema refuses what its checks refuse, whether a check sits in a domain (the
/// single-column ones, migration 0008) or on a table (one that spans columns).
@Suite struct ColumnChecksTests {
    static let verificationID = "00000000-0000-4000-8000-000000000001"
    static let validVerification = """
        INSERT INTO @verifications (id, channel, destination, purpose, locale, code_mac, created_at, expires_at,
            last_sent_at)
        VALUES ('\(verificationID)', 'sms', '+919876543210', 'login', 'en', sha256('c'), now(),
            now() + interval '5 minutes', now())
        """

    /// `INSERT INTO @table` of `defaults` with `overrides` in their place (column → SQL expression).
    static func insert(_ table: String, _ defaults: [String: String], _ overrides: [String: String]) -> String {
        let values = defaults.merging(overrides) { $1 }
        let columns = values.keys.sorted()
        return
            "INSERT INTO @\(table) (\(columns.joined(separator: ", "))) VALUES (\(columns.map { values[$0]! }.joined(separator: ", ")))"
    }

    static func verification(_ overrides: [String: String]) -> String {
        insert(
            "verifications",
            [
                "id": "gen_random_uuid()", "channel": "'sms'", "destination": "'+919876543211'", "purpose": "'login'",
                "locale": "'en'", "code_mac": "sha256('c')", "created_at": "now()",
                "expires_at": "now() + interval '5 minutes'", "last_sent_at": "now()",
            ],
            overrides
        )
    }

    static func message(_ overrides: [String: String]) -> String {
        insert(
            "messages",
            [
                "id": "gen_random_uuid()", "verification_id": "'\(verificationID)'", "channel": "'sms'",
                "destination": "'+919876543210'", "purpose": "'login'", "locale": "'en'", "created_at": "now()",
                "next_attempt_at": "now()", "updated_at": "now()",
            ],
            overrides
        )
    }

    static func pumpingCount(shard: String = "0", started: String = "1", verified: String = "0") -> String {
        "INSERT INTO @pumping_counts (calling_code, minute, shard, started, verified) VALUES ('91', now(), \(shard), \(started), \(verified))"
    }

    @Test(arguments: [
        (verification(["channel": "'fax'"]), "channel_name_check"),
        (verification(["destination": "''"]), "destination_text_check"),
        (verification(["destination": "repeat('d', 321)"]), "destination_text_check"),
        (verification(["purpose": "'admin'"]), "purpose_name_check"),
        (verification(["code_mac": "substring(sha256('c') from 2)"]), "code_mac_bytes_check"),
        (verification(["resends": "-1"]), "count_number_check"),
        (verification(["status": "'expired'"]), "verification_status_check"),
        (verification(["subject": "repeat('s', 129)"]), "subject_text_check"),
        ("UPDATE @verifications SET status = 'done'", "verification_status_check"),
        ("UPDATE @verifications SET resends = resends - 1", "count_number_check"),
        (message(["channel": "'fax'"]), "channel_name_check"),
        (message(["state": "'lost'"]), "message_state_check"),
        (message(["state": "'sent'", "code": "'123456'"]), "messages_check"),
        (pumpingCount(shard: "4"), "pumping_shard_check"),
        (pumpingCount(started: "-1"), "count_number_check"),
        (pumpingCount(verified: "-1"), "count_number_check"),
        ("INSERT INTO @limit_events (kind, key, occurred_at) VALUES ('login', 'k', now())", "limit_kind_check"),
    ])
    func aValueTheChecksRefuseIsNotStored(statement: String, constraint: String) async throws {
        try await withOTPService { fixture in
            _ = try await fixture.query(Self.validVerification)
            try await expectCheckViolation(constraint) { try await fixture.query(statement) }
            let stored = try await fixture.query(
                "SELECT status, resends, (SELECT count(*) FROM @verifications) FROM @verifications WHERE id = '\(Self.verificationID)'"
            )
            #expect(try stored[0][0].string == "pending")
            #expect(try stored[0][1].int == 0)
            #expect(try stored[0][2].int == 1)
            for table in ["messages", "pumping_counts", "limit_events"] {
                #expect(try await fixture.query("SELECT count(*) FROM @\(table)")[0][0].int == 0)
            }
        }
    }

    @Test func valuesAtTheLimitsAreStored() async throws {
        try await withOTPService { fixture in
            _ = try await fixture.query(
                Self.verification([
                    "destination": "repeat('d', 320)", "subject": "repeat('s', 128)", "purpose": "'signup_attempted'",
                    "channel": "'email'",
                ])
            )
            _ = try await fixture.query(Self.validVerification)
            _ = try await fixture.query(Self.message(["state": "'queued'", "code": "'123456'"]))
            _ = try await fixture.query(Self.message(["state": "'superseded'"]))
            _ = try await fixture.query(Self.pumpingCount(shard: "3", started: "0"))
            _ = try await fixture.query(
                "INSERT INTO @limit_events (kind, key, occurred_at) VALUES ('wrong_code', 'k', now())"
            )
            #expect(try await fixture.query("SELECT count(*) FROM @verifications")[0][0].int == 2)
            #expect(try await fixture.query("SELECT count(*) FROM @messages")[0][0].int == 2)
        }
    }
}
