#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A PostgreSQL type, identified by its OID.
///
/// Only the built-in types listed as constants have fixed OIDs; user-defined types (enums,
/// extension types) get theirs at creation time.
public struct PostgresDataType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The type's OID (`pg_type.oid`).
    public var rawValue: UInt32

    /// Creates a data type from its OID.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Type not specified: the server infers it from the statement.
    public static let unspecified = PostgresDataType(rawValue: 0)
    public static let bool = PostgresDataType(rawValue: 16)
    public static let bytea = PostgresDataType(rawValue: 17)
    public static let char = PostgresDataType(rawValue: 18)
    public static let name = PostgresDataType(rawValue: 19)
    public static let int8 = PostgresDataType(rawValue: 20)
    public static let int2 = PostgresDataType(rawValue: 21)
    public static let int4 = PostgresDataType(rawValue: 23)
    public static let text = PostgresDataType(rawValue: 25)
    public static let oid = PostgresDataType(rawValue: 26)
    public static let json = PostgresDataType(rawValue: 114)
    public static let xml = PostgresDataType(rawValue: 142)
    public static let float4 = PostgresDataType(rawValue: 700)
    public static let float8 = PostgresDataType(rawValue: 701)
    public static let unknown = PostgresDataType(rawValue: 705)
    public static let bpchar = PostgresDataType(rawValue: 1042)
    public static let varchar = PostgresDataType(rawValue: 1043)
    public static let date = PostgresDataType(rawValue: 1082)
    public static let timestamp = PostgresDataType(rawValue: 1114)
    public static let timestamptz = PostgresDataType(rawValue: 1184)
    public static let numeric = PostgresDataType(rawValue: 1700)
    public static let void = PostgresDataType(rawValue: 2278)
    public static let uuid = PostgresDataType(rawValue: 2950)
    public static let jsonb = PostgresDataType(rawValue: 3802)

    /// The first OID PostgreSQL hands out to user-defined objects.
    static let firstUserOID: UInt32 = 16384

    public var description: String {
        switch self {
        case .bool: "bool"
        case .bytea: "bytea"
        case .char: "char"
        case .name: "name"
        case .int8: "int8"
        case .int2: "int2"
        case .int4: "int4"
        case .text: "text"
        case .oid: "oid"
        case .json: "json"
        case .xml: "xml"
        case .float4: "float4"
        case .float8: "float8"
        case .unknown: "unknown"
        case .bpchar: "bpchar"
        case .varchar: "varchar"
        case .date: "date"
        case .timestamp: "timestamp"
        case .timestamptz: "timestamptz"
        case .numeric: "numeric"
        case .void: "void"
        case .uuid: "uuid"
        case .jsonb: "jsonb"
        default: "oid \(self.rawValue)"
        }
    }
}

/// A statement parameter. Parameters are always bound, never spliced into SQL text.
///
/// Every case except ``text(_:)`` is sent in PostgreSQL's binary format with its type, so
/// `SELECT $1` returns the same type. ``text(_:)`` is sent in text format with an unspecified
/// type: the server infers the type from the statement, so a text parameter can feed any column
/// whose input syntax accepts it (`jsonb`, enums, `inet`, …); write a cast (`$1::text`) where the
/// statement gives no hint.
public enum PostgresValue: Sendable, Hashable {
    /// SQL NULL (type inferred by the server).
    case null
    /// `bool`.
    case bool(Bool)
    /// `int4`.
    case int32(Int32)
    /// `int8`.
    case int64(Int64)
    /// `float8`.
    case double(Double)
    /// Text in the server's encoding (UTF-8). Must not contain a NUL character.
    case text(String)
    /// `bytea`: any bytes, zero bytes included.
    case bytea([UInt8])
    /// `uuid`. Build one from a string with ``PostgresValue/uuid(string:)`` or from 16 bytes
    /// with ``PostgresValue/uuid(bytes:)``.
    case uuid(UUID)
    /// `timestamptz`, from a `Date` (rounded to whole microseconds).
    case timestamptz(Date)
    /// `timestamptz`, as microseconds since 1970-01-01 00:00:00 UTC.
    case timestamptzMicroseconds(Int64)

    /// A `uuid` parameter from its 16 bytes (RFC 4122 order); `nil` unless exactly 16 bytes.
    public static func uuid(bytes: [UInt8]) -> PostgresValue? {
        guard bytes.count == 16 else { return nil }
        let uuid = UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            )
        )
        return .uuid(uuid)
    }

    /// A `uuid` parameter from its text form (`UUID(uuidString:)` syntax); `nil` when malformed.
    public static func uuid(string: String) -> PostgresValue? {
        UUID(uuidString: string).map(PostgresValue.uuid)
    }

    /// The parameter's type as declared to the server when preparing a statement.
    var dataType: PostgresDataType {
        switch self {
        case .null, .text: .unspecified
        case .bool: .bool
        case .int32: .int4
        case .int64: .int8
        case .double: .float8
        case .bytea: .bytea
        case .uuid: .uuid
        case .timestamptz, .timestamptzMicroseconds: .timestamptz
        }
    }

    /// The name of the case, for error messages that must not show the value itself.
    var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "bool"
        case .int32: "int32"
        case .int64: "int64"
        case .double: "double"
        case .text: "text"
        case .bytea: "bytea"
        case .uuid: "uuid"
        case .timestamptz, .timestamptzMicroseconds: "timestamptz"
        }
    }
}

extension PostgresValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByFloatLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .text(value) }
    public init(integerLiteral value: Int64) { self = .int64(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(nilLiteral: ()) { self = .null }
}

// MARK: - Swift values as parameters

/// A Swift type that can be bound as a statement parameter.
public protocol PostgresEncodable: Sendable {
    /// The parameter to bind for this value.
    var postgresValue: PostgresValue { get }
}

extension PostgresValue: PostgresEncodable {
    public var postgresValue: PostgresValue { self }
}

extension Bool: PostgresEncodable {
    public var postgresValue: PostgresValue { .bool(self) }
}

extension Int32: PostgresEncodable {
    public var postgresValue: PostgresValue { .int32(self) }
}

extension Int64: PostgresEncodable {
    public var postgresValue: PostgresValue { .int64(self) }
}

extension Int: PostgresEncodable {
    public var postgresValue: PostgresValue { .int64(Int64(self)) }
}

extension Double: PostgresEncodable {
    public var postgresValue: PostgresValue { .double(self) }
}

extension String: PostgresEncodable {
    public var postgresValue: PostgresValue { .text(self) }
}

extension Substring: PostgresEncodable {
    public var postgresValue: PostgresValue { .text(String(self)) }
}

extension Array: PostgresEncodable where Element == UInt8 {
    public var postgresValue: PostgresValue { .bytea(self) }
}

extension UUID: PostgresEncodable {
    public var postgresValue: PostgresValue { .uuid(self) }
}

extension Date: PostgresEncodable {
    public var postgresValue: PostgresValue { .timestamptz(self) }
}

// MARK: - Wire encoding

/// Microseconds between the Unix epoch and PostgreSQL's epoch (2000-01-01 00:00:00 UTC).
let postgresEpochOffsetMicroseconds: Int64 = 946_684_800 * 1_000_000

/// Parameters laid out for `PQexecPrepared`: one contiguous buffer plus offsets, so that all the
/// pointers libpq needs stay valid at the same time.
struct EncodedParameters {
    var types: [UInt32] = []
    var formats: [Int32] = []
    var lengths: [Int32] = []
    /// Offset into `bytes`, or -1 for NULL.
    var offsets: [Int] = []
    var bytes: [UInt8] = []

    /// No parameters.
    init() {}

    init(_ values: [PostgresValue]) throws(PostgresError) {
        self.types.reserveCapacity(values.count)
        self.formats.reserveCapacity(values.count)
        self.lengths.reserveCapacity(values.count)
        self.offsets.reserveCapacity(values.count)
        for (index, value) in values.enumerated() {
            self.types.append(value.dataType.rawValue)
            let start = self.bytes.count
            switch value {
            case .null:
                self.append(format: 0, offset: -1, length: 0)
                continue
            case .bool(let bool):
                self.bytes.append(bool ? 1 : 0)
            case .int32(let int):
                self.appendBigEndian(UInt32(bitPattern: int))
            case .int64(let int):
                self.appendBigEndian(UInt64(bitPattern: int))
            case .double(let double):
                self.appendBigEndian(double.bitPattern)
            case .text(let string):
                let utf8 = string.utf8
                // libpq reads text parameters up to the first NUL and ignores the length: a NUL
                // inside would silently cut the value.
                if utf8.contains(0) {
                    throw PostgresError(
                        code: .invalidData,
                        message: "text parameter $\(index + 1) contains a NUL character"
                    )
                }
                self.bytes.append(contentsOf: utf8)
                self.bytes.append(0)
                self.append(format: 0, offset: start, length: Int32(utf8.count))
                continue
            case .bytea(let data):
                self.bytes.append(contentsOf: data)
            case .uuid(let uuid):
                withUnsafeBytes(of: uuid.uuid) { self.bytes.append(contentsOf: $0) }
            case .timestamptz(let date):
                let micros = (date.timeIntervalSince1970 * 1_000_000).rounded()
                guard let value = Int64(exactly: micros) else {
                    throw PostgresError(
                        code: .invalidData,
                        message: "timestamptz parameter $\(index + 1) is out of range"
                    )
                }
                self.appendBigEndian(UInt64(bitPattern: value &- postgresEpochOffsetMicroseconds))
            case .timestamptzMicroseconds(let micros):
                let (value, overflow) = micros.subtractingReportingOverflow(postgresEpochOffsetMicroseconds)
                if overflow {
                    throw PostgresError(
                        code: .invalidData,
                        message: "timestamptz parameter $\(index + 1) is out of range"
                    )
                }
                self.appendBigEndian(UInt64(bitPattern: value))
            }
            guard let length = Int32(exactly: self.bytes.count - start) else {
                throw PostgresError(code: .invalidData, message: "parameter $\(index + 1) is too large")
            }
            self.append(format: 1, offset: start, length: length)
        }
        // Never empty, so that even a zero-length value gets a non-NULL pointer (NULL is SQL NULL).
        self.bytes.append(0)
    }

    private mutating func append(format: Int32, offset: Int, length: Int32) {
        self.formats.append(format)
        self.offsets.append(offset)
        self.lengths.append(length)
    }

    private mutating func appendBigEndian<I: FixedWidthInteger>(_ value: I) {
        withUnsafeBytes(of: value.bigEndian) { self.bytes.append(contentsOf: $0) }
    }

    /// Calls `body` with the value pointers (`nil` for NULL), lengths and formats.
    func withPointers<R>(
        _ body: (
            _ values: UnsafePointer<UnsafePointer<CChar>?>?, _ lengths: UnsafePointer<Int32>?,
            _ formats: UnsafePointer<Int32>?
        ) throws -> R
    ) rethrows -> R {
        try self.bytes.withUnsafeBufferPointer { buffer in
            let base = UnsafeRawPointer(buffer.baseAddress!)
            let pointers: [UnsafePointer<CChar>?] = self.offsets.map { offset in
                offset < 0 ? nil : (base + offset).assumingMemoryBound(to: CChar.self)
            }
            return try pointers.withUnsafeBufferPointer { pointers in
                try self.lengths.withUnsafeBufferPointer { lengths in
                    try self.formats.withUnsafeBufferPointer { formats in
                        try body(pointers.baseAddress, lengths.baseAddress, formats.baseAddress)
                    }
                }
            }
        }
    }
}
