import NIOCore

/// Splits a byte stream into frames: a 4-byte big-endian length, then that many bytes.
///
/// The length is checked against `maxFrameSize` before anything is allocated for the frame.
/// The decoder also remembers when the frame it is waiting for began, so a connection can cut
/// off a peer that starts a frame and never finishes it.
public struct FrameDecoder: Sendable {
    public struct FrameTooLargeError: Error, Hashable {
        public let length: Int
        /// May change between frames (a server raises it once Hello is accepted).
        public var maxFrameSize: Int
    }

    /// May change between frames (a server raises it once Hello is accepted).
    public var maxFrameSize: Int
    private var buffer: ByteBuffer?

    public init(maxFrameSize: Int) {
        self.maxFrameSize = maxFrameSize
    }

    /// Whether some bytes of an unfinished frame are buffered.
    public var hasPartialFrame: Bool { (buffer?.readableBytes ?? 0) > 0 }

    public mutating func append(_ bytes: ByteBuffer) {
        if buffer == nil || buffer!.readableBytes == 0 {
            buffer = bytes
        } else {
            var incoming = bytes
            buffer!.writeBuffer(&incoming)
        }
    }

    /// The next complete frame's body, or nil when more bytes are needed.
    public mutating func nextFrame() throws(FrameTooLargeError) -> ByteBuffer? {
        guard var readable = buffer, readable.readableBytes >= 4 else { return nil }
        let length = Int(readable.getInteger(at: readable.readerIndex, endianness: .big, as: UInt32.self)!)
        guard length <= maxFrameSize else { throw FrameTooLargeError(length: length, maxFrameSize: maxFrameSize) }
        guard readable.readableBytes >= 4 + length else { return nil }
        readable.moveReaderIndex(forwardBy: 4)
        let frame = readable.readSlice(length: length)!
        if readable.readableBytes == 0 {
            buffer = nil
        } else {
            buffer = readable
            // Avoid holding on to a large, mostly consumed buffer.
            if readable.readerIndex > 64 * 1024 { buffer!.discardReadBytes() }
        }
        return frame
    }
}
