import AuthRPC

/// The one shape of a service's error: a ``Code`` (a stable reason with the RPC status it
/// travels as), a message for people and logs, the details a caller may act on, and the cause
/// for logs. Each service names its own errors by a domain: `IdentityError` is
/// `ServiceError<IdentityErrors>`, and its codes are statics of `ServiceError<IdentityErrors>.Code`
/// declared in the service, so codes of different services never mix.
public struct ServiceError<Domain>: Error, Sendable, CustomStringConvertible {
    /// What went wrong: a stable reason (snake_case, from the service's .proto) and its status.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The reason sent on the wire, e.g. `email_taken`.
        public let reason: String
        /// The RPC status code it is sent with.
        public let status: RPCError.Code

        public init(_ reason: String, _ status: RPCError.Code) {
            self.reason = reason
            self.status = status
        }

        public var description: String { reason }
    }

    public var code: Code
    /// For people and logs; never parsed by programs. Holds no password, code, token or secret.
    public var message: String
    /// For `RESOURCE_EXHAUSTED` and the like: seconds until a new try can succeed.
    public var retryAfterSeconds: UInt32?
    /// After a wrong code: how many more the destination may try.
    public var attemptsRemaining: UInt32?
    /// The request's broken fields.
    public var fieldViolations: [RPCError.FieldViolation]
    /// The underlying error, for logs.
    public var cause: (any Error & Sendable)?

    public init(
        _ code: Code,
        _ message: String,
        retryAfterSeconds: UInt32? = nil,
        attemptsRemaining: UInt32? = nil,
        fieldViolations: [RPCError.FieldViolation] = [],
        cause: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
        self.attemptsRemaining = attemptsRemaining
        self.fieldViolations = fieldViolations
        self.cause = cause
    }

    public var description: String {
        var text = "\(code.reason): \(message)"
        if let cause { text += " (cause: \(cause))" }
        return text
    }
}

extension ServiceError: RPCErrorConvertible {
    /// The status a caller gets: INTERNAL says nothing more than "Internal error.".
    public var rpcError: RPCError {
        if code.status == .internal {
            return RPCError(code: .internal, message: "Internal error.", reason: code.reason)
        }
        return RPCError(
            code: code.status,
            message: message,
            reason: code.reason,
            retryAfterSeconds: retryAfterSeconds,
            attemptsRemaining: attemptsRemaining,
            fieldViolations: fieldViolations
        )
    }
}
