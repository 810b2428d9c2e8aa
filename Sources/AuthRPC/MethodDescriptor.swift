/// Names one method of one service, as `/auth.<area>.v1.<Service>/<Method>` on the wire.
public struct MethodDescriptor: Sendable, Hashable, CustomStringConvertible {
    /// The fully qualified service name, e.g. `auth.health.v1.Health`.
    public let service: String
    /// The method name, e.g. `Check`.
    public let method: String
    /// The path sent in a request frame, e.g. `/auth.health.v1.Health/Check`.
    public let path: String

    public init(service: String, method: String) {
        self.service = service
        self.method = method
        self.path = "/\(service)/\(method)"
    }

    public var description: String { path }
}
