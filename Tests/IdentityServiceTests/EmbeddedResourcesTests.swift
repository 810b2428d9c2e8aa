import AuthPostgres
import AuthTestSupport
import Foundation
import Testing

@testable import IdentityService

@Suite struct EmbeddedResourcesTests {
    @Test func theEmbeddedMigrationsAreEveryFileOfTheMigrationsFolder() throws {
        let embedded = try IdentityService.migrations()
        #expect(!embedded.isEmpty)
        #expect(embedded == (try SourceTreeResources.migrations(target: "IdentityService")))
    }

    @Test func theEmbeddedBlocklistIsTheFileInTheSourceTree() throws {
        let file = try String(
            contentsOf: SourceTreeResources.url(
                target: "IdentityService",
                path: "PasswordBlocklist/common-passwords.txt"
            ),
            encoding: .utf8
        )
        let words = file.split(separator: "\n").map(String.init).filter { !$0.isEmpty }
        let bundled = try PasswordBlocklist.bundled()
        #expect(bundled.count == Set(words.map { $0.lowercased() }).count)
        #expect(words.allSatisfy { bundled.contains($0) })
    }
}
