import AuthPostgres
import AuthTestSupport
import Testing

/// The schema refuses what its checks refuse, whether a check sits in a domain (the
/// single-column ones, migration 0005) or on a table (those that span columns).
@Suite struct ColumnChecksTests {
    static let sessionID = "00000000-0000-4000-8000-000000000001"
    static let validSession = """
        INSERT INTO @sessions (id, user_id, amr, created_at, expires_at, refresh_expires_at)
        VALUES ('\(sessionID)', 'user-1', '{otp}', now(), now() + interval '30 days', now() + interval '7 days')
        """

    /// A session of user-2 with `column` set to `value` (SQL expressions).
    static func session(_ column: String, _ value: String) -> String {
        var values = [
            "id": "gen_random_uuid()", "user_id": "'user-2'", "amr": "'{otp}'", "created_at": "now()",
            "expires_at": "now() + interval '30 days'", "refresh_expires_at": "now() + interval '7 days'",
        ]
        values[column] = value
        let columns = values.keys.sorted()
        return """
            INSERT INTO @sessions (\(columns.joined(separator: ", ")))
            VALUES (\(columns.map { values[$0]! }.joined(separator: ", ")))
            """
    }

    static func refreshToken(hash: String = "sha256('x')", generation: String = "0") -> String {
        """
        INSERT INTO @refresh_tokens (token_hash, session_id, generation, issued_at, expires_at)
        VALUES (\(hash), '\(sessionID)', \(generation), now(), now() + interval '7 days')
        """
    }

    @Test(arguments: [
        (session("user_id", "''"), "user_id_text_check"),
        (session("user_id", "repeat('u', 129)"), "user_id_text_check"),
        (session("amr", "'{}'"), "amr_list_check"),
        (session("amr", "'{a,b,c,d,e,f,g,h,i}'"), "amr_list_check"),
        (session("generation", "-1"), "generation_number_check"),
        (session("token_format", "'jwt'"), "token_format_name_check"),
        (session("claims_email", "repeat('e', 321)"), "claims_email_text_check"),
        (session("claims_phone", "repeat('9', 33)"), "claims_phone_text_check"),
        (session("revoked_at", "now()"), "sessions_check"),
        ("UPDATE @sessions SET generation = generation - 1", "generation_number_check"),
        ("UPDATE @sessions SET user_id = ''", "user_id_text_check"),
        (refreshToken(hash: "substring(sha256('x') from 2)"), "sha256_digest_check"),
        (refreshToken(generation: "-1"), "generation_number_check"),
        (refreshToken(generation: "1"), "refresh_tokens_check"),
    ])
    func aValueTheChecksRefuseIsNotStored(statement: String, constraint: String) async throws {
        try await withSessionService { fixture in
            _ = try await fixture.query(Self.validSession)
            try await expectCheckViolation(constraint) { try await fixture.query(statement) }
            #expect(try await fixture.query("SELECT count(*) FROM @sessions")[0][0].int == 1)
            #expect(try await fixture.query("SELECT count(*) FROM @refresh_tokens")[0][0].int == 0)
            let stored = try await fixture.query("SELECT generation, user_id FROM @sessions")
            #expect(try stored[0][0].int == 0)
            #expect(try stored[0][1].string == "user-1")
        }
    }

    @Test func valuesAtTheLimitsAreStored() async throws {
        try await withSessionService { fixture in
            _ = try await fixture.query(
                """
                INSERT INTO @sessions (id, user_id, amr, created_at, expires_at, refresh_expires_at, token_format,
                    claims_email, claims_phone)
                VALUES ('\(Self.sessionID)', repeat('u', 128), '{a,b,c,d,e,f,g,h}', now(), now() + interval '30 days',
                    now() + interval '7 days', 'supabase', repeat('e', 320), repeat('9', 32))
                """
            )
            _ = try await fixture.query(Self.refreshToken())
            let rows = try await fixture.query("SELECT octet_length(user_id), cardinality(amr) FROM @sessions")
            #expect(try rows[0][0].int == 128)
            #expect(try rows[0][1].int == 8)
        }
    }
}
