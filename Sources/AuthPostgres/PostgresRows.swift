#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A column of a result.
public struct PostgresColumn: Sendable, Hashable {
    /// The column name as the server reports it (an alias when the query gives one).
    public var name: String
    /// The column's type.
    public var dataType: PostgresDataType

    /// Creates a column description.
    public init(name: String, dataType: PostgresDataType) {
        self.name = name
        self.dataType = dataType
    }
}

/// The result of a statement: its rows (copied out of libpq, so it can cross threads) and its
/// command tag.
public struct PostgresRows: RandomAccessCollection, Sendable {
    let storage: Storage

    /// The command tag, e.g. `SELECT 3` or `INSERT 0 1`.
    public let commandTag: String
    /// Rows affected by an INSERT, UPDATE, DELETE, MERGE, SELECT, MOVE, FETCH or COPY; else `nil`.
    public let affectedRows: Int?

    /// The result's columns, in order.
    public var columns: [PostgresColumn] { self.storage.columns }

    public var startIndex: Int { 0 }
    public var endIndex: Int { self.storage.rowCount }

    public subscript(position: Int) -> PostgresRow {
        precondition(position >= 0 && position < self.storage.rowCount, "row index out of range")
        return PostgresRow(storage: self.storage, row: position)
    }

    init(storage: Storage, commandTag: String, affectedRows: Int?) {
        self.storage = storage
        self.commandTag = commandTag
        self.affectedRows = affectedRows
    }

    /// No columns, no rows, no command tag.
    static let empty = PostgresRows(
        storage: Storage(columns: [], rowCount: 0, offsets: [], lengths: [], bytes: []),
        commandTag: "",
        affectedRows: nil
    )

    /// Immutable cell data of a whole result, shared by its rows and cells.
    final class Storage: Sendable {
        let columns: [PostgresColumn]
        let columnIndexes: [String: Int]
        let rowCount: Int
        /// Per cell (row-major): offset into `bytes`, or -1 for NULL.
        let offsets: [Int]
        let lengths: [Int]
        let bytes: [UInt8]

        init(columns: [PostgresColumn], rowCount: Int, offsets: [Int], lengths: [Int], bytes: [UInt8]) {
            self.columns = columns
            var indexes: [String: Int] = [:]
            for (index, column) in columns.enumerated() where indexes[column.name] == nil {
                indexes[column.name] = index
            }
            self.columnIndexes = indexes
            self.rowCount = rowCount
            self.offsets = offsets
            self.lengths = lengths
            self.bytes = bytes
        }
    }
}

/// One row of a ``PostgresRows``.
public struct PostgresRow: Sendable {
    let storage: PostgresRows.Storage
    let row: Int

    /// The number of columns.
    public var count: Int { self.storage.columns.count }

    /// The result's columns, in order.
    public var columns: [PostgresColumn] { self.storage.columns }

    /// The cell in column `index` (0-based). Traps when out of range, like an array.
    public subscript(index: Int) -> PostgresCell {
        precondition(index >= 0 && index < self.storage.columns.count, "column index out of range")
        return PostgresCell(storage: self.storage, row: self.row, column: index)
    }

    /// The cell in the first column named `name`; throws ``PostgresError/Code/decodingFailed``
    /// when there is none.
    public subscript(name: String) -> PostgresCell {
        get throws(PostgresError) {
            guard let index = self.storage.columnIndexes[name] else {
                throw .decodingFailed("the result has no column named \"\(name)\"")
            }
            return PostgresCell(storage: self.storage, row: self.row, column: index)
        }
    }

    /// Decodes column `index` as `T` (use an `Optional` type to accept NULL).
    public func decode<T: PostgresDecodable>(_ type: T.Type, at index: Int) throws(PostgresError) -> T {
        try self[index].decode(type)
    }
}

/// One value of a row, with typed accessors.
///
/// Each accessor throws ``PostgresError/Code/decodingFailed`` when the value is NULL or when the
/// column's type cannot be read as the requested Swift type; use ``decode(_:)`` with an
/// `Optional` type, or check ``isNull``, for nullable columns. Integer accessors accept any
/// integer column whose value fits.
public struct PostgresCell: Sendable {
    let storage: PostgresRows.Storage
    let row: Int
    let columnIndex: Int

    init(storage: PostgresRows.Storage, row: Int, column: Int) {
        self.storage = storage
        self.row = row
        self.columnIndex = column
    }

    private var cellIndex: Int { self.row * self.storage.columns.count + self.columnIndex }

    /// The column of this cell.
    public var column: PostgresColumn { self.storage.columns[self.columnIndex] }

    /// Whether the value is SQL NULL.
    public var isNull: Bool { self.storage.offsets[self.cellIndex] < 0 }

    /// The value in PostgreSQL's binary format, or `nil` for NULL.
    public var rawBytes: ArraySlice<UInt8>? {
        let offset = self.storage.offsets[self.cellIndex]
        guard offset >= 0 else { return nil }
        return self.storage.bytes[offset..<(offset + self.storage.lengths[self.cellIndex])]
    }

    /// Decodes the value as `T`; an `Optional` `T` turns NULL into `nil`.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self) throws(PostgresError) -> T {
        try T(postgresCell: self)
    }

    /// A `bool` column.
    public var bool: Bool {
        get throws(PostgresError) {
            let bytes = try self.value(accepting: [.bool], as: "Bool")
            guard bytes.count == 1 else { throw self.malformed() }
            return bytes.first! != 0
        }
    }

    /// An `int2`, `int4` or `int8` column whose value fits in 32 bits.
    public var int32: Int32 {
        get throws(PostgresError) {
            guard let value = Int32(exactly: try self.integer(as: "Int32")) else {
                throw .decodingFailed("\(self.location) does not fit in Int32")
            }
            return value
        }
    }

    /// An `int2`, `int4`, `int8` or `oid` column.
    public var int64: Int64 {
        get throws(PostgresError) { try self.integer(as: "Int64") }
    }

    /// An `int2`, `int4`, `int8` or `oid` column, as `Int`.
    public var int: Int {
        get throws(PostgresError) {
            guard let value = Int(exactly: try self.integer(as: "Int")) else {
                throw .decodingFailed("\(self.location) does not fit in Int")
            }
            return value
        }
    }

    /// A `float8`, `float4`, `numeric` or integer column.
    public var double: Double {
        get throws(PostgresError) {
            let type = self.column.dataType
            let bytes = try self.value(
                accepting: [.float8, .float4, .numeric, .int2, .int4, .int8],
                as: "Double"
            )
            switch type {
            case .float8:
                guard bytes.count == 8 else { throw self.malformed() }
                return Double(bitPattern: readBigEndian(bytes, as: UInt64.self))
            case .float4:
                guard bytes.count == 4 else { throw self.malformed() }
                return Double(Float(bitPattern: readBigEndian(bytes, as: UInt32.self)))
            case .numeric:
                guard let string = decodeNumeric(bytes), let double = Double(string) else {
                    throw self.malformed()
                }
                return double
            default:
                return Double(try self.integer(as: "Double"))
            }
        }
    }

    /// A text-like column (`text`, `varchar`, `char(n)`, `name`, `json`, `jsonb`, `xml`, enum and
    /// other user-defined types sent as text), a `uuid` (lowercase canonical form) or a `numeric`
    /// (its exact decimal text).
    public var string: String {
        get throws(PostgresError) {
            let type = self.column.dataType
            if type == .uuid { return try self.uuid.uuidString.lowercased() }
            guard self.isTextLike || type == .numeric || type == .jsonb else {
                throw self.mismatch("String")
            }
            guard var bytes = self.rawBytes else { throw self.unexpectedNull("String") }
            if type == .numeric {
                guard let string = decodeNumeric(bytes) else { throw self.malformed() }
                return string
            }
            if type == .jsonb {
                // Binary jsonb is a version byte (1) followed by the JSON text.
                guard bytes.first == 1 else { throw self.malformed() }
                bytes = bytes.dropFirst()
            }
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    /// A `bytea` column.
    public var bytes: [UInt8] {
        get throws(PostgresError) { Array(try self.value(accepting: [.bytea], as: "[UInt8]")) }
    }

    /// A `uuid` column, or a text column holding a UUID.
    public var uuid: UUID {
        get throws(PostgresError) {
            if self.column.dataType != .uuid && self.isTextLike {
                guard let uuid = UUID(uuidString: try self.string) else { throw self.malformed() }
                return uuid
            }
            let bytes = try self.value(accepting: [.uuid], as: "UUID")
            guard bytes.count == 16 else { throw self.malformed() }
            let b = Array(bytes)
            return UUID(
                uuid: (
                    b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]
                )
            )
        }
    }

    /// A `timestamptz`, `timestamp` (read as UTC) or `date` (midnight UTC) column. The infinite
    /// timestamps become `Date.distantFuture` and `Date.distantPast`.
    public var date: Date {
        get throws(PostgresError) {
            if self.column.dataType == .date {
                let bytes = try self.value(accepting: [.date], as: "Date")
                guard bytes.count == 4 else { throw self.malformed() }
                let days = Int32(bitPattern: readBigEndian(bytes, as: UInt32.self))
                if days == .max { return .distantFuture }
                if days == .min { return .distantPast }
                return Date(timeIntervalSince1970: Double(Int64(days) * 86_400 + 946_684_800))
            }
            let raw = try self.rawTimestamp(as: "Date")
            if raw == .max { return .distantFuture }
            if raw == .min { return .distantPast }
            return Date(timeIntervalSince1970: Double(raw + postgresEpochOffsetMicroseconds) / 1_000_000)
        }
    }

    /// A `timestamptz` or `timestamp` (read as UTC) column as microseconds since 1970-01-01 UTC.
    /// The infinite timestamps become `Int64.max` and `Int64.min`.
    public var microsecondsSinceEpoch: Int64 {
        get throws(PostgresError) {
            let raw = try self.rawTimestamp(as: "microseconds")
            if raw == .max || raw == .min { return raw }
            return raw + postgresEpochOffsetMicroseconds
        }
    }

    // MARK: Helpers

    private var isTextLike: Bool {
        switch self.column.dataType {
        case .text, .varchar, .bpchar, .name, .char, .json, .xml, .unknown: true
        default: self.column.dataType.rawValue >= PostgresDataType.firstUserOID
        }
    }

    private var location: String {
        "column \"\(self.column.name)\" (\(self.columnIndex)) of row \(self.row)"
    }

    private func value(
        accepting types: [PostgresDataType],
        as swiftType: String
    ) throws(PostgresError)
        -> ArraySlice<UInt8>
    {
        guard types.contains(self.column.dataType) else { throw self.mismatch(swiftType) }
        guard let bytes = self.rawBytes else { throw self.unexpectedNull(swiftType) }
        return bytes
    }

    private func integer(as swiftType: String) throws(PostgresError) -> Int64 {
        let bytes = try self.value(accepting: [.int2, .int4, .int8, .oid], as: swiftType)
        switch (self.column.dataType, bytes.count) {
        case (.int2, 2): return Int64(Int16(bitPattern: readBigEndian(bytes, as: UInt16.self)))
        case (.int4, 4): return Int64(Int32(bitPattern: readBigEndian(bytes, as: UInt32.self)))
        case (.oid, 4): return Int64(readBigEndian(bytes, as: UInt32.self))
        case (.int8, 8): return Int64(bitPattern: readBigEndian(bytes, as: UInt64.self))
        default: throw self.malformed()
        }
    }

    private func rawTimestamp(as swiftType: String) throws(PostgresError) -> Int64 {
        let bytes = try self.value(accepting: [.timestamptz, .timestamp], as: swiftType)
        guard bytes.count == 8 else { throw self.malformed() }
        return Int64(bitPattern: readBigEndian(bytes, as: UInt64.self))
    }

    func mismatch(_ swiftType: String) -> PostgresError {
        .decodingFailed("\(self.location) has type \(self.column.dataType), which cannot be read as \(swiftType)")
    }

    func unexpectedNull(_ swiftType: String) -> PostgresError {
        .decodingFailed("\(self.location) is NULL; read it as \(swiftType)? to accept NULL")
    }

    private func malformed() -> PostgresError {
        .decodingFailed("\(self.location) holds malformed \(self.column.dataType) data")
    }
}

private func readBigEndian<I: FixedWidthInteger>(_ bytes: ArraySlice<UInt8>, as type: I.Type) -> I {
    bytes.withUnsafeBytes { I(bigEndian: $0.loadUnaligned(as: I.self)) }
}

/// The decimal text of a binary `numeric`, or `nil` when malformed.
func decodeNumeric(_ bytes: ArraySlice<UInt8>) -> String? {
    guard bytes.count >= 8 else { return nil }
    func int16(at index: Int) -> Int {
        let start = bytes.startIndex + index * 2
        return Int(Int16(bitPattern: readBigEndian(bytes[start..<(start + 2)], as: UInt16.self)))
    }
    let digitCount = int16(at: 0)
    let weight = int16(at: 1)
    let sign = UInt16(truncatingIfNeeded: int16(at: 2))
    let scale = int16(at: 3)
    guard digitCount >= 0, bytes.count == 8 + digitCount * 2, scale >= 0 else { return nil }
    switch sign {
    case 0xC000: return "NaN"
    case 0xD000: return "Infinity"
    case 0xF000: return "-Infinity"
    case 0x0000, 0x4000: break
    default: return nil
    }
    func digit(_ index: Int) -> Int { index >= 0 && index < digitCount ? int16(at: 4 + index) : 0 }
    func padded(_ group: Int) -> String {
        let text = String(group)
        return String(repeating: "0", count: max(0, 4 - text.count)) + text
    }
    var text = sign == 0x4000 ? "-" : ""
    if weight < 0 {
        text += "0"
    } else {
        for index in 0...weight {
            text += index == 0 ? String(digit(index)) : padded(digit(index))
        }
    }
    if scale > 0 {
        var fraction = ""
        var index = weight + 1
        while fraction.count < scale {
            fraction += padded(digit(index))
            index += 1
        }
        text += "." + fraction.prefix(scale)
    }
    return text
}

// MARK: - Decodable Swift types

/// A Swift type that a ``PostgresCell`` can be decoded into.
public protocol PostgresDecodable: Sendable {
    /// Decodes `cell`, throwing ``PostgresError/Code/decodingFailed`` when it cannot.
    init(postgresCell cell: PostgresCell) throws(PostgresError)
}

extension Bool: PostgresDecodable {
    public init(postgresCell cell: PostgresCell) throws(PostgresError) { self = try cell.bool }
}

extension Int32: PostgresDecodable {
    public init(postgresCell cell: PostgresCell) throws(PostgresError) { self = try cell.int32 }
}

extension Int64: PostgresDecodable {
    public init(postgresCell cell: PostgresCell) throws(PostgresError) { self = try cell.int64 }
}

extension Int: PostgresDecodable {
    public init(postgresCell cell: PostgresCell) throws(PostgresError) { self = try cell.int }
}

extension Double: PostgresDecodable {
    public init(postgresCell cell: PostgresCell) throws(PostgresError) { self = try cell.double }
}

extension String: PostgresDecodable {
    public init(postgresCell cell: PostgresCell) throws(PostgresError) { self = try cell.string }
}

extension Array: PostgresDecodable where Element == UInt8 {
    public init(postgresCell cell: PostgresCell) throws(PostgresError) { self = try cell.bytes }
}

extension UUID: PostgresDecodable {
    public init(postgresCell cell: PostgresCell) throws(PostgresError) { self = try cell.uuid }
}

extension Date: PostgresDecodable {
    public init(postgresCell cell: PostgresCell) throws(PostgresError) { self = try cell.date }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public init(postgresCell cell: PostgresCell) throws(PostgresError) {
        self = cell.isNull ? nil : try Wrapped(postgresCell: cell)
    }
}
