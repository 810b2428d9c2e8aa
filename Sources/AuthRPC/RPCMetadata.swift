import AuthProtobuf

/// Per-call metadata: what a call carries besides its message.
///
/// A server copies `requestID`, `traceparent`, `tracestate` and `endUserIP` of the call it
/// is serving into every call it makes while serving it (``RPCClient`` does this through
/// ``ServerContext/current``); `callerService` is always the name of the service that sends.
public struct RPCMetadata: Sendable, Hashable {
    public var requestID: String
    /// W3C Trace Context `traceparent`.
    public var traceparent: String
    public var tracestate: String
    public var callerService: String
    /// The end user's IP address as the gateway saw it.
    public var endUserIP: String
    /// Other keys, lowercase ASCII.
    public var extra: [String: String]

    public init(
        requestID: String = "",
        traceparent: String = "",
        tracestate: String = "",
        callerService: String = "",
        endUserIP: String = "",
        extra: [String: String] = [:]
    ) {
        self.requestID = requestID
        self.traceparent = traceparent
        self.tracestate = tracestate
        self.callerService = callerService
        self.endUserIP = endUserIP
        self.extra = extra
    }

    /// The most entries `extra` may hold on the wire.
    public static let maxExtraEntries = 32
    /// The longest any one metadata value may be on the wire.
    public static let maxValueLength = 1024
}

extension RPCMetadata {
    public init(proto: Auth_Rpc_V1_Metadata) {
        var extra: [String: String] = [:]
        for entry in proto.extra { extra[entry.key] = entry.value }
        self.init(
            requestID: proto.requestID,
            traceparent: proto.traceparent,
            tracestate: proto.tracestate,
            callerService: proto.callerService,
            endUserIP: proto.endUserIP,
            extra: extra
        )
    }

    public var proto: Auth_Rpc_V1_Metadata {
        Auth_Rpc_V1_Metadata(
            requestID: requestID,
            traceparent: traceparent,
            tracestate: tracestate,
            callerService: callerService,
            endUserIP: endUserIP,
            extra: extra.sorted { $0.key < $1.key }.map { Auth_Rpc_V1_MetadataEntry(key: $0.key, value: $0.value) }
        )
    }

    /// Checks the limits a server applies to metadata it receives; `nil` when acceptable.
    public func violation() -> String? {
        if extra.count > Self.maxExtraEntries { return "too many metadata entries" }
        let values = [requestID, traceparent, tracestate, callerService, endUserIP] + Array(extra.values)
        if values.contains(where: { $0.utf8.count > Self.maxValueLength }) { return "metadata value too long" }
        for key in extra.keys where key.isEmpty || key.utf8.count > 64
            || !key.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D || $0 == 0x5F || $0 == 0x2E })
        {
            return "metadata key must be lowercase ASCII"
        }
        return nil
    }
}
