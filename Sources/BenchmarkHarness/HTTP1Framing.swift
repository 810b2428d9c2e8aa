import NIOCore

/// One HTTP/1.1 response as a load generator needs it: the status code and the body.
public struct HTTP1Response: Sendable {
    public var status: Int
    public var body: ByteBuffer

    public init(status: Int, body: ByteBuffer) {
        self.status = status
        self.body = body
    }
}

/// One HTTP/1.1 request as a load generator's own small server needs it (the sign-in
/// benchmark's webhook): the request line, the headers it asked for, the body.
public struct HTTP1Request: Sendable {
    public var method: String
    public var target: String
    /// The headers the decoder was asked to keep, by lowercase name; the last of repeated ones.
    public var headers: [String: String]
    public var body: ByteBuffer
    /// Whether the connection stays open after the answer: HTTP/1.1 unless `Connection: close`,
    /// HTTP/1.0 only with `Connection: keep-alive`.
    public var keepAlive: Bool
}

/// What ``HTTP1ResponseDecoder`` and ``HTTP1RequestDecoder`` refuse.
public enum HTTP1FramingError: Error, Equatable {
    case malformedStartLine
    case malformedHeader
    case interimResponse
    case headTooLarge
    case bodyTooLarge
    case transferEncoding
    case missingContentLength
    case conflictingContentLength
    case truncated
}

/// Frames the HTTP/1.1 responses of a server whose answers carry a `Content-Length` (the
/// gateway's always do): the status line is checked, every header but `Content-Length` and
/// `Transfer-Encoding` is skipped without being copied, and the body is a slice of the bytes
/// read. It is the sign-in load generator's reader (`gateway-benchmark signins`), whose own CPU
/// is part of what the benchmark measures: NIO's `HTTPResponseDecoder` builds every header as
/// two `String`s and hands head, body and end on separately (docs/benchmarks.md, "The load
/// generator").
///
/// What it refuses, by throwing ``HTTP1FramingError``: a chunked or otherwise transfer-encoded
/// body, a final response without `Content-Length` (a body up to the close), an interim (1xx)
/// response, two different lengths, obsolete line folding, a head over ``maximumHeadSize``
/// or a body over ``maximumBodySize``, and bytes left over when the connection closes. 204 and
/// 304 answers have no body whatever their headers say; it is not for responses to `HEAD`.
public struct HTTP1ResponseDecoder: NIOSingleStepByteToMessageDecoder {
    public typealias InboundOut = HTTP1Response

    /// Largest status line and headers accepted, their final empty line included.
    public var maximumHeadSize: Int { framing.maximumHeadSize }
    /// Largest body accepted.
    public var maximumBodySize: Int { framing.maximumBodySize }
    private var framing: HTTP1MessageFraming<Int>

    public init(maximumHeadSize: Int = 16 << 10, maximumBodySize: Int = 1 << 20) {
        framing = HTTP1MessageFraming(maximumHeadSize: maximumHeadSize, maximumBodySize: maximumBodySize) {
            lines,
            maximumBodySize in
            guard let statusLine = lines.next(), let status = Self.statusCode(statusLine) else {
                throw HTTP1FramingError.malformedStartLine
            }
            guard status >= 200 else { throw HTTP1FramingError.interimResponse }
            let fields = try HTTP1HeaderFields(&lines, keeping: [], maximumBodySize: maximumBodySize)
            if status == 204 || status == 304 { return (status, 0) }
            guard let length = fields.contentLength else { throw HTTP1FramingError.missingContentLength }
            return (status, length)
        }
    }

    public mutating func decode(buffer: inout ByteBuffer) throws -> HTTP1Response? {
        try framing.decode(&buffer).map { HTTP1Response(status: $0.head, body: $0.body) }
    }

    public mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> HTTP1Response? {
        try framing.decodeLast(&buffer).map { HTTP1Response(status: $0.head, body: $0.body) }
    }

    /// The code of `HTTP/1.0 NNN` or `HTTP/1.1 NNN`, followed by the end or a space.
    private static func statusCode(_ line: UnsafeRawBufferPointer) -> Int? {
        guard line.count >= 12, line.count == 12 || line[12] == 32, line[8] == 32,
            HTTP1Bytes.version(UnsafeRawBufferPointer(rebasing: line[..<8])) != nil
        else { return nil }
        var code = 0
        for index in 9..<12 {
            guard (48...57).contains(line[index]) else { return nil }
            code = code * 10 + Int(line[index] - 48)
        }
        return code >= 100 ? code : nil
    }
}

/// Frames HTTP/1.1 requests whose body, if any, has a `Content-Length`, keeping the headers
/// asked for: the sign-in benchmark's webhook receiver, for the reason ``HTTP1ResponseDecoder``
/// gives. It refuses what that one does (a request without `Content-Length` has no body), and
/// a request line that is not `METHOD target HTTP/1.x`.
public struct HTTP1RequestDecoder: NIOSingleStepByteToMessageDecoder {
    public typealias InboundOut = HTTP1Request

    private struct Head {
        var method: String
        var target: String
        var headers: [String: String]
        var keepAlive: Bool
    }

    private var framing: HTTP1MessageFraming<Head>

    /// `keeping` names the headers to return, lowercase.
    public init(keeping: [String], maximumHeadSize: Int = 16 << 10, maximumBodySize: Int = 1 << 20) {
        let kept = keeping.map { $0.lowercased() }
        framing = HTTP1MessageFraming(maximumHeadSize: maximumHeadSize, maximumBodySize: maximumBodySize) {
            lines,
            maximumBodySize in
            guard let requestLine = lines.next(), let (method, target, minor) = Self.requestLine(requestLine) else {
                throw HTTP1FramingError.malformedStartLine
            }
            let fields = try HTTP1HeaderFields(&lines, keeping: kept + ["connection"], maximumBodySize: maximumBodySize)
            let connection = fields.kept["connection"]?.lowercased() ?? ""
            let keepAlive = minor == 1 ? !connection.contains("close") : connection.contains("keep-alive")
            var headers = fields.kept
            if !kept.contains("connection") { headers["connection"] = nil }
            let head = Head(method: method, target: target, headers: headers, keepAlive: keepAlive)
            return (head, fields.contentLength ?? 0)
        }
    }

    public mutating func decode(buffer: inout ByteBuffer) throws -> HTTP1Request? {
        try framing.decode(&buffer).map(Self.request)
    }

    public mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> HTTP1Request? {
        try framing.decodeLast(&buffer).map(Self.request)
    }

    private static func request(_ message: (head: Head, body: ByteBuffer)) -> HTTP1Request {
        HTTP1Request(
            method: message.head.method,
            target: message.head.target,
            headers: message.head.headers,
            body: message.body,
            keepAlive: message.head.keepAlive
        )
    }

    /// Method, target and minor version of `METHOD SP target SP HTTP/1.x`.
    private static func requestLine(_ line: UnsafeRawBufferPointer) -> (String, String, Int)? {
        guard let firstSpace = line.firstIndex(of: 32), firstSpace > 0, line.count >= firstSpace + 11,
            line[line.count - 9] == 32,
            let minor = HTTP1Bytes.version(UnsafeRawBufferPointer(rebasing: line[(line.count - 8)...]))
        else { return nil }
        let method = UnsafeRawBufferPointer(rebasing: line[..<firstSpace])
        let target = UnsafeRawBufferPointer(rebasing: line[(firstSpace + 1)..<(line.count - 9)])
        // Methods are tokens (upper-case letters here); a target has no spaces or controls.
        guard method.allSatisfy({ (65...90).contains($0) }), !target.isEmpty,
            target.allSatisfy({ $0 > 32 && $0 < 127 })
        else { return nil }
        return (String(decoding: method, as: UTF8.self), String(decoding: target, as: UTF8.self), minor)
    }
}

/// What both decoders share: finding the end of a head, parsing it once, waiting for its body.
private struct HTTP1MessageFraming<Head> {
    typealias ParseHead = (inout HTTP1Bytes.Lines, _ maximumBodySize: Int) throws -> (Head, bodyLength: Int)

    let maximumHeadSize: Int
    let maximumBodySize: Int
    private let parseHead: ParseHead
    /// The head of the message being read once it is complete, with its length in bytes (the
    /// empty line included) and its body's.
    private var head: (head: Head, length: Int, bodyLength: Int)?
    /// How many bytes of an incomplete head were already searched for its end.
    private var searched = 0

    init(maximumHeadSize: Int, maximumBodySize: Int, parseHead: @escaping ParseHead) {
        self.maximumHeadSize = maximumHeadSize
        self.maximumBodySize = maximumBodySize
        self.parseHead = parseHead
    }

    mutating func decode(_ buffer: inout ByteBuffer) throws -> (head: Head, body: ByteBuffer)? {
        if head == nil {
            guard let end = try headEnd(buffer) else { return nil }
            let (parsed, bodyLength) = try buffer.withUnsafeReadableBytes { bytes in
                var lines = HTTP1Bytes.Lines(UnsafeRawBufferPointer(rebasing: bytes[..<end]))
                return try parseHead(&lines, maximumBodySize)
            }
            head = (parsed, end + 4, bodyLength)
        }
        guard let head, buffer.readableBytes >= head.length + head.bodyLength else { return nil }
        buffer.moveReaderIndex(forwardBy: head.length)
        let body = buffer.readSlice(length: head.bodyLength)!
        self.head = nil
        searched = 0
        return (head.head, body)
    }

    mutating func decodeLast(_ buffer: inout ByteBuffer) throws -> (head: Head, body: ByteBuffer)? {
        if let message = try decode(&buffer) { return message }
        guard buffer.readableBytes == 0 else { throw HTTP1FramingError.truncated }
        return nil
    }

    /// Where the CR LF CR LF that ends the head at the start of `buffer` begins, or nil while it
    /// has not arrived.
    private mutating func headEnd(_ buffer: ByteBuffer) throws -> Int? {
        let (end, searchedNow) = buffer.withUnsafeReadableBytes { bytes -> (Int?, Int) in
            // Resume three bytes back: the CR LF CR LF may straddle two reads.
            var index = max(0, searched - 3)
            while index + 3 < bytes.count {
                if bytes[index] == 13, bytes[index + 1] == 10, bytes[index + 2] == 13, bytes[index + 3] == 10 {
                    return (index, index)
                }
                index += 1
            }
            return (nil, bytes.count)
        }
        searched = searchedNow
        guard let end else {
            if buffer.readableBytes > maximumHeadSize { throw HTTP1FramingError.headTooLarge }
            return nil
        }
        guard end + 4 <= maximumHeadSize else { throw HTTP1FramingError.headTooLarge }
        return end
    }
}

/// The header lines of a head: the body's length, and the values of the headers asked for.
private struct HTTP1HeaderFields {
    var contentLength: Int?
    var kept: [String: String] = [:]

    /// Reads the lines left in `lines`; `keeping` are lowercase names.
    init(_ lines: inout HTTP1Bytes.Lines, keeping: [String], maximumBodySize: Int) throws {
        while let line = lines.next() {
            guard let first = line.first, first != 32, first != 9, let colon = line.firstIndex(of: 58), colon > 0
            else { throw HTTP1FramingError.malformedHeader }
            let name = UnsafeRawBufferPointer(rebasing: line[..<colon])
            let value = HTTP1Bytes.trimmed(UnsafeRawBufferPointer(rebasing: line[(colon + 1)...]))
            if HTTP1Bytes.equalsLowercased(name, "transfer-encoding") { throw HTTP1FramingError.transferEncoding }
            if HTTP1Bytes.equalsLowercased(name, "content-length") {
                let length = try HTTP1Bytes.decimal(value, limit: maximumBodySize)
                if let contentLength, contentLength != length { throw HTTP1FramingError.conflictingContentLength }
                contentLength = length
            } else if !keeping.isEmpty {
                for wanted in keeping where HTTP1Bytes.equalsLowercased(name, wanted) {
                    kept[wanted] = String(decoding: value, as: UTF8.self)
                }
            }
        }
    }
}

/// Byte-level helpers of the two decoders.
private enum HTTP1Bytes {
    /// The minor version of `HTTP/1.0` or `HTTP/1.1` (any letter case in `HTTP`).
    static func version(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard bytes.count == 8, bytes[7] == 48 || bytes[7] == 49,
            equalsLowercased(UnsafeRawBufferPointer(rebasing: bytes[..<7]), "http/1.")
        else { return nil }
        return Int(bytes[7] - 48)
    }

    /// A `Content-Length` value: digits only, at most `limit`.
    static func decimal(_ bytes: UnsafeRawBufferPointer, limit: Int) throws -> Int {
        guard !bytes.isEmpty else { throw HTTP1FramingError.malformedHeader }
        var value = 0
        for byte in bytes {
            guard (48...57).contains(byte) else { throw HTTP1FramingError.malformedHeader }
            value = value * 10 + Int(byte - 48)
            guard value <= limit else { throw HTTP1FramingError.bodyTooLarge }
        }
        return value
    }

    static func trimmed(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        var start = bytes.startIndex
        var end = bytes.endIndex
        while start < end, bytes[start] == 32 || bytes[start] == 9 { start += 1 }
        while end > start, bytes[end - 1] == 32 || bytes[end - 1] == 9 { end -= 1 }
        return UnsafeRawBufferPointer(rebasing: bytes[start..<end])
    }

    /// Whether `bytes`, ASCII letters lowercased, equal `lowercase`.
    static func equalsLowercased(_ bytes: UnsafeRawBufferPointer, _ lowercase: StaticString) -> Bool {
        equalsLowercased(bytes, UnsafeRawBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount))
    }

    static func equalsLowercased(_ bytes: UnsafeRawBufferPointer, _ lowercase: String) -> Bool {
        var lowercase = lowercase
        return lowercase.withUTF8 { equalsLowercased(bytes, UnsafeRawBufferPointer($0)) }
    }

    static func equalsLowercased(_ bytes: UnsafeRawBufferPointer, _ expected: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count == expected.count else { return false }
        for index in 0..<bytes.count {
            let byte = bytes[index]
            let folded = (65...90).contains(byte) ? byte | 0x20 : byte
            guard folded == expected[index] else { return false }
        }
        return true
    }

    /// The lines of a head, split at CR LF.
    struct Lines {
        let bytes: UnsafeRawBufferPointer
        var start = 0

        init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

        mutating func next() -> UnsafeRawBufferPointer? {
            guard start <= bytes.count else { return nil }
            var end = start
            while end + 1 < bytes.count, !(bytes[end] == 13 && bytes[end + 1] == 10) { end += 1 }
            if end + 1 >= bytes.count { end = bytes.count }
            let line = UnsafeRawBufferPointer(rebasing: bytes[start..<end])
            start = end + 2
            return line
        }
    }
}

/// Writes HTTP/1.1 requests with a body, as one buffer: the request line, `Content-Length`,
/// the given headers, the body.
public enum HTTP1RequestWriter {
    /// Appends the request to `buffer`. `method`, `target` and every header name and value are
    /// the caller's own constants or generated text: none may hold a CR or LF (checked).
    public static func write(
        method: String,
        target: String,
        headers: [(name: String, value: String)],
        body: String,
        into buffer: inout ByteBuffer
    ) {
        precondition(!containsLineBreak(method) && !containsLineBreak(target), "a line break in the request line")
        buffer.writeString(method)
        buffer.writeStaticString(" ")
        buffer.writeString(target)
        buffer.writeStaticString(" HTTP/1.1\r\ncontent-length: ")
        buffer.writeString(String(body.utf8.count))
        for (name, value) in headers {
            precondition(!containsLineBreak(name) && !containsLineBreak(value), "a line break in a header")
            buffer.writeStaticString("\r\n")
            buffer.writeString(name)
            buffer.writeStaticString(": ")
            buffer.writeString(value)
        }
        buffer.writeStaticString("\r\n\r\n")
        buffer.writeString(body)
    }

    private static func containsLineBreak(_ text: String) -> Bool {
        text.utf8.contains(13) || text.utf8.contains(10)
    }
}
