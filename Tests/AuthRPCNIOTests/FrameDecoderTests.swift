import NIOCore
import Testing

@testable import AuthRPCNIO

@Suite struct FrameDecoderTests {
    func framed(_ bodies: [[UInt8]]) -> ByteBuffer {
        var buffer = ByteBuffer()
        for body in bodies {
            buffer.writeInteger(UInt32(body.count), endianness: .big)
            buffer.writeBytes(body)
        }
        return buffer
    }

    @Test func splitsConcatenatedFrames() throws {
        var decoder = FrameDecoder(maxFrameSize: 100)
        decoder.append(framed([[1, 2, 3], [], [4]]))
        #expect(try decoder.nextFrame().map { Array($0.readableBytesView) } == [1, 2, 3])
        #expect(try decoder.nextFrame().map { Array($0.readableBytesView) } == [])
        #expect(try decoder.nextFrame().map { Array($0.readableBytesView) } == [4])
        #expect(try decoder.nextFrame() == nil)
        #expect(!decoder.hasPartialFrame)
    }

    @Test func waitsForTheRestOfAFrame() throws {
        var decoder = FrameDecoder(maxFrameSize: 100)
        let whole = framed([[9, 8, 7, 6]])
        decoder.append(whole.getSlice(at: 0, length: 2)!)
        #expect(try decoder.nextFrame() == nil)
        #expect(decoder.hasPartialFrame)
        decoder.append(whole.getSlice(at: 2, length: 4)!)
        #expect(try decoder.nextFrame() == nil)
        decoder.append(whole.getSlice(at: 6, length: 2)!)
        #expect(try decoder.nextFrame().map { Array($0.readableBytesView) } == [9, 8, 7, 6])
        #expect(!decoder.hasPartialFrame)
    }

    @Test func refusesAnOversizedLengthBeforeTheBodyArrives() {
        var decoder = FrameDecoder(maxFrameSize: 1 << 20)
        var header = ByteBuffer()
        header.writeInteger(UInt32((1 << 20) + 1), endianness: .big)
        decoder.append(header)
        #expect(throws: FrameDecoder.FrameTooLargeError(length: (1 << 20) + 1, maxFrameSize: 1 << 20)) {
            try decoder.nextFrame()
        }
    }

    @Test func acceptsExactlyTheMaximum() throws {
        var decoder = FrameDecoder(maxFrameSize: 8)
        decoder.append(framed([[UInt8](repeating: 1, count: 8)]))
        #expect(try decoder.nextFrame()?.readableBytes == 8)
    }
}
