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
}
