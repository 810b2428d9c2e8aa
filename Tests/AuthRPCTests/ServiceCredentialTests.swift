import AuthProtobuf
import Testing

@testable import AuthRPC

@Suite struct ServiceCredentialTests {
    let secret = Array(repeating: UInt8(9), count: 32)

    /// One full plaintext exchange: challenge, Hello, verification, HelloAck proof.
    func exchange(
        clientSecret: [UInt8]? = nil,
        serverSecret: [UInt8]? = nil,
        expectedServer: String? = "session",
        serverName: String = "session"
    ) throws -> (
        hello: Auth_Rpc_V1_Hello, challenge: Auth_Rpc_V1_Challenge,
        result: Result<ServiceCredentialVerifier.Accepted, RPCError>
    ) {
        let verifier = ServiceCredentialVerifier(serverName: serverName, secret: serverSecret ?? secret)
        let challenge = verifier.challenge()
        let hello = try ServiceCredentialSigner(service: "gateway", secret: clientSecret ?? secret)
            .hello(answering: challenge, expectedServer: expectedServer).get()
        return (hello, challenge, verifier.verify(hello, challenge: challenge, peer: .none))
    }

    @Test func acceptsAValidHelloAndTheClientAcceptsTheServersProof() throws {
        let (hello, challenge, result) = try exchange()
        let accepted = try result.get()
        #expect(accepted.caller == "gateway")
        #expect(hello.nonce.count == 32 && challenge.nonce.count == 32)
        let ack = Auth_Rpc_V1_HelloAck(protocolVersion: rpcProtocolVersion, service: "session", mac: accepted.ackMAC)
        #expect(
            ServiceCredentialSigner(service: "gateway", secret: secret).verifyAck(
                ack,
                hello: hello,
                challenge: challenge
            ) == nil
        )
    }

    @Test func refusesAWrongSecret() throws {
        let (_, _, result) = try exchange(clientSecret: Array(repeating: 1, count: 32))
        #expect(result.failureReason == "invalid_service_credential")
    }

    @Test func aHelloIsGoodForItsOwnChallengeOnly() throws {
        // A captured Hello replayed on another connection (another replica, the same server after
        // a restart): that connection has a new challenge, so the MAC does not match.
        let (hello, _, first) = try exchange()
        #expect(try first.get().caller == "gateway")
        let otherReplica = ServiceCredentialVerifier(serverName: "session", secret: secret)
        let replay = otherReplica.verify(hello, challenge: otherReplica.challenge(), peer: .none)
        #expect(replay.failureReason == "invalid_service_credential")
    }

    @Test func aHelloForAnotherServiceIsRefused() throws {
        let (hello, challenge, _) = try exchange()
        // Another service holding the secret, shown the same challenge, still refuses it.
        let identity = ServiceCredentialVerifier(serverName: "identity", secret: secret)
        #expect(identity.verify(hello, challenge: challenge, peer: .none).failureReason == "wrong_server")
        var renamed = hello
        renamed.serverService = "identity"
        #expect(
            identity.verify(renamed, challenge: challenge, peer: .none).failureReason == "invalid_service_credential"
        )
    }

    @Test func theClientRefusesAChallengeFromAnotherService() {
        let challenge = ServiceCredentialVerifier(serverName: "identity", secret: secret).challenge()
        let result = ServiceCredentialSigner(service: "gateway", secret: secret).hello(
            answering: challenge,
            expectedServer: "session"
        )
        #expect(result.failureReason == "wrong_server")
    }

    @Test func theClientRefusesAServerWithoutTheSecret() throws {
        let signer = ServiceCredentialSigner(service: "gateway", secret: secret)
        let impostor = ServiceCredentialVerifier(serverName: "session", secret: Array(repeating: 3, count: 32))
        let challenge = impostor.challenge()
        let hello = try signer.hello(answering: challenge, expectedServer: "session").get()
        // The impostor cannot verify the Hello, and any MAC it makes up fails the client's check.
        #expect(impostor.verify(hello, challenge: challenge, peer: .none).failureReason == "invalid_service_credential")
        for mac in [[UInt8](), Array(repeating: 0, count: 32), hello.mac] {
            let ack = Auth_Rpc_V1_HelloAck(protocolVersion: rpcProtocolVersion, service: "session", mac: mac)
            #expect(signer.verifyAck(ack, hello: hello, challenge: challenge)?.reason == "invalid_server_credential")
        }
    }

    @Test func refusesTamperedFieldsAndOtherVersions() throws {
        let verifier = ServiceCredentialVerifier(serverName: "session", secret: secret)
        let challenge = verifier.challenge()
        let hello = try ServiceCredentialSigner(service: "gateway", secret: secret).hello(
            answering: challenge,
            expectedServer: "session"
        ).get()
        var renamed = hello
        renamed.service = "authctl"
        #expect(
            verifier.verify(renamed, challenge: challenge, peer: .none).failureReason == "invalid_service_credential"
        )
        var shortNonce = hello
        shortNonce.nonce = Array(hello.nonce.prefix(16))
        #expect(
            verifier.verify(shortNonce, challenge: challenge, peer: .none).failureReason == "invalid_service_credential"
        )
        var v1 = hello
        v1.protocolVersion = 1
        #expect(verifier.verify(v1, challenge: challenge, peer: .none).failureReason == "unsupported_protocol_version")
    }

    @Test func withTLSTheCallerMustBeNamedByItsCertificate() throws {
        let verifier = ServiceCredentialVerifier(serverName: "session", secret: nil)
        let challenge = verifier.challenge()
        let hello = try ServiceCredentialSigner(service: "gateway", secret: nil).hello(
            answering: challenge,
            expectedServer: "session"
        ).get()
        #expect(hello.mac.isEmpty)
        let accepted = try verifier.verify(hello, challenge: challenge, peer: .certificate(dnsNames: ["gateway"])).get()
        #expect(accepted.caller == "gateway" && accepted.ackMAC.isEmpty)
        #expect(
            verifier.verify(hello, challenge: challenge, peer: .certificate(dnsNames: ["authctl"])).failureReason
                == "invalid_service_credential"
        )
        // Without a certificate, a TLS-mode server has nothing to check a MAC against.
        #expect(verifier.verify(hello, challenge: challenge, peer: .none).failureReason == "invalid_service_credential")
    }

    @Test func signedBytesAreAsDocumented() {
        let bytes = ServiceCredential.helloSignedBytes(
            client: "gateway",
            server: "session",
            challengeNonce: [1, 2],
            clientNonce: [3]
        )
        #expect(bytes == Array("auth-rpc-hello-v2\0gateway\0session\0".utf8) + [1, 2, 3])
        let ack = ServiceCredential.helloAckSignedBytes(
            server: "session",
            client: "gateway",
            challengeNonce: [1, 2],
            clientNonce: [3]
        )
        #expect(ack == Array("auth-rpc-hello-ack-v2\0session\0gateway\0".utf8) + [1, 2, 3])
    }
}

extension Result {
    var failureReason: String? {
        if case .failure(let error as RPCError) = self { return error.reason }
        return nil
    }
}
