internal import CProtobufC

#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

/// A message of any type in ``ProtobufSchema``, held as field values by name: what a tool that
/// does not know the message at compile time works with (authctl's `call` and `bench`).
/// Encoding and decoding go through protobuf-c with the message's descriptor, exactly like the
/// generated types, so the bytes are the same.
///
/// `fields` holds the fields that are set. For a proto3 scalar without presence, absent and
/// zero mean the same and encode the same; decoding yields every such field, zero included.
public struct DynamicMessage: Sendable, Hashable {
    /// One field's value. Repeated fields are `.list`.
    public indirect enum Value: Sendable, Hashable {
        case int(Int64)
        case uint(UInt64)
        case float(Float)
        case double(Double)
        case bool(Bool)
        case string(String)
        case bytes([UInt8])
        /// An enum value by number (it may be one the schema does not declare).
        case enumeration(Int32)
        case message(DynamicMessage)
        case list([Value])
    }

    public let schema: ProtobufMessageSchema
    /// Values by the `.proto` name of their field.
    public var fields: [String: Value]

    public init(schema: ProtobufMessageSchema, fields: [String: Value] = [:]) {
        self.schema = schema
        self.fields = fields
    }

    /// Decodes `bytes` as the message `type` (its full name) with protobuf-c.
    ///
    /// Throws ``ProtobufCError/Code/unknownMessage`` for a name the schema lacks, and
    /// what the generated types throw for input protobuf-c cannot parse or a string that is not
    /// UTF-8.
    public init(serializedBytes bytes: [UInt8], type: String) throws {
        let registry = ProtobufSchema.shared
        guard let schema = registry.message(type), let descriptor = registry.descriptors[schema.fullName] else {
            throw ProtobufCError(code: .unknownMessage, messageName: type)
        }
        let unpacked = bytes.withUnsafeBufferPointer { buffer in
            protobuf_c_message_unpack(descriptor.pointer, nil, buffer.count, buffer.baseAddress)
        }
        guard let unpacked else { throw ProtobufCError(code: .malformedInput, messageName: schema.fullName) }
        defer { protobuf_c_message_free_unpacked(unpacked, nil) }
        self = try Self.read(UnsafeRawPointer(unpacked), schema: schema, registry: registry)
    }

    /// The protobuf wire form, packed by protobuf-c.
    ///
    /// Throws ``ProtobufCError`` naming the field for a value that does not fit it: the wrong
    /// kind of value, a number out of the field's range, a string with U+0000.
    public func serializedBytes() throws -> [UInt8] {
        let registry = ProtobufSchema.shared
        var allocations = CAllocations()
        defer { allocations.freeAll() }
        let message = try Self.build(self, registry: registry, allocations: &allocations)
        let size = protobuf_c_message_get_packed_size(message)
        return [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            count = protobuf_c_message_pack(message, buffer.baseAddress)
        }
    }

    // MARK: Reading a protobuf-c struct

    private static func read(
        _ base: UnsafeRawPointer,
        schema: ProtobufMessageSchema,
        registry: ProtobufSchema
    ) throws -> Self {
        var fields: [String: Value] = [:]
        for field in schema.fields {
            if field.isRepeated {
                let count = base.load(fromByteOffset: field.quantifierOffset, as: Int.self)
                guard count > 0, let array = base.load(fromByteOffset: field.offset, as: UnsafeRawPointer?.self) else {
                    fields[field.name] = .list([])
                    continue
                }
                let stride = Self.elementStride(field.kind)
                var values: [Value] = []
                values.reserveCapacity(count)
                for index in 0..<count {
                    guard
                        let value = try readElement(
                            array + index * stride,
                            field: field,
                            schema: schema,
                            registry: registry
                        )
                    else {
                        continue
                    }
                    values.append(value)
                }
                fields[field.name] = .list(values)
                continue
            }
            if field.isOneofMember {
                let chosen = base.load(fromByteOffset: field.quantifierOffset, as: UInt32.self)
                guard chosen == field.number else { continue }
            } else if field.label == PROTOBUF_C_LABEL_OPTIONAL, Self.hasFlagField(field.kind) {
                guard base.load(fromByteOffset: field.quantifierOffset, as: Int32.self) != 0 else { continue }
            }
            if let value = try readElement(base + field.offset, field: field, schema: schema, registry: registry) {
                fields[field.name] = value
            }
        }
        return DynamicMessage(schema: schema, fields: fields)
    }

    /// The value at `pointer`; `nil` for an absent message or an absent optional string.
    private static func readElement(
        _ pointer: UnsafeRawPointer,
        field: ProtobufFieldSchema,
        schema: ProtobufMessageSchema,
        registry: ProtobufSchema
    ) throws -> Value? {
        switch field.kind {
        case .int32, .sint32, .sfixed32: return .int(Int64(pointer.load(as: Int32.self)))
        case .enumeration: return .enumeration(pointer.load(as: Int32.self))
        case .int64, .sint64, .sfixed64: return .int(pointer.load(as: Int64.self))
        case .uint32, .fixed32: return .uint(UInt64(pointer.load(as: UInt32.self)))
        case .uint64, .fixed64: return .uint(pointer.load(as: UInt64.self))
        case .float: return .float(pointer.load(as: Float.self))
        case .double: return .double(pointer.load(as: Double.self))
        case .bool: return .bool(pointer.load(as: Int32.self) != 0)
        case .string:
            guard let text = pointer.load(as: UnsafePointer<CChar>?.self) else { return nil }
            guard let string = String(validatingCString: text) else {
                throw ProtobufCError(code: .invalidUTF8, messageName: schema.fullName, fieldName: field.name)
            }
            return .string(string)
        case .bytes:
            let data = pointer.load(as: ProtobufCBinaryData.self)
            guard data.len > 0, let bytes = data.data else { return .bytes([]) }
            return .bytes(Array(UnsafeBufferPointer(start: bytes, count: data.len)))
        case .message(let name):
            guard let message = pointer.load(as: UnsafeRawPointer?.self), let nested = registry.message(name) else {
                return nil
            }
            return .message(try read(message, schema: nested, registry: registry))
        }
    }

    // MARK: Building a protobuf-c struct

    private static func build(
        _ message: DynamicMessage,
        registry: ProtobufSchema,
        allocations: inout CAllocations
    ) throws -> UnsafeMutablePointer<CMessage> {
        guard let descriptor = registry.descriptors[message.schema.fullName]?.pointer else {
            throw ProtobufCError(code: .unknownMessage, messageName: message.schema.fullName)
        }
        let raw = allocations.allocate(byteCount: descriptor.pointee.sizeof_message)
        let base = raw.assumingMemoryBound(to: CMessage.self)
        descriptor.pointee.message_init(base)
        for (name, value) in message.fields {
            guard let field = message.schema.fields.first(where: { $0.name == name }) else {
                throw ProtobufCError(code: .unsupportedValue, messageName: message.schema.fullName, fieldName: name)
            }
            func fail() -> ProtobufCError {
                ProtobufCError(code: .unsupportedValue, messageName: message.schema.fullName, fieldName: field.name)
            }
            if field.isRepeated {
                guard case .list(let values) = value else { throw fail() }
                guard !values.isEmpty else { continue }
                let stride = elementStride(field.kind)
                let array = allocations.allocate(byteCount: stride * values.count)
                for (index, element) in values.enumerated() {
                    try write(
                        element,
                        to: array + index * stride,
                        field: field,
                        message: message,
                        registry: registry,
                        allocations: &allocations
                    )
                }
                raw.storeBytes(of: values.count, toByteOffset: field.quantifierOffset, as: Int.self)
                raw.storeBytes(of: array, toByteOffset: field.offset, as: UnsafeMutableRawPointer?.self)
                continue
            }
            if case .list = value { throw fail() }
            try write(
                value,
                to: raw + field.offset,
                field: field,
                message: message,
                registry: registry,
                allocations: &allocations
            )
            if field.isOneofMember {
                raw.storeBytes(of: field.number, toByteOffset: field.quantifierOffset, as: UInt32.self)
            } else if field.label == PROTOBUF_C_LABEL_OPTIONAL, hasFlagField(field.kind) {
                raw.storeBytes(of: Int32(1), toByteOffset: field.quantifierOffset, as: Int32.self)
            }
        }
        return base
    }

    private static func write(
        _ value: Value,
        to pointer: UnsafeMutableRawPointer,
        field: ProtobufFieldSchema,
        message: DynamicMessage,
        registry: ProtobufSchema,
        allocations: inout CAllocations
    ) throws {
        func fail(_ code: ProtobufCError.Code = .unsupportedValue) -> ProtobufCError {
            ProtobufCError(code: code, messageName: message.schema.fullName, fieldName: field.name)
        }
        func signed<T: FixedWidthInteger>(_: T.Type) throws -> T {
            switch value {
            case .int(let number):
                guard let fitted = T(exactly: number) else { throw fail() }
                return fitted
            case .uint(let number):
                guard let fitted = T(exactly: number) else { throw fail() }
                return fitted
            default: throw fail()
            }
        }
        switch field.kind {
        case .int32, .sint32, .sfixed32: pointer.storeBytes(of: try signed(Int32.self), as: Int32.self)
        case .int64, .sint64, .sfixed64: pointer.storeBytes(of: try signed(Int64.self), as: Int64.self)
        case .uint32, .fixed32: pointer.storeBytes(of: try signed(UInt32.self), as: UInt32.self)
        case .uint64, .fixed64: pointer.storeBytes(of: try signed(UInt64.self), as: UInt64.self)
        case .enumeration:
            guard case .enumeration(let number) = value else { throw fail() }
            pointer.storeBytes(of: number, as: Int32.self)
        case .float:
            switch value {
            case .float(let number): pointer.storeBytes(of: number, as: Float.self)
            case .double(let number): pointer.storeBytes(of: Float(number), as: Float.self)
            default: throw fail()
            }
        case .double:
            switch value {
            case .double(let number): pointer.storeBytes(of: number, as: Double.self)
            case .float(let number): pointer.storeBytes(of: Double(number), as: Double.self)
            default: throw fail()
            }
        case .bool:
            guard case .bool(let flag) = value else { throw fail() }
            pointer.storeBytes(of: Int32(flag ? 1 : 0), as: Int32.self)
        case .string:
            guard case .string(let text) = value else { throw fail() }
            guard !text.utf8.contains(0) else { throw fail(.embeddedNUL) }
            let count = text.utf8.count
            let copy = allocations.allocate(byteCount: count + 1)
            let bytes = copy.assumingMemoryBound(to: UInt8.self)
            _ = UnsafeMutableBufferPointer(start: bytes, count: count).initialize(from: text.utf8)
            bytes[count] = 0
            pointer.storeBytes(of: copy, as: UnsafeMutableRawPointer?.self)
        case .bytes:
            guard case .bytes(let data) = value else { throw fail() }
            let copy = allocations.allocate(byteCount: max(data.count, 1))
            data.withUnsafeBytes {
                copy.copyMemory(from: $0.baseAddress ?? UnsafeRawPointer(copy), byteCount: data.count)
            }
            pointer.storeBytes(
                of: ProtobufCBinaryData(len: data.count, data: copy.assumingMemoryBound(to: UInt8.self)),
                as: ProtobufCBinaryData.self
            )
        case .message(let name):
            guard case .message(let nested) = value, nested.schema.fullName == name else { throw fail() }
            let built = try build(nested, registry: registry, allocations: &allocations)
            pointer.storeBytes(of: built, as: UnsafeMutablePointer<CMessage>?.self)
        }
    }

    /// Bytes per element of a repeated field in protoc-c's arrays.
    private static func elementStride(_ kind: ProtobufFieldSchema.Kind) -> Int {
        switch kind {
        case .int32, .sint32, .sfixed32, .uint32, .fixed32, .float, .bool, .enumeration: 4
        case .int64, .sint64, .sfixed64, .uint64, .fixed64, .double: 8
        case .string, .message: MemoryLayout<UnsafeRawPointer?>.stride
        case .bytes: MemoryLayout<ProtobufCBinaryData>.stride
        }
    }

    /// Whether protoc-c gives an optional field of this kind a `has_` flag (strings and
    /// messages are absent as NULL instead).
    private static func hasFlagField(_ kind: ProtobufFieldSchema.Kind) -> Bool {
        switch kind {
        case .string, .message: false
        default: true
        }
    }
}

/// protobuf-c's message header struct (the Swift protocol of the same name is the generated
/// types').
private typealias CMessage = CProtobufC.ProtobufCMessage

/// The C memory one encode allocates, freed together.
private struct CAllocations {
    private var pointers: [UnsafeMutableRawPointer] = []

    /// Zeroed memory, aligned for any protoc-c member.
    mutating func allocate(byteCount: Int) -> UnsafeMutableRawPointer {
        let pointer = calloc(1, max(byteCount, 1))!
        pointers.append(pointer)
        return pointer
    }

    mutating func freeAll() {
        for pointer in pointers { free(pointer) }
        pointers.removeAll()
    }
}
