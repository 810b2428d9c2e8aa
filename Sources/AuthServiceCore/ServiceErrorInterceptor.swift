import AuthPostgres
import AuthRPC
import Logging

/// The services' one conversion of what a handler throws into the status its caller gets, run
/// around every method (``RPCServerInterceptor``). A service's own error type travels as it
/// says (``RPCErrorConvertible``); PostgreSQL's unavailability (connection lost or refused, the
/// pool's wait timed out, the pool closed) becomes UNAVAILABLE `unavailable`, a statement
/// timeout DEADLINE_EXCEEDED `deadline_exceeded`, a cancelled statement or task CANCELLED
/// `cancelled`; any other failure (a statement, a cryptographic operation, anything
/// unexpected) INTERNAL `internal` with no detail. INTERNAL and UNAVAILABLE are logged with the
/// error that caused them, at error level, once per call.
public struct ServiceErrorInterceptor: RPCServerInterceptor {
    /// The service's name in messages: `identity`, `otp`, `session`.
    public let service: String
    public let logger: Logger

    public init(service: String, logger: Logger) {
        self.service = service
        self.logger = logger
    }

    public func intercept(
        context: ServerContext,
        next: @Sendable (ServerContext) async throws -> [UInt8]
    ) async throws -> [UInt8] {
        do {
            return try await next(context)
        } catch {
            let status = Self.status(of: error, service: service)
            if status.code == .internal || status.code == .unavailable {
                logger.error(
                    "RPC call failed",
                    metadata: [
                        "rpc.method": "\(context.method.path)", "rpc.reason": "\(status.reason)", "error": "\(error)",
                    ]
                )
            }
            throw status
        }
    }

    /// What `error` is on the wire.
    public static func status(of error: any Error, service: String) -> RPCError {
        switch error {
        case let error as RPCError:
            return error
        case let error as any RPCErrorConvertible:
            return error.rpcError
        case is CancellationError:
            return cancelled
        case let error as PostgresError:
            if error.isUnavailable || error.code == .poolTimeout || error.code == .closed {
                return RPCError(
                    code: .unavailable,
                    message: "The \(service) database is unavailable.",
                    reason: RPCError.Reason.unavailable
                )
            }
            switch error.code {
            case .timeout:
                return RPCError(
                    code: .deadlineExceeded,
                    message: "A database statement timed out.",
                    reason: RPCError.Reason.deadlineExceeded
                )
            case .cancelled:
                return cancelled
            default:
                return internalError
            }
        default:
            // CryptoError and anything unexpected: nothing of it reaches the caller.
            return internalError
        }
    }

    static let cancelled = RPCError(
        code: .cancelled,
        message: "The call was cancelled.",
        reason: RPCError.Reason.cancelled
    )
    static let internalError = RPCError(code: .internal, message: "Internal error.", reason: RPCError.Reason.`internal`)
}

/// An error that is not `Sendable`, kept as its description (a service error's `cause`).
public struct DescribedError: Error, Sendable, CustomStringConvertible {
    public var description: String

    public init(description: String) {
        self.description = description
    }
}
