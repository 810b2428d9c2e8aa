import AuthCrypto
import Testing

@Suite struct WebhookSignatureTests {
    let signer = HMACSHA256(key: Array("shared webhook secret".utf8))
    let body = Array(#"{"code":"123456"}"#.utf8)

    /// Python's `hmac.new(b"shared webhook secret", b'{"code":"123456"}', hashlib.sha256).hexdigest()`.
    @Test func valueIsSha256AndTheLowerCaseHexHMACOfTheBody() {
        #expect(
            WebhookSignature.value(for: body, signer: signer)
                == "sha256=92b0cdedbdf7a10fc7be6fdd57a9c55de52dfff51648e8fb3685610f0f917ac7"
        )
    }

    @Test func onlyTheExactValueForTheExactBodyIsValid() {
        let value = WebhookSignature.value(for: body, signer: signer)
        #expect(WebhookSignature.isValid(value, for: body, signer: signer))
        #expect(!WebhookSignature.isValid(nil, for: body, signer: signer))
        #expect(!WebhookSignature.isValid(value.uppercased(), for: body, signer: signer))
        #expect(!WebhookSignature.isValid(String(value.dropFirst(7)), for: body, signer: signer))
        #expect(!WebhookSignature.isValid(value, for: body + [0x20], signer: signer))
        let otherSigner = HMACSHA256(key: Array("another secret".utf8))
        #expect(!WebhookSignature.isValid(value, for: body, signer: otherSigner))
    }
}
