import AuthRPC
import Testing

/// Expects `body` to fail with an RPC error of `code` and `reason`; returns the error (nil, with
/// an issue recorded, when the call succeeded or failed otherwise). The one copy for every test
/// target.
@discardableResult
public func expectRPCError(
    _ code: RPCError.Code,
    _ reason: String,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> some Any
) async -> RPCError? {
    do {
        _ = try await body()
        Issue.record("expected \(code) \(reason), but the call succeeded", sourceLocation: sourceLocation)
        return nil
    } catch let error as RPCError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        #expect(error.reason == reason, "\(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected an RPCError \(reason), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}
