import AuthPostgres
import Testing

/// Expects `body` to fail with SQLSTATE 23514 (`checkViolation`) naming `constraint`: a table's
/// `CHECK` or a domain's check refused a value. The one copy for every service's schema tests.
public func expectCheckViolation(
    _ constraint: String,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> some Any
) async throws {
    do {
        _ = try await body()
        Issue.record("stored a value \(constraint) refuses", sourceLocation: sourceLocation)
    } catch let error as PostgresError {
        #expect(error.code == .checkViolation, "\(error)", sourceLocation: sourceLocation)
        #expect(error.constraint == constraint, "\(error)", sourceLocation: sourceLocation)
    }
}
