import AuthPostgres
import Foundation
import Testing

@Suite("PostgresStatement interpolation")
struct PostgresStatementTests {
    @Test func interpolatedValuesBecomeParameters() {
        let email = "a@example.com'; DROP TABLE users; --"
        let limit = 10
        let missing: String? = nil
        let statement: PostgresStatement =
            "SELECT * FROM users WHERE email = \(email) AND active = \(true) AND note = \(missing) LIMIT \(limit)"
        #expect(statement.sql == "SELECT * FROM users WHERE email = $1 AND active = $2 AND note = $3 LIMIT $4")
        #expect(statement.parameters == [.text(email), .bool(true), .null, .int64(10)])
    }

    @Test func identifiersAreQuoted() {
        let schema = "odd\"name"
        let statement: PostgresStatement = "SELECT * FROM \(identifier: schema).sessions WHERE id = \(Int32(1))"
        #expect(statement.sql == #"SELECT * FROM "odd""name".sessions WHERE id = $1"#)
        #expect(statement.parameters == [.int32(1)])
    }

    @Test func plainLiteralHasNoParameters() {
        let statement: PostgresStatement = "SELECT 1"
        #expect(statement.sql == "SELECT 1")
        #expect(statement.parameters.isEmpty)
        #expect(PostgresStatement("SELECT $1", [.int64(1)]).parameters == [.int64(1)])
    }

    @Test func aSchemaIsQuotedOnce() {
        let schema = PostgresSchema("odd\"name")
        let statement: PostgresStatement = "SELECT * FROM \(schema).users WHERE id = \(Int32(7))"
        #expect(statement.sql == #"SELECT * FROM "odd""name".users WHERE id = $1"#)
        #expect(schema.name == "odd\"name")
    }

    @Test func aFragmentsPlaceholdersFollowTheStatementsOwn() {
        let columns: PostgresStatement = "id, name"
        let condition: PostgresStatement = "kind = \("a") AND n > \(10) AND m < \(11) AND o = \(12) AND p = \(13)"
        let statement: PostgresStatement = """
            SELECT \(columns) FROM t WHERE x = \("first") AND \(condition) AND y = \("last")
            """
        #expect(
            statement.sql
                == "SELECT id, name FROM t WHERE x = $1 AND kind = $2 AND n > $3 AND m < $4 AND o = $5 AND p = $6 AND y = $7"
        )
        #expect(
            statement.parameters == [
                .text("first"), .text("a"), .int64(10), .int64(11), .int64(12), .int64(13), .text("last"),
            ]
        )
        // Two-digit placeholders renumber whole, and `$` without a digit stays.
        var many = PostgresStatement.StringInterpolation(literalCapacity: 0, interpolationCount: 0)
        for value in 0..<10 {
            many.appendInterpolation(value)
            many.appendLiteral(",")
        }
        let fragment = PostgresStatement(stringInterpolation: many)
        let outer: PostgresStatement = "SELECT \(1), '$$', \(fragment)"
        #expect(outer.sql == "SELECT $1, '$$', $2,$3,$4,$5,$6,$7,$8,$9,$10,$11,")
        #expect(outer.parameters.count == 11)
    }
}
