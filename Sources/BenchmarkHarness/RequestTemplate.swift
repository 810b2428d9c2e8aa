import AuthProtobuf
import AuthText

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A request written as JSON whose string values may hold placeholders, rendered afresh for
/// each call so that requests differ (`authctl bench`):
///
/// | placeholder | becomes |
/// |---|---|
/// | `{{seq}}` | the call's sequence number: 0, 1, 2, … |
/// | `{{uuid}}` | a random UUID, lower-case |
/// | `{{phone}}` | a random E.164 number that passes every phone rule: `+91` and 10 digits starting 6–9 |
/// | `{{email}}` | a random address at `example.com`, unique per call (`bench-<seq>-<random>@example.com`) |
/// | `{{ipv4}}` | a random address in 10.0.0.0/8 (client IPs, so per-IP limits see many clients) |
/// | `{{setup.PATH}}` | a value of the setup call's response: `PATH` is field names joined by dots, with `[N]` for an element, e.g. `{{setup.tokens.refresh_token}}` |
/// | `{{input.PATH}}` | a value of this call's input: one JSON object per call (`authctl bench --inputs`, e.g. the responses an earlier run recorded with `--record`), the same path syntax |
///
/// Placeholders go in string fields only; text around them stays (`"user-{{seq}}"`). A template
/// without placeholders is encoded once.
public struct RequestTemplate: Sendable {
    /// One kind of placeholder.
    public enum Placeholder: Sendable, Hashable {
        case sequence
        case uuid
        case phone
        case email
        case ipv4
        case setup(path: String)
        case input(path: String)
    }

    enum Part: Sendable, Hashable {
        case literal(String)
        case placeholder(Placeholder)
    }

    /// A string field somewhere in the message, by the steps that lead to it.
    struct Slot: Sendable {
        var path: [Step]
        var parts: [Part]
    }

    enum Step: Sendable, Hashable {
        case field(String)
        case element(Int)
    }

    public let type: String
    let base: DynamicMessage
    let slots: [Slot]
    /// The encoded request when nothing varies.
    let constantBytes: [UInt8]?

    /// Every `{{setup.…}}` path the template uses.
    public var setupPaths: [String] {
        slots.flatMap(\.parts).compactMap {
            if case .placeholder(.setup(let path)) = $0 { path } else { nil }
        }
    }

    /// Parses `json` as a `type` message (its full name); throws ``ProtobufCError`` for JSON that
    /// does not fit it and ``TemplateError`` for an unknown placeholder.
    public init(json: String, type: String) throws {
        self.type = type
        base = try DynamicMessage(json: json, type: type)
        var slots: [Slot] = []
        try Self.collect(base, path: [], into: &slots)
        self.slots = slots
        constantBytes = slots.isEmpty ? try base.serializedBytes() : nil
    }

    /// An unknown or malformed placeholder, or a setup value that is not there.
    public struct TemplateError: Error, CustomStringConvertible {
        public let description: String

        public init(description: String) {
            self.description = description
        }
    }

    /// Every `{{input.…}}` path the template uses.
    public var inputPaths: [String] {
        slots.flatMap(\.parts).compactMap {
            if case .placeholder(.input(let path)) = $0 { path } else { nil }
        }
    }

    /// The request of call number `sequence`; `setup` is the setup call's response, if any;
    /// `input` this call's input (a JSON object), if any.
    public func render(sequence: Int, setup: DynamicMessage? = nil, input: JSONValue? = nil) throws -> [UInt8] {
        if let constantBytes { return constantBytes }
        var message = base
        var generator = SystemRandomNumberGenerator()
        for slot in slots {
            var text = ""
            for part in slot.parts {
                switch part {
                case .literal(let literal): text += literal
                case .placeholder(let placeholder):
                    text += try Self.value(
                        of: placeholder,
                        sequence: sequence,
                        setup: setup,
                        input: input,
                        random: &generator
                    )
                }
            }
            Self.set(.string(text), at: slot.path[...], in: &message)
        }
        return try message.serializedBytes()
    }

    // MARK: Placeholders

    static func value(
        of placeholder: Placeholder,
        sequence: Int,
        setup: DynamicMessage?,
        input: JSONValue?,
        random: inout some RandomNumberGenerator
    ) throws -> String {
        switch placeholder {
        case .sequence:
            return String(sequence)
        case .uuid:
            return UUID().uuidString.lowercased()
        case .phone:
            var digits = String(Int.random(in: 6...9, using: &random))
            for _ in 0..<9 { digits += String(Int.random(in: 0...9, using: &random)) }
            return "+91" + digits
        case .email:
            return
                "bench-\(sequence)-\(String(UInt32.random(in: 0...UInt32.max, using: &random), radix: 36))@example.com"
        case .ipv4:
            return
                "10.\(Int.random(in: 0...255, using: &random)).\(Int.random(in: 0...255, using: &random)).\(Int.random(in: 1...254, using: &random))"
        case .setup(let path):
            guard let setup else {
                throw TemplateError(description: "{{setup.\(path)}} needs a setup call (--setup-method)")
            }
            return try lookup(path, in: setup)
        case .input(let path):
            guard let input else { throw TemplateError(description: "{{input.\(path)}} needs inputs (--inputs FILE)") }
            return try lookup(path, inJSON: input)
        }
    }

    /// The steps of a path: `sessions[0].id` is (`sessions`, 0), (`id`, nil). `placeholder`
    /// names the placeholder in errors.
    static func components(of path: String, placeholder: String) throws -> [(name: String, index: Int?)] {
        try path.split(separator: ".", omittingEmptySubsequences: false).map { component in
            guard let open = component.firstIndex(of: "["), component.hasSuffix("]") else {
                return (String(component), nil)
            }
            guard let index = Int(component[component.index(after: open)..<component.index(before: component.endIndex)])
            else {
                throw TemplateError(description: "{{\(placeholder).\(path)}}: bad index in '\(component)'")
            }
            return (String(component[..<open]), index)
        }
    }

    /// The value at `path` in a JSON object (strings, numbers and booleans as text).
    public static func lookup(_ path: String, inJSON object: JSONValue) throws -> String {
        var current = object
        for (name, index) in try components(of: path, placeholder: "input") {
            guard case .object(let members) = current, let value = members[name] else {
                throw TemplateError(description: "{{input.\(path)}}: the input has no '\(name)'")
            }
            current = value
            if let index {
                guard case .array(let elements) = value, elements.indices.contains(index) else {
                    throw TemplateError(description: "{{input.\(path)}}: '\(name)' has no element \(index)")
                }
                current = elements[index]
            }
        }
        switch current {
        case .string(let text), .integer(let text), .number(let text): return text
        case .bool(let flag): return String(flag)
        case .null, .array, .object: throw TemplateError(description: "{{input.\(path)}} is not a single value")
        }
    }

    /// The value at `path` (`tokens.refresh_token`, `sessions[0].id`) as text.
    public static func lookup(_ path: String, in message: DynamicMessage) throws -> String {
        var current: DynamicMessage.Value = .message(message)
        for (name, index) in try components(of: path, placeholder: "setup") {
            guard case .message(let nested) = current, let value = nested.fields[name] else {
                throw TemplateError(description: "{{setup.\(path)}}: the setup response has no '\(name)'")
            }
            current = value
            if let index {
                guard case .list(let elements) = value, elements.indices.contains(index) else {
                    throw TemplateError(description: "{{setup.\(path)}}: '\(name)' has no element \(index)")
                }
                current = elements[index]
            }
        }
        switch current {
        case .string(let text): return text
        case .int(let number): return String(number)
        case .uint(let number): return String(number)
        case .bool(let flag): return String(flag)
        case .enumeration(let number): return String(number)
        case .float(let number): return String(number)
        case .double(let number): return String(number)
        case .bytes(let data): return Data(data).base64EncodedString()
        case .message, .list: throw TemplateError(description: "{{setup.\(path)}} is not a single value")
        }
    }

    static func parse(_ text: String) throws -> [Part]? {
        guard text.contains("{{") else { return nil }
        var parts: [Part] = []
        var rest = Substring(text)
        while let open = rest.firstRange(of: "{{") {
            if open.lowerBound > rest.startIndex { parts.append(.literal(String(rest[..<open.lowerBound]))) }
            guard let close = rest[open.upperBound...].firstRange(of: "}}") else {
                throw TemplateError(description: "unclosed placeholder in \"\(text)\"")
            }
            let name = rest[open.upperBound..<close.lowerBound].trimmingWhitespace()
            switch name {
            case "seq": parts.append(.placeholder(.sequence))
            case "uuid": parts.append(.placeholder(.uuid))
            case "phone": parts.append(.placeholder(.phone))
            case "email": parts.append(.placeholder(.email))
            case "ipv4": parts.append(.placeholder(.ipv4))
            case _ where name.hasPrefix("setup.") && name.count > 6:
                parts.append(.placeholder(.setup(path: String(name.dropFirst(6)))))
            case _ where name.hasPrefix("input.") && name.count > 6:
                parts.append(.placeholder(.input(path: String(name.dropFirst(6)))))
            default:
                throw TemplateError(
                    description:
                        "unknown placeholder {{\(name)}} (known: seq, uuid, phone, email, ipv4, setup.PATH, input.PATH)"
                )
            }
            rest = rest[close.upperBound...]
        }
        if !rest.isEmpty { parts.append(.literal(String(rest))) }
        return parts
    }

    // MARK: The message tree

    private static func collect(_ message: DynamicMessage, path: [Step], into slots: inout [Slot]) throws {
        for (name, value) in message.fields {
            try collect(value, path: path + [.field(name)], into: &slots)
        }
    }

    private static func collect(_ value: DynamicMessage.Value, path: [Step], into slots: inout [Slot]) throws {
        switch value {
        case .string(let text):
            if let parts = try parse(text) { slots.append(Slot(path: path, parts: parts)) }
        case .message(let nested):
            try collect(nested, path: path, into: &slots)
        case .list(let elements):
            for (index, element) in elements.enumerated() {
                try collect(element, path: path + [.element(index)], into: &slots)
            }
        default:
            break
        }
    }

    private static func set(_ value: DynamicMessage.Value, at path: ArraySlice<Step>, in message: inout DynamicMessage)
    {
        guard case .field(let name)? = path.first, let current = message.fields[name] else { return }
        message.fields[name] = replaced(current, at: path.dropFirst(), with: value)
    }

    private static func replaced(
        _ current: DynamicMessage.Value,
        at path: ArraySlice<Step>,
        with value: DynamicMessage.Value
    ) -> DynamicMessage.Value {
        guard let step = path.first else { return value }
        switch (step, current) {
        case (.element(let index), .list(var elements)):
            elements[index] = replaced(elements[index], at: path.dropFirst(), with: value)
            return .list(elements)
        case (.field, .message(var nested)):
            set(value, at: path, in: &nested)
            return .message(nested)
        default:
            return current
        }
    }
}
