import AuthPostgres
import AuthTestSupport
import Foundation
import Testing

@Suite("PostgresRows accessors")
struct PostgresRowsTests {
    @Test func accessByIndexAndName() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            let rows = try await pool.query(
                "SELECT x AS number, 'row ' || x AS label FROM generate_series(1, 3) AS x ORDER BY x"
            )
            #expect(rows.count == 3)
            #expect(rows.columns.map(\.name) == ["number", "label"])
            #expect(rows.columns.map(\.dataType) == [.int4, .text])
            #expect(rows.commandTag == "SELECT 3")
            #expect(rows.affectedRows == 3)
            let labels = try rows.map { try $0["label"].string }
            #expect(labels == ["row 1", "row 2", "row 3"])
            #expect(try rows[2][0].int == 3)
            #expect(try rows[1].decode(Int32.self, at: 0) == 2)
            #expect(rows[0].count == 2)
        }
    }

    @Test func unknownColumnNameIsAnError() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            let row = try await pool.query("SELECT 1 AS a")[0]
            let error = #expect(throws: PostgresError.self) { try row["b"].int }
            #expect(error?.code == .decodingFailed)
            #expect(error?.message.contains("\"b\"") == true)
        }
    }

    @Test func typeMismatchIsAClearError() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            let row = try await pool.query("SELECT 'secret-value'::text AS t, 5::int4 AS i, true AS b")[0]
            let intFromText = #expect(throws: PostgresError.self) { try row["t"].int64 }
            #expect(intFromText?.code == .decodingFailed)
            #expect(intFromText?.message.contains("text") == true)
            #expect(intFromText?.message.contains("Int64") == true)
            // Never the value itself.
            #expect(intFromText?.description.contains("secret-value") == false)

            #expect(throws: PostgresError.self) { try row["i"].string }
            #expect(throws: PostgresError.self) { try row["b"].bytes }
            #expect(throws: PostgresError.self) { try row["i"].uuid }
            #expect(throws: PostgresError.self) { try row["t"].date }
        }
    }

    @Test func nullNeedsAnOptional() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            let row = try await pool.query("SELECT NULL::text AS n, 'x'::text AS s")[0]
            #expect(try row["n"].isNull)
            let error = #expect(throws: PostgresError.self) { try row["n"].string }
            #expect(error?.code == .decodingFailed)
            #expect(error?.message.contains("NULL") == true)
            #expect(try row["n"].decode(String?.self) == nil)
            #expect(try row["s"].decode(String?.self) == "x")
        }
    }

    @Test func integerWidthsConvertWhenTheyFit() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            let row = try await pool.query("SELECT 7::int2, 7::int8, 9999999999::int8, 'pg_class'::regclass::oid")[0]
            #expect(try row[0].int64 == 7)
            #expect(try row[1].int32 == 7)
            #expect(try row[2].int64 == 9_999_999_999)
            let overflow = #expect(throws: PostgresError.self) { try row[2].int32 }
            #expect(overflow?.code == .decodingFailed)
            #expect(try row[3].int64 == 1259)
            #expect(try row[1].double == 7)
        }
    }

    @Test func numericAsExactText() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            let cases: [(String, String)] = [
                ("12345.678", "12345.678"), ("-0.001", "-0.001"), ("0", "0"), ("100000000", "100000000"),
                ("0.10", "0.10"), ("-98765432109876543210.0123456789", "-98765432109876543210.0123456789"),
                ("'NaN'", "NaN"), ("1e-10", "0.0000000001"),
            ]
            for (literal, expected) in cases {
                let cell = try await pool.query("SELECT (\(literal))::numeric", [])[0][0]
                #expect(try cell.string == expected, "numeric \(literal)")
            }
            #expect(try await pool.query("SELECT 2.5::numeric")[0][0].double == 2.5)
            // sum() of integers is numeric.
            #expect(try await pool.query("SELECT sum(x::int8) FROM generate_series(1, 10) x")[0][0].string == "55")
        }
    }

    @Test func datesAndInfinity() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            let row = try await pool.query(
                """
                SELECT '2024-02-29'::date, 'infinity'::timestamptz, '-infinity'::timestamptz,
                       '2000-01-01 00:00:01'::timestamp
                """
            )[0]
            #expect(try row[0].date == Date(timeIntervalSince1970: 1_709_164_800))
            #expect(try row[1].date == .distantFuture)
            #expect(try row[2].date == .distantPast)
            #expect(try row[2].microsecondsSinceEpoch == .min)
            #expect(try row[3].date == Date(timeIntervalSince1970: 946_684_801))
        }
    }

    @Test func textLikeTypes() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            try await pool.query("CREATE TYPE mood AS ENUM ('happy', 'sad')")
            let row = try await pool.query(
                """
                SELECT 'a'::varchar, 'b'::char(3), current_schema()::name, '{"k": 1}'::jsonb, '[1]'::json,
                       'sad'::mood
                """
            )[0]
            #expect(try row[0].string == "a")
            #expect(try row[1].string == "b  ")
            #expect(try row[2].string.hasPrefix("test_"))
            #expect(try row[3].string == #"{"k": 1}"#)
            #expect(try row[4].string == "[1]")
            #expect(try row[5].string == "sad")
        }
    }

    @Test func commandTagsAndAffectedRows() async throws {
        try await PostgresTestDatabase.withTestSchema { pool, _ in
            let created = try await pool.query("CREATE TABLE t (x int)")
            #expect(created.commandTag == "CREATE TABLE")
            #expect(created.affectedRows == nil)
            #expect(created.isEmpty)
            let inserted = try await pool.query("INSERT INTO t SELECT generate_series(1, 5)")
            #expect(inserted.commandTag == "INSERT 0 5")
            #expect(inserted.affectedRows == 5)
            #expect(try await pool.query("UPDATE t SET x = x + 1 WHERE x > $1", [.int32(2)]).affectedRows == 3)
            #expect(try await pool.query("DELETE FROM t").affectedRows == 5)
        }
    }
}
