import AuthPostgres
import AuthTestSupport
import Testing

@testable import OTPService

@Suite struct EmbeddedResourcesTests {
    @Test func theEmbeddedMigrationsAreEveryFileOfTheMigrationsFolder() throws {
        let embedded = try OTPService.migrations()
        #expect(!embedded.isEmpty)
        #expect(embedded == (try SourceTreeResources.migrations(target: "OTPService")))
    }
}
