import AuthPostgres
import AuthTestSupport
import Testing

/// The schema refuses what its checks refuse, whether a check sits in a domain (a user's phone
/// and email, migration 0006) or on the table (a deleted account's, which spans columns).
@Suite struct ColumnChecksTests {
    /// A user with `column` set to `$1`.
    static func user(_ column: String) -> String {
        "INSERT INTO @users (id, created_at, updated_at, \(column)) VALUES (gen_random_uuid(), now(), now(), $1)"
    }

    @Test(
        arguments: [
            (user("phone"), "9876543210", "phone_number_check"),
            (user("phone"), "+0987654321", "phone_number_check"),
            (user("phone"), "+9198765432101234", "phone_number_check"),
            (user("email"), "Asha@example.com", "email_address_check"),
            (user("email"), String(repeating: "a", count: 244) + "@example.com", "email_address_check"),
            ("UPDATE @users SET email = $1", "ASHA@EXAMPLE.COM", "email_address_check"),
            ("UPDATE @users SET deleted_at = now() WHERE phone = $1", "+919876543210", "users_check"),
        ] as [(String, String, String)]
    )
    func aValueTheChecksRefuseIsNotStored(statement: String, value: String, constraint: String) async throws {
        try await withIdentityService { fixture in
            _ = try await fixture.query(Self.user("phone"), [.text("+919876543210")])
            try await expectCheckViolation(constraint) { try await fixture.query(statement, [.text(value)]) }
            let stored = try await fixture.query(
                "SELECT phone, email, deleted_at IS NULL, (SELECT count(*) FROM @users) FROM @users"
            )
            #expect(try stored[0][0].string == "+919876543210")
            #expect(try stored[0][1].decode(String?.self) == nil)
            #expect(try stored[0][2].bool == true)
            #expect(try stored[0][3].int == 1)
        }
    }

    @Test func valuesAtTheLimitsAreStored() async throws {
        try await withIdentityService { fixture in
            _ = try await fixture.query(Self.user("phone"), [.text("+12345678")])
            _ = try await fixture.query(Self.user("phone"), [.text("+123456789012345")])
            _ = try await fixture.query(
                Self.user("email"),
                [.text(String(repeating: "a", count: 243) + "@example.com")]
            )
            #expect(try await fixture.query("SELECT count(*) FROM @users")[0][0].int == 3)
        }
    }
}
