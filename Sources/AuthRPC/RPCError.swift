import AuthProtobuf

/// The outcome of a failed call: a gRPC status code, a human message, a machine-readable
/// reason and typed details. This is the one error type of the RPC layer; domain errors
/// become an `RPCError` through ``RPCErrorConvertible`` in one place.
public struct RPCError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A status code, numbered as gRPC numbers them.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        /// The gRPC code number (0 ... 16).
        public let rawValue: Int

        public init(rawValue: Int) { self.rawValue = rawValue }

        public static let ok = Code(rawValue: 0)
        public static let cancelled = Code(rawValue: 1)
        public static let unknown = Code(rawValue: 2)
        public static let invalidArgument = Code(rawValue: 3)
        public static let deadlineExceeded = Code(rawValue: 4)
        public static let notFound = Code(rawValue: 5)
        public static let alreadyExists = Code(rawValue: 6)
        public static let permissionDenied = Code(rawValue: 7)
        public static let resourceExhausted = Code(rawValue: 8)
        public static let failedPrecondition = Code(rawValue: 9)
        public static let aborted = Code(rawValue: 10)
        public static let outOfRange = Code(rawValue: 11)
        public static let unimplemented = Code(rawValue: 12)
        public static let `internal` = Code(rawValue: 13)
        public static let unavailable = Code(rawValue: 14)
        public static let dataLoss = Code(rawValue: 15)
        public static let unauthenticated = Code(rawValue: 16)

        private static let names = [
            "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
            "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
            "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
            "UNAUTHENTICATED",
        ]

        public var description: String {
            Self.names.indices.contains(rawValue) ? Self.names[rawValue] : "CODE_\(rawValue)"
        }
    }

    /// A field that failed validation.
    public struct FieldViolation: Sendable, Hashable {
        public var field: String
        public var reason: String
        public var description: String

        public init(field: String, reason: String, description: String = "") {
            self.field = field
            self.reason = reason
            self.description = description
        }
    }

    public var code: Code
    /// For people reading logs; clients must not parse it.
    public var message: String
    /// Stable, snake_case, for programs: `code_expired`, `refresh_token_reused`, ….
    public var reason: String
    /// When the caller may try again.
    public var retryAfterSeconds: UInt32?
    /// How many more attempts the caller has (e.g. wrong codes left).
    public var attemptsRemaining: UInt32?
    public var fieldViolations: [FieldViolation]

    public init(
        code: Code,
        message: String,
        reason: String = "",
        retryAfterSeconds: UInt32? = nil,
        attemptsRemaining: UInt32? = nil,
        fieldViolations: [FieldViolation] = []
    ) {
        self.code = code
        self.message = message
        self.reason = reason
        self.retryAfterSeconds = retryAfterSeconds
        self.attemptsRemaining = attemptsRemaining
        self.fieldViolations = fieldViolations
    }

    public var description: String {
        var text = "\(code): \(message)"
        if !reason.isEmpty { text += " [\(reason)]" }
        return text
    }
}

extension RPCError {
    /// The wire form of this error.
    public var status: Auth_Rpc_V1_Status {
        var status = Auth_Rpc_V1_Status()
        status.code = Auth_Rpc_V1_StatusCode(rawValue: Int32(code.rawValue))
        status.message = message
        status.reason = reason
        if retryAfterSeconds != nil || attemptsRemaining != nil || !fieldViolations.isEmpty {
            var details = Auth_Rpc_V1_StatusDetails()
            if let retryAfterSeconds {
                details.retry = Auth_Rpc_V1_RetryInfo(retryAfterSeconds: retryAfterSeconds)
            }
            if let attemptsRemaining {
                details.attempts = Auth_Rpc_V1_AttemptsInfo(attemptsRemaining: attemptsRemaining)
            }
            details.fieldViolations = fieldViolations.map {
                Auth_Rpc_V1_FieldViolation(field: $0.field, reason: $0.reason, description: $0.description)
            }
            status.details = details
        }
        return status
    }

    /// Reads an error from its wire form. A status whose code is OK is not an error: `nil`.
    public init?(status: Auth_Rpc_V1_Status) {
        let raw = Int(status.code.rawValue)
        guard raw != 0 else { return nil }
        self.init(
            code: Code(rawValue: raw),
            message: status.message,
            reason: status.reason,
            retryAfterSeconds: status.details?.retry?.retryAfterSeconds,
            attemptsRemaining: status.details?.attempts?.attemptsRemaining,
            fieldViolations: status.details?.fieldViolations.map {
                FieldViolation(field: $0.field, reason: $0.reason, description: $0.description)
            } ?? []
        )
    }
}

/// An error that knows which status it is on the wire. Domain error types conform to this,
/// so a handler can throw them and the server converts them in one place.
public protocol RPCErrorConvertible: Error {
    var rpcError: RPCError { get }
}

extension RPCError {
    /// Converts any error thrown by a handler. Unknown errors become INTERNAL without their
    /// text, so nothing internal leaks to a caller.
    public init(converting error: any Error) {
        switch error {
        case let error as RPCError:
            self = error
        case let error as any RPCErrorConvertible:
            self = error.rpcError
        case is CancellationError:
            self = RPCError(code: .cancelled, message: "The call was cancelled.", reason: RPCError.Reason.cancelled)
        default:
            self = RPCError(code: .internal, message: "Internal error.", reason: RPCError.Reason.`internal`)
        }
    }
}
