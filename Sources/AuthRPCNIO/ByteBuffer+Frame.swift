import AuthProtobuf
import NIOCore

extension ByteBuffer {
    /// Writes one frame: the 4-byte big-endian length, then the serialized envelope.
    @discardableResult
    public mutating func writeFrame(_ frame: Auth_Rpc_V1_Frame) throws -> Int {
        try frame.withSerializedBytes { bytes in
            self.writeInteger(UInt32(bytes.count), endianness: .big) + self.writeBytes(bytes)
        }
    }
}

extension Auth_Rpc_V1_Frame {
    /// Decodes a frame body (without its length prefix).
    public init(frameBody: ByteBuffer) throws {
        self = try frameBody.withUnsafeReadableBytes { try Auth_Rpc_V1_Frame(serializedBytes: $0) }
    }
}
