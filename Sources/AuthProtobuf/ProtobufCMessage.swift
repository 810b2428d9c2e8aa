/// A protobuf message type generated from `proto/` by `scripts/generate-protos.sh`.
///
/// The generated types are plain Swift values. Encoding and decoding go through the protoc-c
/// code in `CAuthProto`: decoding calls protobuf-c's `unpack`, copies everything into Swift
/// values and frees the C message at once; encoding builds the C message in a scratch arena,
/// packs it and hands the bytes to a closure, then frees the arena. No C memory outlives a call.
///
/// ```swift
/// let frame = try Auth_Rpc_V1_Frame(serializedBytes: bytes)
/// try frame.withSerializedBytes { buffer.writeBytes($0) }
/// ```
public protocol ProtobufCMessage: Sendable, Hashable {
    /// The fully qualified protobuf name of the message, e.g. `auth.rpc.v1.Frame`.
    static var protoMessageName: String { get }

    /// A message with every field at its default value.
    init()

    /// Decodes a message from its protobuf wire form.
    ///
    /// Any input is safe: bytes protobuf-c cannot parse throw ``ProtobufCError/Code/malformedInput``,
    /// a string field that is not valid UTF-8 throws ``ProtobufCError/Code/invalidUTF8``. Unknown
    /// fields are skipped; unknown enum numbers are kept as `.unrecognized(_)`.
    init(serializedBytes: UnsafeRawBufferPointer) throws

    /// Encodes the message and calls `body` with its wire form.
    ///
    /// The buffer is valid only during `body`: it lives in scratch memory that is freed (or
    /// reused) when `body` returns. Encoding throws ``ProtobufCError/Code/embeddedNUL`` for a
    /// string containing U+0000, which protobuf-c's C strings cannot carry, and
    /// ``ProtobufCError/Code/unsupportedValue`` for a value of 2 GiB or more.
    func withSerializedBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R
}

extension ProtobufCMessage {
    /// Decodes a message from its protobuf wire form. See ``init(serializedBytes:)-(UnsafeRawBufferPointer)``.
    @inlinable
    public init(serializedBytes bytes: [UInt8]) throws {
        self = try bytes.withUnsafeBytes { try Self(serializedBytes: $0) }
    }

    /// The protobuf wire form of the message, copied into an array.
    ///
    /// Prefer ``withSerializedBytes(_:)`` on hot paths: it avoids the copy.
    @inlinable
    public func serializedBytes() throws -> [UInt8] {
        try self.withSerializedBytes { [UInt8]($0) }
    }
}

/// A protobuf enum generated from `proto/`.
///
/// Enums are open, as in proto3: a number the schema does not declare decodes to
/// `.unrecognized(number)` and encodes back unchanged. Two values are equal when their numbers
/// are, so `.unrecognized(0)` equals the zero case.
public protocol ProtobufCEnum: Sendable, Hashable {
    /// The zero value, which is also the default of a field of this type.
    init()

    /// The case for `rawValue`, or `.unrecognized(rawValue)` when the schema does not declare it.
    init(rawValue: Int32)

    /// The protobuf number of the value.
    var rawValue: Int32 { get }

    /// Every value the schema declares, in declaration order (without `.unrecognized`).
    static var allKnownCases: [Self] { get }
}
