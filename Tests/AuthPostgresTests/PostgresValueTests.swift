import AuthPostgres
import AuthTestSupport
import Foundation
import Testing

@Suite("PostgresValue round trips")
struct PostgresValueTests {
    /// `SELECT $1` returns the parameter with the type it was sent with.
    private func echo(_ value: PostgresValue, in pool: PostgresPool) async throws -> PostgresCell {
        let rows = try await pool.query("SELECT $1 AS value", [value])
        #expect(rows.count == 1)
        return rows[0][0]
    }

    @Test func scalarTypes() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            #expect(try await self.echo(.bool(true), in: pool).bool == true)
            #expect(try await self.echo(.bool(false), in: pool).bool == false)
            for value in [Int32.min, -1, 0, 42, Int32.max] {
                let cell = try await self.echo(.int32(value), in: pool)
                #expect(cell.column.dataType == .int4)
                #expect(try cell.int32 == value)
            }
            for value in [Int64.min, -1, 0, 1 << 40, Int64.max] {
                let cell = try await self.echo(.int64(value), in: pool)
                #expect(cell.column.dataType == .int8)
                #expect(try cell.int64 == value)
            }
            for value in [0.0, -0.5, 3.25, 1e300, -Double.infinity, Double.infinity] {
                #expect(try await self.echo(.double(value), in: pool).double == value)
            }
            #expect(try await self.echo(.double(.nan), in: pool).double.isNaN)
        }
    }

    @Test func textKeepsEveryCharacter() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            let texts = [
                "", "plain", "O'Brien said \"hi\"; -- not a comment", "back\\slash \\x00 $1 %s",
                "żółć 🚀 日本語 \u{200B}", "line\nbreak\ttab", String(repeating: "long ", count: 20_000),
            ]
            for text in texts {
                let cell = try await self.echo(.text(text), in: pool)
                #expect(cell.column.dataType == .text)
                #expect(try cell.string == text)
            }
        }
    }

    @Test func textWithNULIsRejectedBeforeSending() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            let error = await #expect(throws: PostgresError.self) {
                try await pool.query("SELECT $1", [.text("a\u{0}b")])
            }
            #expect(error?.code == .invalidData)
            #expect(error?.description.contains("a\u{0}b") == false)
        }
    }

    @Test func byteaKeepsZeroBytes() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            let cases: [[UInt8]] = [
                [], [0], [0, 1, 0, 255, 0, 0], (0...255).map { UInt8($0) }, [UInt8](repeating: 0, count: 70_000),
            ]
            for bytes in cases {
                let cell = try await self.echo(.bytea(bytes), in: pool)
                #expect(cell.column.dataType == .bytea)
                #expect(try cell.bytes == bytes)
            }
            // The server sees the real length, zero bytes included.
            let length = try await pool.query("SELECT length($1)", [.bytea([0, 0, 7, 0])])[0][0].int
            #expect(length == 4)
        }
    }

    @Test func uuidFromValueStringAndBytes() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            let uuid = UUID()
            let cell = try await self.echo(.uuid(uuid), in: pool)
            #expect(cell.column.dataType == .uuid)
            #expect(try cell.uuid == uuid)
            #expect(try cell.string == uuid.uuidString.lowercased())

            // From text: the server parses it.
            let text = try await pool.query("SELECT $1::uuid", [.text(uuid.uuidString)])[0][0]
            #expect(try text.uuid == uuid)

            // From 16 bytes, in RFC 4122 order.
            let bytes: [UInt8] = [
                0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
            ]
            let value = try #require(PostgresValue.uuid(bytes: bytes))
            #expect(try await self.echo(value, in: pool).string == "12345678-9abc-def0-0123-456789abcdef")
            #expect(PostgresValue.uuid(bytes: [1, 2, 3]) == nil)
            #expect(PostgresValue.uuid(string: uuid.uuidString.lowercased()) == .uuid(uuid))
            #expect(PostgresValue.uuid(string: "not-a-uuid") == nil)
        }
    }

    @Test func timestamptzAsDateAndMicroseconds() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            let micros: [Int64] = [0, 1_700_000_000_123_456, -1_000_000_000_000_001, 946_684_800_000_000]
            for value in micros {
                let cell = try await self.echo(.timestamptzMicroseconds(value), in: pool)
                #expect(cell.column.dataType == .timestamptz)
                #expect(try cell.microsecondsSinceEpoch == value)
            }
            let date = Date(timeIntervalSince1970: 1_700_000_000.25)
            #expect(try await self.echo(.timestamptz(date), in: pool).date == date)

            // The server agrees on the instant.
            let epoch = try await pool.query(
                "SELECT extract(epoch FROM $1)::float8",
                [.timestamptzMicroseconds(1_700_000_000_500_000)]
            )
            #expect(try epoch[0][0].double == 1_700_000_000.5)
        }
    }

    @Test func nullOfEveryKind() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            for type in ["int8", "text", "bytea", "uuid", "timestamptz", "bool", "float8"] {
                let cell = try await pool.query("SELECT $1::\(type)", [.null])[0][0]
                #expect(cell.isNull)
                #expect(cell.rawBytes == nil)
            }
            let row = try await pool.query("SELECT $1::int8 AS a, $2::text AS b", [.null, nil])[0]
            #expect(try row["a"].decode(Int64?.self) == nil)
            #expect(try row["b"].decode(String?.self) == nil)
        }
    }

    @Test func valuesStoredInTableComeBackUnchanged() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            try await pool.query(
                """
                CREATE TABLE everything (
                    b bool, i int4, l int8, d float8, t text, y bytea, u uuid, ts timestamptz, j jsonb, n text
                )
                """
            )
            let uuid = UUID()
            let inserted = try await pool.query(
                "INSERT INTO everything VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                [
                    .bool(true), .int32(-7), .int64(1 << 50), .double(2.5), .text("it's \"quoted\" ✓"),
                    .bytea([0, 9, 0]), .uuid(uuid), .timestamptzMicroseconds(1_234_567_890_123_456),
                    .text(#"{"a": [1, "x"]}"#), .null,
                ]
            )
            #expect(inserted.affectedRows == 1)
            let row = try #require(try await pool.query("SELECT * FROM everything").first)
            #expect(try row["b"].bool == true)
            #expect(try row["i"].int32 == -7)
            #expect(try row["l"].int64 == 1 << 50)
            #expect(try row["d"].double == 2.5)
            #expect(try row["t"].string == "it's \"quoted\" ✓")
            #expect(try row["y"].bytes == [0, 9, 0])
            #expect(try row["u"].uuid == uuid)
            #expect(try row["ts"].microsecondsSinceEpoch == 1_234_567_890_123_456)
            #expect(try row["j"].string == #"{"a": [1, "x"]}"#)
            #expect(try row["n"].isNull)
        }
    }

    @Test func injectionAttemptStaysData() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            try await pool.query("CREATE TABLE users (name text NOT NULL)")
            let hostile = "x'); DROP TABLE users; --"
            try await pool.query("INSERT INTO users (name) VALUES ($1)", [.text(hostile)])
            let statement: PostgresStatement = "SELECT count(*) FROM users WHERE name = \(hostile)"
            #expect(try await pool.query(statement)[0][0].int == 1)
            let names = try await pool.query("SELECT name FROM users").map { try $0[0].string }
            #expect(names == [hostile])
            let quoteOnly = try await pool.query("SELECT count(*) FROM users WHERE name = $1", [.text("' OR '1'='1")])
            #expect(try quoteOnly[0][0].int == 0)
        }
    }

    @Test func literalsAndEncodableTypes() {
        let values: [PostgresValue] = ["text", 42, true, 1.5, nil]
        #expect(values == [.text("text"), .int64(42), .bool(true), .double(1.5), .null])
        #expect(Int32(3).postgresValue == .int32(3))
        let nothing: String? = nil
        let statement: PostgresStatement = "SELECT \(nothing)"
        #expect(statement.parameters == [.null])
        #expect([UInt8]([1, 2]).postgresValue == .bytea([1, 2]))
        let date = Date(timeIntervalSince1970: 5)
        #expect(date.postgresValue == .timestamptz(date))
    }
}
