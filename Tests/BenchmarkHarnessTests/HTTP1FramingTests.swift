import BenchmarkHarness
import NIOCore
import Testing

/// Feeds `chunks` to `decoder` one after another, as reads would bring them, and collects every
/// message; with `closeAfter`, then as the connection's close would.
private func decodeAll<Decoder: NIOSingleStepByteToMessageDecoder>(
    _ chunks: [String],
    with decoder: Decoder,
    closeAfter: Bool = false
) throws -> [Decoder.InboundOut] {
    var decoder = decoder
    var buffer = ByteBuffer()
    var messages: [Decoder.InboundOut] = []
    for chunk in chunks {
        buffer.writeString(chunk)
        while let message = try decoder.decode(buffer: &buffer) { messages.append(message) }
        buffer.discardReadBytes()
    }
    if closeAfter {
        while let message = try decoder.decodeLast(buffer: &buffer, seenEOF: true) { messages.append(message) }
    }
    return messages
}

@Suite struct HTTP1ResponseDecoderTests {
    private func decode(
        _ chunks: [String],
        decoder: HTTP1ResponseDecoder = HTTP1ResponseDecoder(),
        closeAfter: Bool = false
    ) throws -> [HTTP1Response] {
        try decodeAll(chunks, with: decoder, closeAfter: closeAfter)
    }

    private func body(_ response: HTTP1Response) -> String {
        String(buffer: response.body)
    }

    @Test func framesAResponseByItsContentLength() throws {
        let responses = try decode([
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCONTENT-LENGTH:  7 \r\n\r\n{\"a\":1}"
        ])
        #expect(responses.count == 1)
        #expect(responses.first?.status == 200)
        #expect(responses.first.map(body) == #"{"a":1}"#)
    }

    @Test func framesResponsesSplitAnywhereAndBackToBack() throws {
        let first = "HTTP/1.1 429 Too Many Requests\r\ncontent-length: 2\r\nretry-after: 3\r\n\r\n{}"
        let second = "HTTP/1.0 204 No Content\r\ncontent-length: 9\r\n\r\n"
        let third = "HTTP/1.1 500\r\ncontent-length: 5\r\n\r\nerror"
        let whole = first + second + third
        // Every split of the three into two reads, then the whole one byte per read.
        for split in 0...whole.utf8.count {
            let bytes = Array(whole.utf8)
            let chunks = [
                String(decoding: bytes[..<split], as: UTF8.self), String(decoding: bytes[split...], as: UTF8.self),
            ]
            let responses = try decode(chunks)
            #expect(responses.map(\.status) == [429, 204, 500], "split at \(split)")
            #expect(responses.map(body) == ["{}", "", "error"], "split at \(split)")
        }
        let bytewise = try decode(whole.utf8.map { String(decoding: [$0], as: UTF8.self) })
        #expect(bytewise.map(\.status) == [429, 204, 500])
        #expect(bytewise.map(body) == ["{}", "", "error"])
    }

    @Test func waitsForTheWholeBody() throws {
        var decoder = HTTP1ResponseDecoder()
        var buffer = ByteBuffer(string: "HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n12345")
        #expect(try decoder.decode(buffer: &buffer) == nil)
        buffer.writeString("67890")
        let response = try decoder.decode(buffer: &buffer)
        #expect(response.map(body) == "1234567890")
        #expect(buffer.readableBytes == 0)
    }

    @Test func refusesWhatItCannotFrame() {
        let cases: [(String, HTTP1FramingError)] = [
            ("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", .transferEncoding),
            ("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\n", .missingContentLength),
            ("HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n", .conflictingContentLength),
            ("HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n", .malformedHeader),
            ("HTTP/1.1 200 OK\r\ncontent-length: 1x\r\n\r\n", .malformedHeader),
            ("HTTP/1.1 200 OK\r\ncontent-length:\r\n\r\n", .malformedHeader),
            ("HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", .malformedHeader),
            ("HTTP/1.1 200 OK\r\n: empty name\r\n\r\n", .malformedHeader),
            ("HTTP/1.1 200 OK\r\nx-a: 1\r\n folded\r\n\r\n", .malformedHeader),
            ("HTTP/1.1 100 Continue\r\n\r\n", .interimResponse),
            ("HTTP/2.0 200 OK\r\ncontent-length: 0\r\n\r\n", .malformedStartLine),
            ("HTTP/1.1 20 OK\r\ncontent-length: 0\r\n\r\n", .malformedStartLine),
            ("HTTP/1.1 2000\r\ncontent-length: 0\r\n\r\n", .malformedStartLine),
            ("HTTP/1.1 099\r\ncontent-length: 0\r\n\r\n", .malformedStartLine),
            ("\r\n\r\n", .malformedStartLine),
            ("HTTP/1.1 200 OK\r\ncontent-length: 99999999999999999999999\r\n\r\n", .bodyTooLarge),
        ]
        for (response, failure) in cases {
            #expect(throws: failure, "\(response)") { _ = try decode([response]) }
        }
    }

    @Test func boundsTheHeadAndTheBody() {
        let small = HTTP1ResponseDecoder(maximumHeadSize: 64, maximumBodySize: 10)
        // Over the limit before the head's end arrives, and with it.
        #expect(throws: HTTP1FramingError.headTooLarge) {
            _ = try decode(["HTTP/1.1 200 OK\r\nx-padding: " + String(repeating: "a", count: 80)], decoder: small)
        }
        #expect(throws: HTTP1FramingError.headTooLarge) {
            _ = try decode(
                ["HTTP/1.1 200 OK\r\nx-padding: " + String(repeating: "a", count: 40) + "\r\n\r\n"],
                decoder: small
            )
        }
        #expect(throws: HTTP1FramingError.bodyTooLarge) {
            _ = try decode(["HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\n"], decoder: small)
        }
        #expect(throws: Never.self) {
            _ = try decode(["HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n0123456789"], decoder: small)
        }
    }

    @Test func aCloseInsideAResponseIsAnError() throws {
        #expect(throws: HTTP1FramingError.truncated) {
            _ = try decode(["HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n12"], closeAfter: true)
        }
        #expect(throws: HTTP1FramingError.truncated) {
            _ = try decode(["HTTP/1.1 200 OK\r\ncontent"], closeAfter: true)
        }
        let complete = try decode(["HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"], closeAfter: true)
        #expect(complete.map(body) == ["ok"])
    }
}

@Suite struct HTTP1RequestDecoderTests {
    private func decode(_ chunks: [String], keeping: [String] = ["x-auth-signature"]) throws -> [HTTP1Request] {
        try decodeAll(chunks, with: HTTP1RequestDecoder(keeping: keeping, maximumBodySize: 64))
    }

    @Test func framesRequestsKeepingTheHeadersAskedFor() throws {
        let first =
            "POST /otp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Auth-Signature: sha256=ab\r\n"
            + "Content-Length: 4\r\nUser-Agent: auth-otp-dispatch/1\r\n\r\nbody"
        let second = "GET /health?x=1 HTTP/1.1\r\nconnection: Close\r\n\r\n"
        let whole = first + second
        for split in 0...whole.utf8.count {
            let bytes = Array(whole.utf8)
            let requests = try decode([
                String(decoding: bytes[..<split], as: UTF8.self), String(decoding: bytes[split...], as: UTF8.self),
            ])
            #expect(requests.map(\.method) == ["POST", "GET"], "split at \(split)")
            #expect(requests.map(\.target) == ["/otp", "/health?x=1"], "split at \(split)")
            #expect(requests.map(\.headers) == [["x-auth-signature": "sha256=ab"], [:]], "split at \(split)")
            #expect(requests.map { String(buffer: $0.body) } == ["body", ""], "split at \(split)")
            #expect(requests.map(\.keepAlive) == [true, false], "split at \(split)")
        }
    }

    @Test func keepsAliveByVersionAndConnectionHeader() throws {
        let cases: [(String, Bool)] = [
            ("POST / HTTP/1.1\r\n\r\n", true),
            ("POST / HTTP/1.1\r\nConnection: close\r\n\r\n", false),
            ("POST / HTTP/1.0\r\n\r\n", false),
            ("POST / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true),
        ]
        for (request, keepAlive) in cases {
            #expect(try decode([request]).map(\.keepAlive) == [keepAlive], "\(request)")
        }
        // Asked for, the Connection header is returned too.
        let kept = try decode(["POST / HTTP/1.1\r\nConnection: close\r\n\r\n"], keeping: ["Connection"])
        #expect(kept.first?.headers == ["connection": "close"])
    }

    @Test func refusesWhatItCannotFrame() {
        let cases: [(String, HTTP1FramingError)] = [
            ("POST /otp HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n", .transferEncoding),
            ("POST /otp HTTP/1.1\r\ncontent-length: 65\r\n\r\n", .bodyTooLarge),
            ("POST /otp HTTP/1.1\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n", .conflictingContentLength),
            ("POST /otp HTTP/1.1\r\nbad header\r\n\r\n", .malformedHeader),
            ("POST /otp HTTP/2.0\r\n\r\n", .malformedStartLine),
            ("POST  HTTP/1.1\r\n\r\n", .malformedStartLine),
            ("POST /a b HTTP/1.1\r\n\r\n", .malformedStartLine),
            ("post /otp HTTP/1.1\r\n\r\n", .malformedStartLine),
            ("/otp HTTP/1.1\r\n\r\n", .malformedStartLine),
            ("POST /otp\r\n\r\n", .malformedStartLine),
        ]
        for (request, failure) in cases {
            #expect(throws: failure, "\(request)") { _ = try decode([request]) }
        }
    }
}

@Suite struct HTTP1RequestWriterTests {
    @Test func writesTheRequestLineLengthHeadersAndBody() {
        var buffer = ByteBuffer()
        HTTP1RequestWriter.write(
            method: "POST",
            target: "/v1/otp/send",
            headers: [("host", "127.0.0.1:8080"), ("content-type", "application/json")],
            body: #"{"phone":"+919876543210"}"#,
            into: &buffer
        )
        #expect(
            String(buffer: buffer)
                == "POST /v1/otp/send HTTP/1.1\r\ncontent-length: 25\r\nhost: 127.0.0.1:8080\r\n"
                + "content-type: application/json\r\n\r\n{\"phone\":\"+919876543210\"}"
        )
    }

    @Test func countsTheBodyInBytes() {
        var buffer = ByteBuffer()
        HTTP1RequestWriter.write(method: "POST", target: "/", headers: [], body: "é", into: &buffer)
        #expect(String(buffer: buffer) == "POST / HTTP/1.1\r\ncontent-length: 2\r\n\r\né")
    }
}
