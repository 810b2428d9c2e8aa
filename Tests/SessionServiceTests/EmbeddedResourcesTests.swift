import AuthPostgres
import AuthTestSupport
import Testing

@testable import SessionService

@Suite struct EmbeddedResourcesTests {
    @Test func theEmbeddedMigrationsAreEveryFileOfTheMigrationsFolder() throws {
        let embedded = try SessionService.migrations()
        #expect(!embedded.isEmpty)
        #expect(embedded == (try SourceTreeResources.migrations(target: "SessionService")))
    }
}
