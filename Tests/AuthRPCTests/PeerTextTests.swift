import AuthRPC
import Testing

@Suite struct PeerTextTests {
    @Test func printableASCIIIsKept() {
        #expect(PeerText.loggable("gateway v1.2 (ok)") == "gateway v1.2 (ok)")
    }

    @Test func controlsQuotesAndNonASCIIAreEscaped() {
        #expect(PeerText.loggable("a\nb\r\tc") == "a\\nb\\r\\tc")
        #expect(PeerText.loggable("say \"hi\" \\o/") == "say \\\"hi\\\" \\\\o/")
        #expect(PeerText.loggable("\u{1B}[31mred\u{0}") == "\\u{1B}[31mred\\u{0}")
        #expect(PeerText.loggable("\u{202E}gpj.exe é") == "\\u{202E}gpj.exe \\u{E9}")
    }

    @Test func longTextIsCutAndSaysItsLength() {
        let text = String(repeating: "a", count: 1000)
        #expect(PeerText.loggable(text, limit: 4) == "aaaa...(1000 bytes)")
        #expect(PeerText.loggable(text).hasPrefix(String(repeating: "a", count: PeerText.defaultLimit) + "...("))
        #expect(PeerText.loggable("abcd", limit: 4) == "abcd")
    }
}
