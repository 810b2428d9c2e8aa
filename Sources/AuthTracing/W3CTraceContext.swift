import ServiceContextModule

/// A span's identity as W3C Trace Context carries it (`traceparent`, `tracestate`): a
/// 128-bit trace id, a 64-bit span id, and whether the trace is sampled.
public struct W3CTraceContext: Sendable, Hashable {
    public var traceID: TraceID
    public var spanID: UInt64
    public var sampled: Bool
    /// `tracestate`, passed on unchanged (empty: none).
    public var traceState: String

    public struct TraceID: Sendable, Hashable {
        public var high: UInt64
        public var low: UInt64

        public var isValid: Bool { high != 0 || low != 0 }
        public var hex: String { W3CTraceContext.hex(high) + W3CTraceContext.hex(low) }

        /// A random id, never all zeros.
        public static func random<G: RandomNumberGenerator>(using generator: inout G) -> TraceID {
            TraceID(high: generator.next() | 1 << 63, low: generator.next())
        }
    }

    public init(traceID: TraceID, spanID: UInt64, sampled: Bool, traceState: String = "") {
        self.traceID = traceID
        self.spanID = spanID
        self.sampled = sampled
        self.traceState = traceState
    }

    /// `00-<trace id>-<span id>-<flags>`.
    public var traceparent: String {
        "00-\(traceID.hex)-\(Self.hex(spanID))-\(sampled ? "01" : "00")"
    }

    /// Reads a version-00 `traceparent` (W3C Trace Context §3.2; a later version's first four
    /// fields as §3.2.4 says); nil for anything malformed, an all-zero id included.
    public init?(traceparent: String, traceState: String = "") {
        let utf8 = Array(traceparent.utf8)
        guard utf8.count >= 55, utf8[2] == UInt8(ascii: "-"), utf8[35] == UInt8(ascii: "-"),
            utf8[52] == UInt8(ascii: "-")
        else { return nil }
        guard let version = Self.parseHex(utf8[0..<2]), version != 0xff else { return nil }
        if version == 0, utf8.count != 55 { return nil }
        if version != 0, utf8.count > 55, utf8[55] != UInt8(ascii: "-") { return nil }
        guard let high = Self.parseHex(utf8[3..<19]), let low = Self.parseHex(utf8[19..<35]),
            let spanID = Self.parseHex(utf8[36..<52]), let flags = Self.parseHex(utf8[53..<55])
        else { return nil }
        let traceID = TraceID(high: high, low: low)
        guard traceID.isValid, spanID != 0 else { return nil }
        self.init(traceID: traceID, spanID: spanID, sampled: flags & 1 == 1, traceState: traceState)
    }

    /// 16 lower-case hex digits.
    static func hex(_ value: UInt64) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var bytes = [UInt8](repeating: 0, count: 16)
        var rest = value
        for index in (0..<16).reversed() {
            bytes[index] = digits[Int(rest & 0xf)]
            rest >>= 4
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Lower-case hex digits only (W3C Trace Context forbids upper case), at most 16.
    private static func parseHex(_ digits: ArraySlice<UInt8>) -> UInt64? {
        var value: UInt64 = 0
        for digit in digits {
            let nibble: UInt8
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = digit - UInt8(ascii: "a") + 10
            default: return nil
            }
            value = value << 4 | UInt64(nibble)
        }
        return value
    }
}

extension ServiceContext {
    /// The span a context belongs to: a span of this process, or the remote parent a
    /// `traceparent` named.
    public var traceContext: W3CTraceContext? {
        get { self[TraceContextKey.self] }
        set { self[TraceContextKey.self] = newValue }
    }
}

private enum TraceContextKey: ServiceContextKey {
    typealias Value = W3CTraceContext
    static var nameOverride: String? { "w3c-trace-context" }
}
