/// An error from encoding or decoding a ``ProtobufCMessage``.
///
/// The error names the message type and, where it applies, the field; it never contains field
/// contents, so it is safe to log.
///
/// ```swift
/// do {
///     let hello = try Auth_Rpc_V1_Hello(serializedBytes: bytes)
/// } catch let error as ProtobufCError where error.code == .invalidUTF8 {
///     // reject with INVALID_ARGUMENT
/// }
/// ```
public struct ProtobufCError: Error, Hashable, CustomStringConvertible {
    /// What went wrong. New codes may be added: do not switch over them exhaustively.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Wrapped: Hashable, Sendable {
            case malformedInput
            case invalidUTF8
            case embeddedNUL
            case unsupportedValue
            case unknownMessage
            case invalidJSON
        }

        private let wrapped: Wrapped

        private init(_ wrapped: Wrapped) {
            self.wrapped = wrapped
        }

        /// protobuf-c could not parse the input (its `unpack` returned NULL): truncated data, a
        /// length past the end, an invalid tag or wire type, or similar.
        public static let malformedInput = Code(.malformedInput)

        /// A string field of the input is not valid UTF-8.
        public static let invalidUTF8 = Code(.invalidUTF8)

        /// A string to encode contains U+0000. protobuf-c stores strings as C strings and would
        /// silently cut it at the NUL, so the encoder refuses it.
        public static let embeddedNUL = Code(.embeddedNUL)

        /// A value cannot be encoded: a string, bytes or message of 2 GiB or more.
        public static let unsupportedValue = Code(.unsupportedValue)

        /// A message name that no `.proto` file of the schema declares (``DynamicMessage``).
        public static let unknownMessage = Code(.unknownMessage)

        /// JSON that is not a message of the type asked for (``DynamicMessage/init(json:type:)``):
        /// not JSON, an unknown field, a value of the wrong type or out of range. ``detail`` says
        /// which; ``fieldName`` is the path, e.g. `device.platform` or `amr[1]`.
        public static let invalidJSON = Code(.invalidJSON)

        public var description: String {
            switch self.wrapped {
            case .malformedInput: "malformedInput"
            case .invalidUTF8: "invalidUTF8"
            case .embeddedNUL: "embeddedNUL"
            case .unsupportedValue: "unsupportedValue"
            case .unknownMessage: "unknownMessage"
            case .invalidJSON: "invalidJSON"
            }
        }
    }

    /// What went wrong.
    public var code: Code

    /// The fully qualified protobuf name of the message type, e.g. `auth.rpc.v1.Hello`. For a
    /// field error this is the message that declares the field, which may be nested in the one
    /// being encoded or decoded.
    public var messageName: String

    /// The protobuf name of the field (e.g. `service`), when the error is about one field.
    public var fieldName: String?

    /// What is wrong, in words, for ``Code/invalidJSON`` (never a field's contents).
    public var detail: String?

    public init(code: Code, messageName: String, fieldName: String? = nil, detail: String? = nil) {
        self.code = code
        self.messageName = messageName
        self.fieldName = fieldName
        self.detail = detail
    }

    public var description: String {
        let field = self.fieldName.map { "\(self.messageName).\($0)" } ?? self.messageName
        return switch self.code {
        case .malformedInput: "ProtobufCError(malformedInput): cannot parse \(self.messageName)"
        case .invalidUTF8: "ProtobufCError(invalidUTF8): string field \(field) is not valid UTF-8"
        case .embeddedNUL:
            "ProtobufCError(embeddedNUL): string field \(field) contains NUL, which protobuf-c cannot encode"
        case .unsupportedValue:
            "ProtobufCError(unsupportedValue): \(field) cannot hold the value (wrong kind, out of range, or 2 GiB or more)"
        case .unknownMessage: "ProtobufCError(unknownMessage): no message \(self.messageName) in the schema"
        case .invalidJSON:
            if let fieldName = self.fieldName {
                "invalid JSON for \(self.messageName): field \(fieldName): \(self.detail ?? "invalid")"
            } else {
                "invalid JSON for \(self.messageName): \(self.detail ?? "invalid")"
            }
        default: "ProtobufCError(\(self.code)): \(field)"
        }
    }
}

extension ProtobufCError {
    init(_ code: Code, _ message: any ProtobufCMessage.Type, _ field: StaticString? = nil) {
        self.init(code: code, messageName: message.protoMessageName, fieldName: field.map { "\($0)" })
    }
}
