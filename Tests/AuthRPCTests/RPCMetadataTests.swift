import AuthProtobuf
import Testing

@testable import AuthRPC

@Suite struct RPCMetadataTests {
    func entries(_ count: Int, key: (Int) -> String, value: String = "v") -> Auth_Rpc_V1_Metadata {
        Auth_Rpc_V1_Metadata(extra: (0..<count).map { Auth_Rpc_V1_MetadataEntry(key: key($0), value: value) })
    }

    @Test func entriesAreCountedBeforeRepeatedKeysMerge() {
        #expect(RPCMetadata.violation(in: entries(32, key: { _ in "k" })) == nil)
        #expect(RPCMetadata.violation(in: entries(33, key: { _ in "k" })) == "too many metadata entries")
        #expect(RPCMetadata.violation(in: entries(33, key: { "k\($0)" })) == "too many metadata entries")
    }

    @Test func everyEntryIsCheckedEvenIfALaterOneReplacesIt() {
        var metadata = Auth_Rpc_V1_Metadata()
        metadata.extra = [
            Auth_Rpc_V1_MetadataEntry(key: "k", value: String(repeating: "x", count: 5000)),
            Auth_Rpc_V1_MetadataEntry(key: "k", value: "short"),
        ]
        #expect(RPCMetadata(proto: metadata).violation() == nil)
        #expect(RPCMetadata.violation(in: metadata) == "metadata value too long")
        metadata.extra = [
            Auth_Rpc_V1_MetadataEntry(key: "Bad Key", value: "x"),
            Auth_Rpc_V1_MetadataEntry(key: "Bad Key", value: "y"),
        ]
        #expect(RPCMetadata.violation(in: metadata) == "metadata key must be lowercase ASCII")
    }
}
