internal import CProtobufC

/// The link between a generated Swift message and its protoc-c struct. Every generated message
/// conforms; the conformance is internal so the C types never appear in the public API.
///
/// Descriptors are never touched directly: the generated `*__init`, `*__pack`, `*__unpack`
/// functions take them from the C side, where their address is right in every build mode.
protocol ProtobufCBridged: ProtobufCMessage {
    associatedtype _CMessage

    /// `<name>__init`: sets the descriptor and every field to its default.
    static func _cInit(_ message: UnsafeMutablePointer<_CMessage>)
    /// `<name>__unpack` with the default allocator; NULL when the input cannot be parsed.
    static func _cUnpack(_ length: Int, _ data: UnsafePointer<UInt8>?) -> UnsafeMutablePointer<_CMessage>?
    /// `<name>__free_unpacked` with the default allocator.
    static func _cFreeUnpacked(_ message: UnsafeMutablePointer<_CMessage>)
    /// `<name>__get_packed_size`.
    static func _cPackedSize(_ message: UnsafePointer<_CMessage>) -> Int
    /// `<name>__pack`: writes exactly `_cPackedSize` bytes.
    static func _cPack(_ message: UnsafePointer<_CMessage>, _ out: UnsafeMutablePointer<UInt8>) -> Int

    /// Copies an unpacked C message into Swift values.
    init(_cMessage message: UnsafePointer<_CMessage>) throws

    /// Fills an initialized C message; everything it points to is allocated in `arena`.
    func _fill(_ message: UnsafeMutablePointer<_CMessage>, arena: inout ProtobufCArena) throws
}

extension ProtobufCBridged {
    @inline(__always)
    static func _decode(_ bytes: UnsafeRawBufferPointer) throws -> Self {
        // protobuf-c never reads `data` when the length is 0, so a nil base address is fine.
        let data = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
        guard let message = Self._cUnpack(bytes.count, data) else {
            throw ProtobufCError(.malformedInput, Self.self)
        }
        defer { Self._cFreeUnpacked(message) }
        return try Self(_cMessage: message)
    }

    @inline(__always)
    func _encodeBridged(_ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        try withUnsafeTemporaryAllocation(byteCount: ProtobufCArena.stackCapacity, alignment: 16) { stack in
            var arena = ProtobufCArena(initialChunk: stack)
            let message = arena.allocate(Self._CMessage.self)
            Self._cInit(message)
            try self._fill(message, arena: &arena)
            let size = Self._cPackedSize(message)
            guard size < ProtobufCArena.maximumLength else {
                throw ProtobufCError(.unsupportedValue, Self.self)
            }
            let out = arena.allocate(UInt8.self, count: size)
            let written = Self._cPack(message, out)
            precondition(written == size, "protobuf-c packed \(written) bytes after promising \(size)")
            try body(UnsafeRawBufferPointer(start: out, count: written))
            // The arena (and so `out`) must outlive `body`; end its lifetime explicitly here.
            _ = consume arena
        }
    }
}

// MARK: - Decoding helpers for the generated `init(_cMessage:)`

/// A string field. protobuf-c has already bounded the length by the input; only UTF-8 validity
/// remains to be checked (protobuf-c accepts any bytes).
@inline(__always)
func _protobufCString(
    _ pointer: UnsafePointer<CChar>?,
    _ message: any ProtobufCMessage.Type,
    _ field: StaticString
) throws -> String {
    guard let pointer, pointer.pointee != 0 else { return "" }
    guard let string = String(validatingCString: pointer) else {
        throw ProtobufCError(.invalidUTF8, message, field)
    }
    return string
}

@inline(__always)
func _protobufCBytes(_ data: ProtobufCBinaryData) -> [UInt8] {
    guard data.len > 0, let base = data.data else { return [] }
    return [UInt8](UnsafeBufferPointer(start: base, count: data.len))
}

/// A message-typed oneof member: protobuf-c always allocates it, but a NULL would mean "empty".
@inline(__always)
func _protobufCMessage<M: ProtobufCBridged>(_ pointer: UnsafePointer<M._CMessage>?, as _: M.Type) throws -> M {
    guard let pointer else { return M() }
    return try M(_cMessage: pointer)
}

/// A singular message field: NULL means absent.
@inline(__always)
func _protobufCOptionalMessage<M: ProtobufCBridged>(
    _ pointer: UnsafePointer<M._CMessage>?,
    as _: M.Type
) throws -> M? {
    guard let pointer else { return nil }
    return try M(_cMessage: pointer)
}

func _protobufCScalars<T: BitwiseCopyable>(_ pointer: UnsafePointer<T>?, count: Int) -> [T] {
    guard count > 0, let pointer else { return [] }
    return [T](UnsafeBufferPointer(start: pointer, count: count))
}

func _protobufCBools(_ pointer: UnsafePointer<protobuf_c_boolean>?, count: Int) -> [Bool] {
    guard count > 0, let pointer else { return [] }
    return UnsafeBufferPointer(start: pointer, count: count).map { $0 != 0 }
}

func _protobufCEnums<C: RawRepresentable, E: ProtobufCEnum>(
    _ pointer: UnsafePointer<C>?,
    count: Int
) -> [E] where C.RawValue: FixedWidthInteger {
    guard count > 0, let pointer else { return [] }
    return UnsafeBufferPointer(start: pointer, count: count).map {
        E(rawValue: Int32(truncatingIfNeeded: $0.rawValue))
    }
}

func _protobufCStrings(
    _ pointer: UnsafePointer<UnsafeMutablePointer<CChar>?>?,
    count: Int,
    _ message: any ProtobufCMessage.Type,
    _ field: StaticString
) throws -> [String] {
    guard count > 0, let pointer else { return [] }
    var strings: [String] = []
    strings.reserveCapacity(count)
    for element in UnsafeBufferPointer(start: pointer, count: count) {
        strings.append(try _protobufCString(element, message, field))
    }
    return strings
}

func _protobufCBytesArray(_ pointer: UnsafePointer<ProtobufCBinaryData>?, count: Int) -> [[UInt8]] {
    guard count > 0, let pointer else { return [] }
    return UnsafeBufferPointer(start: pointer, count: count).map(_protobufCBytes)
}

func _protobufCMessages<M: ProtobufCBridged>(
    _ pointer: UnsafePointer<UnsafeMutablePointer<M._CMessage>?>?,
    count: Int
) throws -> [M] {
    guard count > 0, let pointer else { return [] }
    var messages: [M] = []
    messages.reserveCapacity(count)
    for element in UnsafeBufferPointer(start: pointer, count: count) {
        messages.append(try _protobufCMessage(element, as: M.self))
    }
    return messages
}
