/// Encodes an `Encodable` value as compact JSON in one pass: each member is written as
/// `encode(to:)` encodes it, in that order, with no tree of values in between (Foundation's
/// `JSONEncoder` builds one and sorts nothing either, but writes an object's members in hash
/// order). Strings as ``JSONText/appendString(_:to:)`` writes them (`/` unescaped), integers and
/// booleans as JSON writes them, a finite `Double` or `Float` as Swift's shortest round-trip
/// form. For the gateway's response bodies, on every answer (issue 24).
///
/// What it does not write: a container taken with `nestedContainer`, `nestedUnkeyedContainer` or
/// `superEncoder` (a value's `encode(to:)` that writes its members in order does not need
/// them), a value whose `encode(to:)` takes no container, a second container of another kind
/// for the same value, a non-finite number. Each makes ``encode(_:)`` throw
/// ``Unsupported``, so a caller can fall back to `JSONEncoder`.
public enum JSONStreamEncoder {
    /// Thrown for what the encoder does not write (see ``JSONStreamEncoder``).
    public struct Unsupported: Error, Equatable {
        public let reason: String
    }

    /// `value` as JSON text.
    public static func encode(_ value: some Encodable) throws -> String {
        let writer = Writer()
        try writer.write(value)
        if let problem = writer.problem { throw Unsupported(reason: problem) }
        return writer.json
    }

    /// The text written so far and the first problem met. One per ``encode(_:)``.
    fileprivate final class Writer {
        var json = ""
        var problem: String?
        /// One frame per value being written, innermost last; frame 0 takes what refused
        /// containers write (the text is thrown away then).
        var frames = [Frame(kind: .none, count: 0)]

        struct Frame {
            var kind: ValueState.Kind
            var count: Int
        }

        init() {
            json.reserveCapacity(512)
            frames.reserveCapacity(8)
        }

        func fail(_ reason: String) {
            if problem == nil { problem = reason }
        }

        /// Writes `value` through a fresh encoder, then closes the container it opened.
        func write(_ value: some Encodable) throws {
            frames.append(Frame(kind: .none, count: 0))
            let state = ValueState(writer: self, index: frames.count - 1)
            try value.encode(to: StreamEncoder(state: state))
            switch state.kind {
            case .none: fail("\(type(of: value)) encoded no container")
            case .object: json += "}"
            case .array: json += "]"
            case .scalar: break
            }
            frames.removeLast()
        }

        func writeKey(_ key: some CodingKey, state: ValueState) {
            separate(state)
            JSONText.appendString(key.stringValue, to: &json)
            json += ":"
        }

        /// A comma before every element but the first.
        func separate(_ state: ValueState) {
            if state.count > 0 { json += "," }
            state.count += 1
        }

        func writeNumber<Number: BinaryFloatingPoint & CustomStringConvertible>(_ value: Number) {
            guard value.isFinite else {
                fail("\(value) is not a JSON number")
                return
            }
            json += value.description
        }
    }

    /// What one value opened, and how many elements its container holds: its frame in the
    /// writer, shared by every container handle `encode(to:)` takes for that value (no
    /// allocation per value).
    fileprivate struct ValueState {
        enum Kind { case none, object, array, scalar }
        let writer: Writer
        let index: Int

        /// The frame that refused containers write to.
        static func scratch(_ writer: Writer) -> ValueState { ValueState(writer: writer, index: 0) }

        var kind: Kind {
            get { writer.frames[index].kind }
            nonmutating set { writer.frames[index].kind = newValue }
        }

        var count: Int {
            get { writer.frames[index].count }
            nonmutating set { writer.frames[index].count = newValue }
        }

        /// Opens `kind` for the value unless it is open already; false (and a problem) for a
        /// second container of another kind.
        func open(_ kind: Kind) -> Bool {
            if self.kind == kind { return kind != .scalar || count == 0 }
            guard self.kind == .none else {
                writer.fail("a value took a second container of another kind")
                return false
            }
            self.kind = kind
            switch kind {
            case .object: writer.json += "{"
            case .array: writer.json += "["
            case .scalar, .none: break
            }
            return true
        }
    }

    fileprivate struct StreamEncoder: Encoder {
        let state: ValueState
        var writer: Writer { state.writer }
        var codingPath: [any CodingKey] { [] }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            _ = state.open(.object)
            return KeyedEncodingContainer(ObjectContainer<Key>(state: state))
        }

        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            _ = state.open(.array)
            return ArrayContainer(state: state)
        }

        func singleValueContainer() -> any SingleValueEncodingContainer {
            ScalarContainer(state: state)
        }
    }

    fileprivate struct ObjectContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let state: ValueState
        var writer: Writer { state.writer }
        var codingPath: [any CodingKey] { [] }

        mutating func encodeNil(forKey key: Key) throws {
            writer.writeKey(key, state: state)
            writer.json += "null"
        }
        mutating func encode(_ value: Bool, forKey key: Key) throws {
            writer.writeKey(key, state: state)
            writer.json += value ? "true" : "false"
        }
        mutating func encode(_ value: String, forKey key: Key) throws {
            writer.writeKey(key, state: state)
            JSONText.appendString(value, to: &writer.json)
        }
        mutating func encode(_ value: Double, forKey key: Key) throws {
            writer.writeKey(key, state: state)
            writer.writeNumber(value)
        }
        mutating func encode(_ value: Float, forKey key: Key) throws {
            writer.writeKey(key, state: state)
            writer.writeNumber(value)
        }
        mutating func encode(_ value: Int, forKey key: Key) throws { try encodeInteger(value, key) }
        mutating func encode(_ value: Int8, forKey key: Key) throws { try encodeInteger(value, key) }
        mutating func encode(_ value: Int16, forKey key: Key) throws { try encodeInteger(value, key) }
        mutating func encode(_ value: Int32, forKey key: Key) throws { try encodeInteger(value, key) }
        mutating func encode(_ value: Int64, forKey key: Key) throws { try encodeInteger(value, key) }
        mutating func encode(_ value: UInt, forKey key: Key) throws { try encodeInteger(value, key) }
        mutating func encode(_ value: UInt8, forKey key: Key) throws { try encodeInteger(value, key) }
        mutating func encode(_ value: UInt16, forKey key: Key) throws { try encodeInteger(value, key) }
        mutating func encode(_ value: UInt32, forKey key: Key) throws { try encodeInteger(value, key) }
        mutating func encode(_ value: UInt64, forKey key: Key) throws { try encodeInteger(value, key) }

        private func encodeInteger(_ value: some BinaryInteger, _ key: Key) throws {
            writer.writeKey(key, state: state)
            writer.json += String(value)
        }

        mutating func encode(_ value: some Encodable, forKey key: Key) throws {
            writer.writeKey(key, state: state)
            try writer.write(value)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy keyType: NestedKey.Type,
            forKey key: Key
        ) -> KeyedEncodingContainer<NestedKey> {
            writer.fail("nestedContainer(keyedBy:forKey:)")
            return KeyedEncodingContainer(ObjectContainer<NestedKey>(state: .scratch(writer)))
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            writer.fail("nestedUnkeyedContainer(forKey:)")
            return ArrayContainer(state: .scratch(writer))
        }

        mutating func superEncoder() -> any Encoder {
            writer.fail("superEncoder()")
            return StreamEncoder(state: .scratch(writer))
        }

        mutating func superEncoder(forKey key: Key) -> any Encoder {
            writer.fail("superEncoder(forKey:)")
            return StreamEncoder(state: .scratch(writer))
        }
    }

    /// The scalars of an array element or of a single value, written once for both containers.
    fileprivate protocol ScalarWriting {
        var writer: Writer { get }
        /// Starts an element (false: nothing may be written, a problem is recorded).
        func begin() -> Bool
    }

    fileprivate struct ArrayContainer: UnkeyedEncodingContainer, ScalarWriting {
        let state: ValueState
        var writer: Writer { state.writer }
        var codingPath: [any CodingKey] { [] }
        var count: Int { state.count }

        func begin() -> Bool {
            writer.separate(state)
            return true
        }

        mutating func encode(_ value: some Encodable) throws {
            writer.separate(state)
            try writer.write(value)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy keyType: NestedKey.Type
        ) -> KeyedEncodingContainer<NestedKey> {
            writer.fail("nestedContainer(keyedBy:)")
            return KeyedEncodingContainer(ObjectContainer<NestedKey>(state: .scratch(writer)))
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            writer.fail("nestedUnkeyedContainer()")
            return ArrayContainer(state: .scratch(writer))
        }

        mutating func superEncoder() -> any Encoder {
            writer.fail("superEncoder()")
            return StreamEncoder(state: .scratch(writer))
        }
    }

    /// One scalar (or a value that writes itself through another encoder, as `Optional` does).
    fileprivate struct ScalarContainer: SingleValueEncodingContainer, ScalarWriting {
        let state: ValueState
        var writer: Writer { state.writer }
        var codingPath: [any CodingKey] { [] }

        /// Opens the value as a scalar: once, and only if nothing else was opened for it.
        func begin() -> Bool {
            guard state.open(.scalar) else {
                if state.kind == .scalar { writer.fail("a single value container encoded twice") }
                return false
            }
            state.count = 1
            return true
        }

        /// A value inside a single value container (e.g. an `Optional`'s wrapped value) writes
        /// itself in place: whatever container it opens is this value's.
        mutating func encode(_ value: some Encodable) throws {
            guard state.kind == .none else {
                writer.fail("a single value container encoded twice")
                return
            }
            try value.encode(to: StreamEncoder(state: state))
        }
    }
}

extension JSONStreamEncoder.ScalarWriting {
    mutating func encodeNil() throws {
        if begin() { writer.json += "null" }
    }
    mutating func encode(_ value: Bool) throws {
        if begin() { writer.json += value ? "true" : "false" }
    }
    mutating func encode(_ value: String) throws {
        if begin() { JSONText.appendString(value, to: &writer.json) }
    }
    mutating func encode(_ value: Double) throws {
        if begin() { writer.writeNumber(value) }
    }
    mutating func encode(_ value: Float) throws {
        if begin() { writer.writeNumber(value) }
    }
    mutating func encode(_ value: Int) throws { encodeInteger(value) }
    mutating func encode(_ value: Int8) throws { encodeInteger(value) }
    mutating func encode(_ value: Int16) throws { encodeInteger(value) }
    mutating func encode(_ value: Int32) throws { encodeInteger(value) }
    mutating func encode(_ value: Int64) throws { encodeInteger(value) }
    mutating func encode(_ value: UInt) throws { encodeInteger(value) }
    mutating func encode(_ value: UInt8) throws { encodeInteger(value) }
    mutating func encode(_ value: UInt16) throws { encodeInteger(value) }
    mutating func encode(_ value: UInt32) throws { encodeInteger(value) }
    mutating func encode(_ value: UInt64) throws { encodeInteger(value) }

    private func encodeInteger(_ value: some BinaryInteger) {
        if begin() { writer.json += String(value) }
    }
}
