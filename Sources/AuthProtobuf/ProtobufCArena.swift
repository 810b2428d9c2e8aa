internal import CProtobufC

#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#elseif canImport(Darwin)
internal import Darwin
#endif

/// A bump allocator that owns every C allocation made while encoding one message: the protoc-c
/// structs, their strings, bytes and arrays, and the packed output.
///
/// The first chunk is caller-provided (the encoder uses a stack buffer, so small messages make
/// no heap allocation at all); further chunks come from the heap and are freed together in
/// `deinit`. Because the arena is non-copyable and lives in the encoding call's scope, memory is
/// released however that scope ends, including by an error thrown half-way through filling in
/// the C structs.
struct ProtobufCArena: ~Copyable {
    /// Size of the stack buffer the encoder hands to a new arena.
    static let stackCapacity = 1024

    /// The largest string, bytes value or message that can be encoded. protobuf-c writes lengths
    /// as 32-bit varints and protobuf itself limits messages to 2 GiB.
    static let maximumLength = Int(Int32.max)

    // Every heap chunk starts with this header: a pointer to the previous chunk, padded so the
    // payload is 16-byte aligned.
    private static let chunkHeader = 16
    private static let firstHeapChunk = 4096
    private static let largestHeapChunk = 256 * 1024

    private var cursor: UnsafeMutableRawPointer
    private var remaining: Int
    private var lastChunk: UnsafeMutableRawPointer?
    private var nextChunkSize: Int

    init(initialChunk: UnsafeMutableRawBufferPointer) {
        // A zero-capacity first chunk is allowed: the first allocation then goes to the heap.
        self.cursor = initialChunk.baseAddress ?? UnsafeMutableRawPointer(bitPattern: Self.chunkHeader)!
        self.remaining = initialChunk.baseAddress == nil ? 0 : initialChunk.count
        self.lastChunk = nil
        self.nextChunkSize = Self.firstHeapChunk
    }

    deinit {
        var chunk = self.lastChunk
        while let current = chunk {
            chunk = current.load(as: UnsafeMutableRawPointer?.self)
            current.deallocate()
        }
    }

    /// Uninitialized memory valid until the arena is destroyed. `alignment` is a power of two ≤ 16.
    @inline(__always)
    mutating func allocate(byteCount: Int, alignment: Int) -> UnsafeMutableRawPointer {
        let mask = UInt(alignment &- 1)
        let padding = Int(bitPattern: (0 &- UInt(bitPattern: Int(bitPattern: self.cursor))) & mask)
        if byteCount <= self.remaining &- padding {
            let pointer = self.cursor + padding
            self.cursor = pointer + byteCount
            self.remaining &-= padding &+ byteCount
            return pointer
        }
        return self.allocateFromNewChunk(byteCount: byteCount, alignment: alignment)
    }

    @inline(never)
    private mutating func allocateFromNewChunk(byteCount: Int, alignment: Int) -> UnsafeMutableRawPointer {
        precondition(alignment <= Self.chunkHeader && byteCount >= 0)
        let header = Self.chunkHeader
        if byteCount > self.nextChunkSize / 4 {
            // Big values get a chunk of their own; the current chunk stays in use for small ones.
            let chunk = UnsafeMutableRawPointer.allocate(byteCount: header + byteCount, alignment: header)
            self.link(chunk)
            return chunk + header
        }
        let size = self.nextChunkSize
        self.nextChunkSize = min(size * 2, Self.largestHeapChunk)
        let chunk = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: header)
        self.link(chunk)
        self.cursor = chunk + header + byteCount
        self.remaining = size - header - byteCount
        return chunk + header
    }

    private mutating func link(_ chunk: UnsafeMutableRawPointer) {
        chunk.storeBytes(of: self.lastChunk, as: UnsafeMutableRawPointer?.self)
        self.lastChunk = chunk
    }

    /// Memory for `count` values of `T`, bound to `T` and uninitialized.
    @inline(__always)
    mutating func allocate<T>(_: T.Type, count: Int = 1) -> UnsafeMutablePointer<T> {
        self.allocate(byteCount: MemoryLayout<T>.stride * count, alignment: MemoryLayout<T>.alignment)
            .bindMemory(to: T.self, capacity: count)
    }
}

// MARK: - Typed helpers for the generated `_fill` methods

extension ProtobufCArena {
    /// A NUL-terminated copy of `value`.
    mutating func cString(
        _ value: String,
        _ message: any ProtobufCMessage.Type,
        _ field: StaticString
    ) throws -> UnsafeMutablePointer<CChar> {
        var value = value
        return try value.withUTF8 { utf8 in
            try self.cString(utf8: utf8, message, field)
        }
    }

    private mutating func cString(
        utf8: UnsafeBufferPointer<UInt8>,
        _ message: any ProtobufCMessage.Type,
        _ field: StaticString
    ) throws -> UnsafeMutablePointer<CChar> {
        let count = utf8.count
        guard count < Self.maximumLength else {
            throw ProtobufCError(.unsupportedValue, message, field)
        }
        let copy = self.allocate(byteCount: count + 1, alignment: 1)
        if let base = utf8.baseAddress, count > 0 {
            // protobuf-c takes strlen() of the copy: a NUL inside would silently cut the string.
            if memchr(base, 0, count) != nil {
                throw ProtobufCError(.embeddedNUL, message, field)
            }
            copy.copyMemory(from: base, byteCount: count)
        }
        copy.storeBytes(of: 0, toByteOffset: count, as: UInt8.self)
        return copy.bindMemory(to: CChar.self, capacity: count + 1)
    }

    mutating func binaryData(
        _ value: [UInt8],
        _ message: any ProtobufCMessage.Type,
        _ field: StaticString
    ) throws -> ProtobufCBinaryData {
        let count = value.count
        guard count < Self.maximumLength else {
            throw ProtobufCError(.unsupportedValue, message, field)
        }
        let copy = self.allocate(UInt8.self, count: count)
        value.withUnsafeBufferPointer { source in
            if let base = source.baseAddress, count > 0 {
                copy.initialize(from: base, count: count)
            }
        }
        return ProtobufCBinaryData(len: count, data: copy)
    }

    mutating func message<M: ProtobufCBridged>(_ value: M) throws -> UnsafeMutablePointer<M._CMessage> {
        let cMessage = self.allocate(M._CMessage.self)
        M._cInit(cMessage)
        try value._fill(cMessage, arena: &self)
        return cMessage
    }

    // Repeated fields. The caller stores `values.count` in the `n_` member.

    mutating func scalars<T: BitwiseCopyable>(
        _ values: [T],
        _ message: any ProtobufCMessage.Type,
        _ field: StaticString
    ) throws -> UnsafeMutablePointer<T> {
        try self.checkCount(values.count, of: T.self, message, field)
        let array = self.allocate(T.self, count: values.count)
        values.withUnsafeBufferPointer { source in
            if let base = source.baseAddress {
                array.initialize(from: base, count: source.count)
            }
        }
        return array
    }

    mutating func bools(
        _ values: [Bool],
        _ message: any ProtobufCMessage.Type,
        _ field: StaticString
    ) throws -> UnsafeMutablePointer<protobuf_c_boolean> {
        try self.checkCount(values.count, of: protobuf_c_boolean.self, message, field)
        let array = self.allocate(protobuf_c_boolean.self, count: values.count)
        for (index, value) in values.enumerated() {
            (array + index).initialize(to: value ? 1 : 0)
        }
        return array
    }

    mutating func enums<C: RawRepresentable, E: ProtobufCEnum>(
        _ values: [E],
        _ message: any ProtobufCMessage.Type,
        _ field: StaticString
    ) throws -> UnsafeMutablePointer<C> where C.RawValue: FixedWidthInteger {
        try self.checkCount(values.count, of: C.self, message, field)
        let array = self.allocate(C.self, count: values.count)
        for (index, value) in values.enumerated() {
            // protoc-c's enums are int-sized, so every Int32 fits (as its bit pattern).
            (array + index).initialize(to: C(rawValue: C.RawValue(truncatingIfNeeded: value.rawValue))!)
        }
        return array
    }

    mutating func cStrings(
        _ values: [String],
        _ message: any ProtobufCMessage.Type,
        _ field: StaticString
    ) throws -> UnsafeMutablePointer<UnsafeMutablePointer<CChar>?> {
        try self.checkCount(values.count, of: UnsafeMutablePointer<CChar>?.self, message, field)
        let array = self.allocate(UnsafeMutablePointer<CChar>?.self, count: values.count)
        array.initialize(repeating: nil, count: values.count)
        for (index, value) in values.enumerated() {
            // Every element needs a real string, even an empty one: protobuf-c calls strlen() on it.
            array[index] = try self.cString(value, message, field)
        }
        return array
    }

    mutating func binaryDataArray(
        _ values: [[UInt8]],
        _ message: any ProtobufCMessage.Type,
        _ field: StaticString
    ) throws -> UnsafeMutablePointer<ProtobufCBinaryData> {
        try self.checkCount(values.count, of: ProtobufCBinaryData.self, message, field)
        let array = self.allocate(ProtobufCBinaryData.self, count: values.count)
        array.initialize(repeating: ProtobufCBinaryData(len: 0, data: nil), count: values.count)
        for (index, value) in values.enumerated() {
            array[index] = try self.binaryData(value, message, field)
        }
        return array
    }

    mutating func messages<M: ProtobufCBridged>(
        _ values: [M],
        _ message: any ProtobufCMessage.Type,
        _ field: StaticString
    ) throws -> UnsafeMutablePointer<UnsafeMutablePointer<M._CMessage>?> {
        try self.checkCount(values.count, of: M._CMessage.self, message, field)
        let array = self.allocate(UnsafeMutablePointer<M._CMessage>?.self, count: values.count)
        let structs = self.allocate(M._CMessage.self, count: values.count)
        array.initialize(repeating: nil, count: values.count)
        for (index, value) in values.enumerated() {
            let element = structs + index
            M._cInit(element)
            try value._fill(element, arena: &self)
            array[index] = element
        }
        return array
    }

    private func checkCount<T>(
        _ count: Int,
        of _: T.Type,
        _ message: any ProtobufCMessage.Type,
        _ field: StaticString
    ) throws {
        guard count < Self.maximumLength / MemoryLayout<T>.stride else {
            throw ProtobufCError(.unsupportedValue, message, field)
        }
    }
}
