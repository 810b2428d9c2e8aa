import AuthText

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The JSON form of any message (proto3's JSON mapping, with the `.proto` field names):
///
/// - field names as in the `.proto` file (`user_id`); on input the JSON names (`userId`) too;
/// - 32-bit integers and floating-point numbers as JSON numbers (`"NaN"`, `"Infinity"`,
///   `"-Infinity"` as strings); 64-bit integers as strings, accepted as numbers or strings;
/// - `bytes` in standard base64 (URL-safe base64 accepted); enums by value name, numbers
///   accepted; messages as objects; repeated fields as arrays; `null` leaves a field unset.
///
/// Input is strict: an unknown field, a value of the wrong type, a number out of the field's
/// range or a fraction in an integer field is an error naming the field's path.
extension DynamicMessage {
    /// Parses `json` as a message of type `type` (full name, e.g. `auth.session.v1.IssueRequest`).
    public init(json: String, type: String) throws {
        guard let schema = ProtobufSchema.shared.message(type) else {
            throw ProtobufCError(code: .unknownMessage, messageName: type)
        }
        let value: JSONValue
        do {
            value = try JSONDecoder().decode(JSONValue.self, from: Data(json.utf8))
        } catch {
            throw ProtobufCError(code: .invalidJSON, messageName: schema.fullName, detail: "not valid JSON")
        }
        self = try Self(jsonValue: value, schema: schema, path: "", root: schema.fullName)
    }

    /// The message as JSON: its set fields in field-number order, pretty-printed with two-space
    /// indentation (or on one line).
    public func jsonString(pretty: Bool = true) -> String {
        var output = ""
        JSONWriter(pretty: pretty).write(self, into: &output, indent: 0)
        return output
    }

    /// `root` is the message being parsed, named in errors (with the path to the field).
    init(jsonValue: JSONValue, schema: ProtobufMessageSchema, path: String, root: String) throws {
        guard case .object(let members) = jsonValue else {
            throw Self.jsonError(root, path, "expected an object, got \(jsonValue.kindName)")
        }
        var fields: [String: Value] = [:]
        for (key, member) in members.sorted(by: { $0.key < $1.key }) {
            let fieldPath = path.isEmpty ? key : "\(path).\(key)"
            guard let field = schema.field(named: key) else {
                let known = schema.fields.map(\.name).joined(separator: ", ")
                throw Self.jsonError(root, fieldPath, "unknown field (\(schema.fullName) has: \(known))")
            }
            guard fields[field.name] == nil else {
                throw Self.jsonError(root, fieldPath, "given twice (as \(field.name) and \(field.jsonName))")
            }
            if case .null = member { continue }
            if field.isRepeated {
                guard case .array(let elements) = member else {
                    throw Self.jsonError(root, fieldPath, "expected an array, got \(member.kindName)")
                }
                fields[field.name] = .list(
                    try elements.enumerated().map { index, element in
                        try Self.value(element, field: field, root: root, path: "\(fieldPath)[\(index)]")
                    }
                )
            } else {
                fields[field.name] = try Self.value(member, field: field, root: root, path: fieldPath)
            }
        }
        // protoc-c keeps one case per oneof (the members share its quantifier slot): at most
        // one member of each oneof may be set.
        let chosenSlots = schema.fields.filter { $0.isOneofMember && fields[$0.name] != nil }.map(\.quantifierOffset)
        if Set(chosenSlots).count != chosenSlots.count {
            throw Self.jsonError(root, path, "sets more than one member of a oneof")
        }
        self.init(schema: schema, fields: fields)
    }

    private static func value(_ json: JSONValue, field: ProtobufFieldSchema, root: String, path: String) throws -> Value
    {
        func wrongType(_ expected: String) -> ProtobufCError {
            jsonError(root, path, "expected \(expected) (\(field.kind.protoName) field), got \(json.kindName)")
        }
        func integer<T: FixedWidthInteger>(_: T.Type, quotedAllowed: Bool) throws -> T {
            let text: String
            switch json {
            case .integer(let literal): text = literal
            case .string(let literal) where quotedAllowed: text = literal
            case .number: throw jsonError(root, path, "expected a whole number for \(field.kind.protoName)")
            default: throw wrongType(quotedAllowed ? "a whole number or a string of one" : "a whole number")
            }
            guard let number = T(text) else {
                throw jsonError(root, path, "not a \(field.kind.protoName) (whole number in \(T.min)...\(T.max))")
            }
            return number
        }
        func floating() throws -> Double {
            switch json {
            case .integer(let literal), .number(let literal):
                guard let number = Double(literal) else { throw wrongType("a number") }
                return number
            case .string("NaN"): return .nan
            case .string("Infinity"): return .infinity
            case .string("-Infinity"): return -.infinity
            default: throw wrongType("a number")
            }
        }
        switch field.kind {
        case .int32, .sint32, .sfixed32: return .int(Int64(try integer(Int32.self, quotedAllowed: true)))
        case .int64, .sint64, .sfixed64: return .int(try integer(Int64.self, quotedAllowed: true))
        case .uint32, .fixed32: return .uint(UInt64(try integer(UInt32.self, quotedAllowed: true)))
        case .uint64, .fixed64: return .uint(try integer(UInt64.self, quotedAllowed: true))
        case .float:
            let number = try floating()
            guard !number.isFinite || abs(number) <= Double(Float.greatestFiniteMagnitude) else {
                throw jsonError(root, path, "out of range for float")
            }
            return .float(Float(number))
        case .double: return .double(try floating())
        case .bool:
            guard case .bool(let flag) = json else { throw wrongType("true or false") }
            return .bool(flag)
        case .string:
            guard case .string(let text) = json else { throw wrongType("a string") }
            return .string(text)
        case .bytes:
            guard case .string(let text) = json else { throw wrongType("a base64 string") }
            guard let data = decodeBase64(text) else { throw jsonError(root, path, "not base64") }
            return .bytes(data)
        case .enumeration(let name):
            let enumeration = ProtobufSchema.shared.enums[name]
            switch json {
            case .string(let text):
                guard let number = enumeration?.number(of: text) else {
                    let known = enumeration?.values.map(\.name).joined(separator: ", ") ?? ""
                    throw jsonError(root, path, "unknown value of \(name) (known: \(known))")
                }
                return .enumeration(number)
            case .integer(let literal):
                guard let number = Int32(literal) else { throw jsonError(root, path, "not an enum number") }
                return .enumeration(number)
            default: throw wrongType("a value name")
            }
        case .message(let name):
            guard let nested = ProtobufSchema.shared.message(name) else {
                throw jsonError(root, path, "unknown message type \(name)")
            }
            return .message(try DynamicMessage(jsonValue: json, schema: nested, path: path, root: root))
        }
    }

    private static func decodeBase64(_ text: String) -> [UInt8]? {
        var standard = text.replacing("-", with: "+").replacing("_", with: "/")
        while standard.count % 4 != 0 { standard += "=" }
        return Data(base64Encoded: standard).map { [UInt8]($0) }
    }

    private static func jsonError(_ root: String, _ path: String, _ detail: String) -> ProtobufCError {
        ProtobufCError(code: .invalidJSON, messageName: root, fieldName: path.isEmpty ? nil : path, detail: detail)
    }
}

/// Writes a ``DynamicMessage`` as JSON.
private struct JSONWriter {
    let pretty: Bool

    func write(_ message: DynamicMessage, into output: inout String, indent: Int) {
        let set = message.schema.fields.filter { message.fields[$0.name] != nil }
        guard !set.isEmpty else {
            output += "{}"
            return
        }
        output += "{"
        for (index, field) in set.enumerated() {
            output += index == 0 ? "" : ","
            newline(&output, indent + 1)
            writeString(field.name, into: &output)
            output += pretty ? ": " : ":"
            write(message.fields[field.name]!, field: field, into: &output, indent: indent + 1)
        }
        newline(&output, indent)
        output += "}"
    }

    private func write(
        _ value: DynamicMessage.Value,
        field: ProtobufFieldSchema,
        into output: inout String,
        indent: Int
    ) {
        switch value {
        case .list(let elements):
            guard !elements.isEmpty else {
                output += "[]"
                return
            }
            output += "["
            for (index, element) in elements.enumerated() {
                output += index == 0 ? "" : ","
                newline(&output, indent + 1)
                write(element, field: field, into: &output, indent: indent + 1)
            }
            newline(&output, indent)
            output += "]"
        case .int(let number):
            switch field.kind {
            case .int64, .sint64, .sfixed64: writeString(String(number), into: &output)
            default: output += String(number)
            }
        case .uint(let number):
            switch field.kind {
            case .uint64, .fixed64: writeString(String(number), into: &output)
            default: output += String(number)
            }
        case .float(let number): writeFloating(Double(number), text: number.description, into: &output)
        case .double(let number): writeFloating(number, text: number.description, into: &output)
        case .bool(let flag): output += flag ? "true" : "false"
        case .string(let text): writeString(text, into: &output)
        case .bytes(let data): writeString(Data(data).base64EncodedString(), into: &output)
        case .enumeration(let number):
            if case .enumeration(let name) = field.kind,
                let valueName = ProtobufSchema.shared.enums[name]?.name(of: number)
            {
                writeString(valueName, into: &output)
            } else {
                output += String(number)
            }
        case .message(let nested): write(nested, into: &output, indent: indent)
        }
    }

    private func writeFloating(_ number: Double, text: String, into output: inout String) {
        if number.isNaN {
            output += "\"NaN\""
        } else if number.isInfinite {
            output += number < 0 ? "\"-Infinity\"" : "\"Infinity\""
        } else {
            output += text
        }
    }

    private func newline(_ output: inout String, _ indent: Int) {
        guard pretty else { return }
        output += "\n" + String(repeating: "  ", count: indent)
    }

    private func writeString(_ text: String, into output: inout String) {
        output += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x2028 || scalar.value == 0x2029:
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
    }
}
