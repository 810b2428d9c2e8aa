import Testing

@testable import AuthCrypto

@Suite struct JSONMemberScannerTests {
    @Test func memberNames() {
        #expect(JSONMemberScanner.topLevelMemberNames(utf8("{}")) == [])
        #expect(JSONMemberScanner.topLevelMemberNames(utf8(" {\"alg\":\"ES256\"}\r\n")) == ["alg"])
        #expect(
            JSONMemberScanner.topLevelMemberNames(
                utf8(
                    "{\"a\":1,\"b\":[true,false,null,-0.5e+3,{\"c\":{}}],\"d\":{\"a\":\"x\"},\"e\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}"
                )
            ) == ["a", "b", "d", "e"]
        )
        // Escapes are decoded, so an escaped duplicate is still a duplicate.
        #expect(JSONMemberScanner.topLevelMemberNames(utf8("{\"alg\":1,\"al\\u0067\":2}")) == ["alg", "alg"])
        #expect(JSONMemberScanner.topLevelMemberNames(utf8("{\"\\ud83d\\ude00\":1,\"é\":2}")) == ["😀", "é"])
    }

    @Test(arguments: [
        "", "[]", "\"x\"", "1", "null", "{", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{,}", "{\"a\":1}x",
        "{\"a\":1}{}", "{a:1}", "{'a':1}", "{\"a\":01}", "{\"a\":1.}", "{\"a\":.5}", "{\"a\":+1}", "{\"a\":1e}",
        "{\"a\":tru}", "{\"a\":\"\u{01}\"}", "{\"a\":\"\\x\"}", "{\"a\":\"\\ud800\"}", "{\"a\":\"\\udc00\"}",
        "{\"a\":\"\\u12\"}", "\u{FEFF}{}", "{\"a\":[1,]}", "{\"a\":[1 2]}", "{\"a\":\"unterminated}",
        String(repeating: "{\"a\":", count: 40) + "1" + String(repeating: "}", count: 40),
    ])
    func rejects(_ json: String) {
        #expect(JSONMemberScanner.topLevelMemberNames(utf8(json)) == nil)
    }

    @Test func rejectsInvalidUTF8() {
        #expect(JSONMemberScanner.topLevelMemberNames([0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D]) == nil)
    }
}
