// A stand-in for the AuthRPC API the generated service stubs use (the shapes docs/codegen.md names),
// so scripts/codegen/selftest.sh can build the stubs without the real RPC runtime.
import AuthProtobuf

public struct MethodDescriptor: Sendable, Hashable {
    public init(service: String, method: String) {}
}

public struct ServerContext: Sendable {
    public init() {}
}

/// Who may call a method.
public struct AllowedCallers: Sendable, Hashable {
    public let names: Set<String>?

    public static func only(_ names: Set<String>) -> AllowedCallers { AllowedCallers(names: names) }
    public static let anyAuthenticated = AllowedCallers(names: nil)
}

public struct RPCRouter: Sendable {
    public var count = 0
    public var allowed: [AllowedCallers] = []

    public init() {}

    public mutating func register<Request: ProtobufCMessage, Response: ProtobufCMessage>(
        _ method: MethodDescriptor,
        allowedCallers: AllowedCallers,
        handler: @escaping @Sendable (Request, ServerContext) async throws -> Response
    ) {
        self.count += 1
        self.allowed.append(allowedCallers)
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
