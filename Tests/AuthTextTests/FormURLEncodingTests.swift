import AuthText
import Testing

@Suite struct FormURLEncodingTests {
    @Test func encodedValuesDecodeBackExactly() {
        let pairs = [
            (name: "redirect_uri", value: "https://app.example/cb?x=1&y=2#f"),
            (name: "scope", value: "openid email"),
            (name: "plus", value: "a+b=c%d"),
            (name: "ünï", value: "日本 ✓"),
            (name: "empty", value: ""),
        ]
        let encoded = FormURLEncoding.encode(pairs)
        #expect(encoded.allSatisfy { $0.isASCII && !" #?".contains($0) })
        #expect(encoded.contains("scope=openid%20email"))
        let decoded = FormURLEncoding.decodePairs(encoded)
        #expect(decoded.map(\.name) == pairs.map(\.name))
        #expect(decoded.map(\.value) == pairs.map(\.value))
    }

    @Test func decodingIsLenientAsBrowsersAre() {
        #expect(FormURLEncoding.decode(form: "a=1&a=2&b&&c=%zz&d=%4") == ["a": "2", "b": "", "c": "%zz", "d": "%4"])
        #expect(FormURLEncoding.decode("%41%62+c") == "Ab c")
    }

    /// What the gateway is sent: a malformed escape or text that is not UTF-8 is refused.
    @Test func strictDecodingRefusesWhatIsNotValidlyEncoded() {
        #expect(FormURLEncoding.decodeStrictly("a+b%2Bc") == "a b+c")
        #expect(FormURLEncoding.decodeStrictly("%zz") == nil)
        #expect(FormURLEncoding.decodeStrictly("%4") == nil)
        #expect(FormURLEncoding.decodeStrictly("%FF") == nil)
    }

    @Test func appendingUsesAnAmpersandWhenTheURLHasAQuery() {
        let pairs = [(name: "code", value: "x y")]
        #expect(FormURLEncoding.appending(pairs, to: "http://h/cb") == "http://h/cb?code=x%20y")
        #expect(FormURLEncoding.appending(pairs, to: "http://h/cb?a=1") == "http://h/cb?a=1&code=x%20y")
        #expect(FormURLEncoding.appending(pairs, to: "http://h/cb?") == "http://h/cb?code=x%20y")
    }
}
