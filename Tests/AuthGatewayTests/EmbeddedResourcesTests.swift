import AuthTestSupport
import Foundation
import NIOCore
import Testing

@testable import AuthGateway

@Suite struct EmbeddedResourcesTests {
    @Test func theServedOpenAPIDocumentIsTheFileInTheSourceTree() throws {
        let file = try Data(contentsOf: SourceTreeResources.url(target: "AuthGateway", path: "openapi.json"))
        #expect(file.count > 1000)
        #expect(Array(GatewayApplication.openAPIDocument.readableBytesView) == Array(file))
    }
}
