import AuthResources
import Foundation
import Testing

@Suite struct ModuleResourcesTests {
    /// The test runner lives in the build folder, beside every target's resource folder.
    @Test func findsATargetsResourcesNextToTheExecutable() throws {
        let migrations = try #require(ModuleResources(target: "IdentityService").url(forResource: "Migrations"))
        let files = try FileManager.default.contentsOfDirectory(atPath: migrations.path)
        #expect(files.contains("0001_create_identity_schema.sql"))
        #expect(ModuleResources(target: "AuthGateway").url(forResource: "openapi", withExtension: "json") != nil)
    }

    @Test func missingResourcesAreNil() {
        #expect(ModuleResources(target: "IdentityService").url(forResource: "no-such-thing") == nil)
        #expect(ModuleResources(target: "NoSuchTarget").url(forResource: "Migrations") == nil)
    }

    @Test func theExecutableDirectoryHoldsTheRunningExecutable() throws {
        let directory = ModuleResources.executableDirectory
        let entries = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(entries.contains { $0.hasSuffix("PackageTests.xctest") })
    }
}
