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

    /// Checks the limits a server applies to metadata as received on the wire, before
    /// ``init(proto:)`` merges repeated keys (so 1,000 entries of one key are 1,000 entries,
    /// and every one of them is checked); `nil` when acceptable.
    public static func violation(in proto: Auth_Rpc_V1_Metadata) -> String? {
        if proto.extra.count > maxExtraEntries { return "too many metadata entries" }
        let limit = maxValueLength
        if proto.requestID.utf8.count > limit || proto.traceparent.utf8.count > limit
            || proto.tracestate.utf8.count > limit
            || proto.callerService.utf8.count > limit || proto.endUserIP.utf8.count > limit
        {
            return "metadata value too long"
        }
        for entry in proto.extra {
            if entry.value.utf8.count > limit { return "metadata value too long" }
            if entry.key.isEmpty || entry.key.utf8.count > 64 || !entry.key.utf8.allSatisfy(isKeyByte) {
                return "metadata key must be lowercase ASCII"
            }
        }
        return nil
    }

    /// Checks the limits a server applies to metadata it receives; `nil` when acceptable.
    /// (A server checks the wire form with ``violation(in:)``: this value has merged repeated keys.)
    public func violation() -> String? {
        if extra.count > Self.maxExtraEntries { return "too many metadata entries" }
        let limit = Self.maxValueLength
        if requestID.utf8.count > limit || traceparent.utf8.count > limit || tracestate.utf8.count > limit
            || callerService.utf8.count > limit || endUserIP.utf8.count > limit
        {
            return "metadata value too long"
        }
        for (key, value) in extra {
            if value.utf8.count > limit { return "metadata value too long" }
            if key.isEmpty || key.utf8.count > 64 || !key.utf8.allSatisfy(Self.isKeyByte) {
                return "metadata key must be lowercase ASCII"
            }
        }
        return nil
    }

    private static func isKeyByte(_ byte: UInt8) -> Bool {
        (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == 0x2D || byte == 0x5F || byte == 0x2E
    }
}
