import AuthProtobuf
import Testing

@testable import AuthRPC

@Suite struct ServiceCredentialTests {
    let secret = Array(repeating: UInt8(0x42), count: 32)
    let now: Int64 = 1_800_000_000_000

    @Test func validHelloIsAcceptedOnce() throws {
        let verifier = ServiceCredentialVerifier(secret: secret)
        let hello = ServiceCredentialSigner(service: "gateway", secret: secret).hello(nowUnixMS: now)
        #expect(try verifier.verify(hello, nowUnixMS: now + 500).get() == "gateway")
        // The same hello again is a replay.
        #expect(verifier.verify(hello, nowUnixMS: now + 600).failureReason == "replayed_service_credential")
    }

    @Test func wrongSecretIsRefused() {
        let verifier = ServiceCredentialVerifier(secret: secret)
        let hello = ServiceCredentialSigner(service: "gateway", secret: Array(repeating: 1, count: 32)).hello(nowUnixMS: now)
        let result = verifier.verify(hello, nowUnixMS: now)
        #expect(result.failureReason == "invalid_service_credential")
        #expect(result.failureCode == .unauthenticated)
    }

    @Test func renamedCallerIsRefused() {
        let verifier = ServiceCredentialVerifier(secret: secret)
        var hello = ServiceCredentialSigner(service: "gateway", secret: secret).hello(nowUnixMS: now)
        hello.service = "identity"
        #expect(verifier.verify(hello, nowUnixMS: now).failureReason == "invalid_service_credential")
    }

    @Test func staleOrFutureTimestampsAreRefused() {
        let verifier = ServiceCredentialVerifier(secret: secret, allowedSkewMS: 60_000)
        let signer = ServiceCredentialSigner(service: "gateway", secret: secret)
        #expect(verifier.verify(signer.hello(nowUnixMS: now - 60_001), nowUnixMS: now).failureReason == "stale_service_credential")
        #expect(verifier.verify(signer.hello(nowUnixMS: now + 60_001), nowUnixMS: now).failureReason == "stale_service_credential")
        #expect((try? verifier.verify(signer.hello(nowUnixMS: now - 59_000), nowUnixMS: now).get()) == "gateway")
    }

    @Test func callerAllowList() {
        let verifier = ServiceCredentialVerifier(secret: secret, allowedCallers: ["gateway"])
        let hello = ServiceCredentialSigner(service: "otp-dispatch", secret: secret).hello(nowUnixMS: now)
        #expect(verifier.verify(hello, nowUnixMS: now).failureCode == .permissionDenied)
    }

    @Test func unsupportedVersionIsRefused() {
        let verifier = ServiceCredentialVerifier(secret: secret)
        var hello = ServiceCredentialSigner(service: "gateway", secret: secret).hello(nowUnixMS: now)
        hello.protocolVersion = 2
        #expect(verifier.verify(hello, nowUnixMS: now).failureReason == "unsupported_protocol_version")
    }

    @Test func nonceMemoryIsBounded() {
        let verifier = ServiceCredentialVerifier(secret: secret, allowedSkewMS: 1_000, maxRememberedNonces: 2)
        let signer = ServiceCredentialSigner(service: "gateway", secret: secret)
        #expect((try? verifier.verify(signer.hello(nowUnixMS: now), nowUnixMS: now).get()) != nil)
        #expect((try? verifier.verify(signer.hello(nowUnixMS: now), nowUnixMS: now).get()) != nil)
        // Full: fail closed rather than forget nonces that could still be replayed.
        #expect(verifier.verify(signer.hello(nowUnixMS: now), nowUnixMS: now).failureReason == "replayed_service_credential")
        // Once the remembered ones have expired, there is room again.
        #expect((try? verifier.verify(signer.hello(nowUnixMS: now + 5_000), nowUnixMS: now + 5_000).get()) != nil)
    }

    @Test func signedBytesLayout() {
        let bytes = ServiceCredential.signedBytes(service: "gw", timestampUnixMS: 12, nonce: [0xAA])
        #expect(bytes == Array("auth-rpc-hello-v1".utf8) + [0] + Array("gw".utf8) + [0] + Array("12".utf8) + [0, 0xAA])
    }
}

extension Result where Failure == RPCError {
    var failureReason: String? {
        if case .failure(let error) = self { return error.reason }
        return nil
    }

    var failureCode: RPCError.Code? {
        if case .failure(let error) = self { return error.code }
        return nil
    }
}
