internal import CAuthProto
internal import CProtobufC

/// The schema of every message, enum and service in `proto/`, read from protoc-c's descriptors
/// (the same ones protobuf-c packs and unpacks with), so that tools can work with any message
/// by name: ``DynamicMessage`` and its JSON form. A new `.proto` file, message or field needs no
/// code beyond regenerating (`scripts/generate-protos.sh`).
///
/// ```swift
/// let method = ProtobufSchema.shared.method("/auth.session.v1.Session/Issue")
/// let request = try DynamicMessage(json: #"{"user_id": "u1"}"#, type: method!.inputType)
/// ```
public struct ProtobufSchema: Sendable {
    /// Every message by its full name, e.g. `auth.rpc.v1.Frame`.
    public let messages: [String: ProtobufMessageSchema]
    /// Every enum reached from a message field, by its full name.
    public let enums: [String: ProtobufEnumSchema]
    /// Every service, in the order of `proto/` files.
    public let services: [ProtobufServiceSchema]
    /// The protoc-c descriptor of each message, for packing and unpacking.
    let descriptors: [String: MessageDescriptorReference]

    /// The schema of everything generated from `proto/`.
    public static let shared = ProtobufSchema()

    private init() {
        var count = 0
        var messages: [String: ProtobufMessageSchema] = [:]
        var enums: [String: ProtobufEnumSchema] = [:]
        var descriptors: [String: MessageDescriptorReference] = [:]
        let messageList = auth_proto_message_descriptors(&count)!
        for index in 0..<count {
            let descriptor = messageList[index]!
            let schema = ProtobufMessageSchema(descriptor: descriptor, enums: &enums)
            messages[schema.fullName] = schema
            descriptors[schema.fullName] = MessageDescriptorReference(pointer: descriptor)
        }
        var services: [ProtobufServiceSchema] = []
        let serviceList = auth_proto_service_descriptors(&count)!
        for index in 0..<count {
            services.append(ProtobufServiceSchema(descriptor: serviceList[index]!))
        }
        self.messages = messages
        self.enums = enums
        self.services = services
        self.descriptors = descriptors
    }

    /// A message by full name (`auth.session.v1.IssueRequest`), or `nil`.
    public func message(_ fullName: String) -> ProtobufMessageSchema? {
        messages[fullName.hasPrefix(".") ? String(fullName.dropFirst()) : fullName]
    }

    /// A service by full name (`auth.session.v1.Session`), or `nil`.
    public func service(_ fullName: String) -> ProtobufServiceSchema? {
        services.first { $0.fullName == fullName }
    }

    /// A method by its path `/auth.session.v1.Session/Issue`, or by `auth.session.v1.Session/Issue`
    /// or `auth.session.v1.Session.Issue`; `nil` when no service declares it.
    public func method(_ name: String) -> ProtobufMethodSchema? {
        var text = name.hasPrefix("/") ? String(name.dropFirst()) : name
        if !text.contains("/"), let dot = text.lastIndex(of: ".") {
            text.replaceSubrange(dot...dot, with: "/")
        }
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        return service(String(parts[0]))?.methods.first { $0.name == parts[1] }
    }
}

/// A protoc-c message descriptor: a C constant that lives as long as the process.
struct MessageDescriptorReference: @unchecked Sendable {
    let pointer: UnsafePointer<ProtobufCMessageDescriptor>
}

/// One message type: its fields in declaration order.
public struct ProtobufMessageSchema: Sendable, Hashable {
    /// E.g. `auth.session.v1.IssueRequest`.
    public let fullName: String
    public let fields: [ProtobufFieldSchema]

    /// The field called `name` in the `.proto` file (`user_id`) or in JSON (`userId`).
    public func field(named name: String) -> ProtobufFieldSchema? {
        fields.first { $0.name == name } ?? fields.first { $0.jsonName == name }
    }

    init(descriptor: UnsafePointer<ProtobufCMessageDescriptor>, enums: inout [String: ProtobufEnumSchema]) {
        let message = descriptor.pointee
        fullName = String(cString: message.name)
        var fields: [ProtobufFieldSchema] = []
        for index in 0..<Int(message.n_fields) {
            fields.append(ProtobufFieldSchema(descriptor: message.fields + index, enums: &enums))
        }
        // protoc-c lists fields by number; declaration order is what people read, but the number
        // order is stable and what the wire uses, so keep it.
        self.fields = fields
    }
}

/// One field of a message.
public struct ProtobufFieldSchema: Sendable, Hashable {
    /// The kind of value a field holds.
    public enum Kind: Sendable, Hashable {
        case int32, sint32, sfixed32, int64, sint64, sfixed64
        case uint32, fixed32, uint64, fixed64
        case float, double, bool, string, bytes
        /// An enum, by its full name in ``ProtobufSchema/enums``.
        case enumeration(String)
        /// A message, by its full name in ``ProtobufSchema/messages``.
        case message(String)

        /// The name used in `.proto` files: `uint32`, `string`, `auth.rpc.v1.StatusCode`, …
        public var protoName: String {
            switch self {
            case .int32: "int32"
            case .sint32: "sint32"
            case .sfixed32: "sfixed32"
            case .int64: "int64"
            case .sint64: "sint64"
            case .sfixed64: "sfixed64"
            case .uint32: "uint32"
            case .fixed32: "fixed32"
            case .uint64: "uint64"
            case .fixed64: "fixed64"
            case .float: "float"
            case .double: "double"
            case .bool: "bool"
            case .string: "string"
            case .bytes: "bytes"
            case .enumeration(let name), .message(let name): name
            }
        }
    }

    /// The name in the `.proto` file, e.g. `user_id`.
    public let name: String
    /// The proto3 JSON name, e.g. `userId`.
    public let jsonName: String
    public let number: UInt32
    public let kind: Kind
    public let isRepeated: Bool
    /// A member of a `oneof`: at most one member of its oneof is set.
    public let isOneofMember: Bool
    /// Set or not, apart from its value (a message, a oneof member, a proto3 `optional` or a
    /// proto2 optional field); a proto3 scalar without presence is always there, 0 or "" when unset.
    public let hasPresence: Bool

    // Where protoc-c keeps it.
    let label: ProtobufCLabel
    let offset: Int
    let quantifierOffset: Int

    init(descriptor: UnsafePointer<ProtobufCFieldDescriptor>, enums: inout [String: ProtobufEnumSchema]) {
        let field = descriptor.pointee
        name = String(cString: field.name)
        jsonName = Self.jsonName(name)
        number = field.id
        label = field.label
        offset = Int(field.offset)
        quantifierOffset = Int(field.quantifier_offset)
        isRepeated = field.label == PROTOBUF_C_LABEL_REPEATED
        isOneofMember = field.flags & UInt32(PROTOBUF_C_FIELD_FLAG_ONEOF.rawValue) != 0
        switch field.type {
        case PROTOBUF_C_TYPE_INT32: kind = .int32
        case PROTOBUF_C_TYPE_SINT32: kind = .sint32
        case PROTOBUF_C_TYPE_SFIXED32: kind = .sfixed32
        case PROTOBUF_C_TYPE_INT64: kind = .int64
        case PROTOBUF_C_TYPE_SINT64: kind = .sint64
        case PROTOBUF_C_TYPE_SFIXED64: kind = .sfixed64
        case PROTOBUF_C_TYPE_UINT32: kind = .uint32
        case PROTOBUF_C_TYPE_FIXED32: kind = .fixed32
        case PROTOBUF_C_TYPE_UINT64: kind = .uint64
        case PROTOBUF_C_TYPE_FIXED64: kind = .fixed64
        case PROTOBUF_C_TYPE_FLOAT: kind = .float
        case PROTOBUF_C_TYPE_DOUBLE: kind = .double
        case PROTOBUF_C_TYPE_BOOL: kind = .bool
        case PROTOBUF_C_TYPE_STRING: kind = .string
        case PROTOBUF_C_TYPE_BYTES: kind = .bytes
        case PROTOBUF_C_TYPE_ENUM:
            let enumeration = ProtobufEnumSchema(
                descriptor: field.descriptor!.assumingMemoryBound(to: ProtobufCEnumDescriptor.self)
            )
            enums[enumeration.fullName] = enumeration
            kind = .enumeration(enumeration.fullName)
        default:
            let message = field.descriptor!.assumingMemoryBound(to: ProtobufCMessageDescriptor.self)
            kind = .message(String(cString: message.pointee.name))
        }
        var isMessage = false
        if case .message = kind { isMessage = true }
        hasPresence =
            isOneofMember || field.label == PROTOBUF_C_LABEL_OPTIONAL || field.label == PROTOBUF_C_LABEL_REQUIRED
            || (!isRepeated && isMessage)
    }

    /// protoc's JSON name: underscores dropped, the letter after each upper-cased.
    static func jsonName(_ name: String) -> String {
        var result = ""
        var upperNext = false
        for character in name {
            if character == "_" {
                upperNext = true
            } else if upperNext {
                result += character.uppercased()
                upperNext = false
            } else {
                result.append(character)
            }
        }
        return result
    }
}

/// One enum: its values' names and numbers in declaration order.
public struct ProtobufEnumSchema: Sendable, Hashable {
    public let fullName: String
    public let values: [(name: String, number: Int32)]

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.fullName == rhs.fullName }
    public func hash(into hasher: inout Hasher) { hasher.combine(fullName) }

    /// The name of `number`, or `nil` when the schema does not declare it.
    public func name(of number: Int32) -> String? {
        values.first { $0.number == number }?.name
    }

    /// The number of the value called `name`, or `nil`.
    public func number(of name: String) -> Int32? {
        values.first { $0.name == name }?.number
    }

    init(descriptor: UnsafePointer<ProtobufCEnumDescriptor>) {
        let enumeration = descriptor.pointee
        fullName = String(cString: enumeration.name)
        var values: [(String, Int32)] = []
        for index in 0..<Int(enumeration.n_values) {
            let value = enumeration.values[index]
            values.append((String(cString: value.name), Int32(value.value)))
        }
        self.values = values
    }
}

/// One service and its methods.
public struct ProtobufServiceSchema: Sendable, Hashable {
    /// E.g. `auth.session.v1.Session`.
    public let fullName: String
    public let methods: [ProtobufMethodSchema]

    init(descriptor: UnsafePointer<ProtobufCServiceDescriptor>) {
        let service = descriptor.pointee
        fullName = String(cString: service.name)
        var methods: [ProtobufMethodSchema] = []
        for index in 0..<Int(service.n_methods) {
            let method = service.methods[index]
            methods.append(
                ProtobufMethodSchema(
                    service: fullName,
                    name: String(cString: method.name),
                    inputType: String(cString: method.input.pointee.name),
                    outputType: String(cString: method.output.pointee.name)
                )
            )
        }
        self.methods = methods
    }
}

/// One method: where to call it and its message types.
public struct ProtobufMethodSchema: Sendable, Hashable {
    public let service: String
    public let name: String
    /// Full name of the request message.
    public let inputType: String
    /// Full name of the response message.
    public let outputType: String

    /// The path the RPC protocol calls it by: `/auth.session.v1.Session/Issue`.
    public var path: String { "/\(service)/\(name)" }
}
