// A stand-in for the AuthRPC API the generated service stubs use (the shapes docs/codegen.md names),
// so scripts/codegen/selftest.sh can build the stubs without the real RPC runtime.
import AuthProtobuf

public struct MethodDescriptor: Sendable, Hashable {
    public init(service: String, method: String) {}
}

public struct ServerContext: Sendable {
    public init() {}
}

public struct RPCRouter: Sendable {
    public var count = 0

    public init() {}

    public mutating func register<Request: ProtobufCMessage, Response: ProtobufCMessage>(
        _ method: MethodDescriptor,
        handler: @escaping @Sendable (Request, ServerContext) async throws -> Response
    ) {
        self.count += 1
    }
}

public protocol RegistrableRPCService: Sendable {
    func registerMethods(with router: inout RPCRouter)
}

public struct CallOptions: Sendable {
    public init() {}
}

/// Loops the request back as the response, through the wire form.
public struct RPCClient: Sendable {
    public init() {}

    public func unary<Request: ProtobufCMessage, Response: ProtobufCMessage>(
        _ method: MethodDescriptor,
        request: Request,
        options: CallOptions
    ) async throws -> Response {
        try Response(serializedBytes: request.serializedBytes())
    }
}
