import AuthCrypto
import AuthProtobuf

/// The protocol version this module speaks (docs/protocol.md).
public let rpcProtocolVersion: UInt32 = 2

/// The bytes the credentials of protocol version 2 cover (docs/protocol.md §2).
public enum ServiceCredential {
    /// Length of the server's challenge nonce and of the client's nonce.
    public static let nonceLength = 32

    /// `"auth-rpc-hello-v2" 0x00 client 0x00 server 0x00 challengeNonce clientNonce`: what the
    /// client's Hello MAC covers in plaintext mode.
    public static func helloSignedBytes(
        client: String,
        server: String,
        challengeNonce: [UInt8],
        clientNonce: [UInt8]
    ) -> [UInt8] {
        signed("auth-rpc-hello-v2", client, server, challengeNonce, clientNonce)
    }

    /// `"auth-rpc-hello-ack-v2" 0x00 server 0x00 client 0x00 challengeNonce clientNonce`: what the
    /// server's HelloAck MAC covers in plaintext mode.
    public static func helloAckSignedBytes(
        server: String,
        client: String,
        challengeNonce: [UInt8],
        clientNonce: [UInt8]
    ) -> [UInt8] {
        signed("auth-rpc-hello-ack-v2", server, client, challengeNonce, clientNonce)
    }

    private static func signed(
        _ label: String,
        _ first: String,
        _ second: String,
        _ nonce1: [UInt8],
        _ nonce2: [UInt8]
    ) -> [UInt8] {
        var bytes = Array(label.utf8)
        bytes.append(0)
        bytes += first.utf8
        bytes.append(0)
        bytes += second.utf8
        bytes.append(0)
        bytes += nonce1
        bytes += nonce2
        return bytes
    }
}

/// The client's side of the Hello exchange. With a shared secret (plaintext mode) it answers the
/// server's challenge with a MAC bound to that challenge and to the server's name, and checks the
/// server's proof in HelloAck; with TLS (`secret == nil`) the certificates prove both ends and the
/// Hello only names the caller and the server it means to reach.
public struct ServiceCredentialSigner: Sendable {
    public let service: String
    private let mac: HMACSHA256?

    /// - Parameter secret: the shared secret in plaintext mode; `nil` with mutual TLS.
    public init(service: String, secret: [UInt8]?) {
        self.service = service
        self.mac = secret.map { HMACSHA256(key: $0) }
    }

    /// The Hello answering `challenge`. `expectedServer` is the service the client means to
    /// reach; `nil` accepts the name the challenge states (authctl's health check, for one).
    public func hello(
        answering challenge: Auth_Rpc_V1_Challenge,
        expectedServer: String?,
        nonce: [UInt8] = SecureRandom.bytes(count: ServiceCredential.nonceLength)
    ) -> Result<Auth_Rpc_V1_Hello, RPCError> {
        guard challenge.protocolVersion == rpcProtocolVersion else {
            return .failure(
                RPCError(
                    code: .failedPrecondition,
                    message:
                        "The server speaks protocol version \(challenge.protocolVersion); this client speaks \(rpcProtocolVersion).",
                    reason: RPCError.Reason.unsupportedProtocolVersion
                )
            )
        }
        guard challenge.nonce.count == ServiceCredential.nonceLength, !challenge.service.isEmpty else {
            return .failure(
                RPCError(
                    code: .unauthenticated,
                    message: "The server's challenge is malformed.",
                    reason: RPCError.Reason.invalidServerCredential
                )
            )
        }
        let server = expectedServer ?? challenge.service
        guard challenge.service == server else {
            return .failure(
                RPCError(
                    code: .unauthenticated,
                    message: "Expected service \(server), but the server is \(challenge.service).",
                    reason: RPCError.Reason.wrongServer
                )
            )
        }
        var hello = Auth_Rpc_V1_Hello(
            protocolVersion: rpcProtocolVersion,
            service: service,
            nonce: nonce,
            serverService: server
        )
        if let mac {
            hello.mac = mac.authenticationCode(
                for: ServiceCredential.helloSignedBytes(
                    client: service,
                    server: server,
                    challengeNonce: challenge.nonce,
                    clientNonce: nonce
                )
            )
        }
        return .success(hello)
    }

    /// Checks the server's proof in `ack` (plaintext mode); nil when it holds. With TLS there is
    /// nothing to check here: the handshake verified the server's certificate.
    public func verifyAck(
        _ ack: Auth_Rpc_V1_HelloAck,
        hello: Auth_Rpc_V1_Hello,
        challenge: Auth_Rpc_V1_Challenge
    ) -> RPCError? {
        guard ack.service == hello.serverService else {
            return RPCError(
                code: .unauthenticated,
                message: "HelloAck names another service (\(ack.service)).",
                reason: RPCError.Reason.wrongServer
            )
        }
        guard let mac else { return nil }
        let expected = ServiceCredential.helloAckSignedBytes(
            server: hello.serverService,
            client: service,
            challengeNonce: challenge.nonce,
            clientNonce: hello.nonce
        )
        guard ack.mac.count == 32, mac.isValid(ack.mac, for: expected) else {
            return RPCError(
                code: .unauthenticated,
                message: "The server could not prove that it holds the shared secret.",
                reason: RPCError.Reason.invalidServerCredential
            )
        }
        return nil
    }
}

/// The server's side of the Hello exchange: makes each connection's challenge and checks the
/// Hello that answers it. Pure: no clock, no remembered state, because a Hello is only good for
/// the one challenge it answers.
public struct ServiceCredentialVerifier: Sendable {
    /// This server's service name: Hellos meant for another service are refused.
    public let serverName: String
    private let mac: HMACSHA256?

    /// What the server knows about the caller from the transport.
    public enum PeerIdentity: Sendable, Hashable {
        /// Plaintext TCP: nothing; the Hello's MAC must prove the shared secret.
        case none
        /// Mutual TLS: the DNS names in the subjectAltName of the verified client certificate.
        case certificate(dnsNames: [String])
    }

    /// A Hello that passed: the caller's name and the HelloAck's MAC (empty with TLS).
    public struct Accepted: Sendable, Hashable {
        public let caller: String
        public let ackMAC: [UInt8]
    }

    /// - Parameter secret: the shared secret in plaintext mode; `nil` with mutual TLS (then only
    ///   callers with a verified certificate are accepted).
    public init(serverName: String, secret: [UInt8]?) {
        self.serverName = serverName
        self.mac = secret.map { HMACSHA256(key: $0) }
    }

    /// A new challenge for one connection.
    public func challenge(
        nonce: [UInt8] = SecureRandom.bytes(count: ServiceCredential.nonceLength)
    ) -> Auth_Rpc_V1_Challenge {
        Auth_Rpc_V1_Challenge(protocolVersion: rpcProtocolVersion, service: serverName, nonce: nonce)
    }

    /// The caller's service name, or the error to answer with before closing. The checks run in
    /// the order of the table in docs/protocol.md §2.
    public func verify(
        _ hello: Auth_Rpc_V1_Hello,
        challenge: Auth_Rpc_V1_Challenge,
        peer: PeerIdentity
    ) -> Result<Accepted, RPCError> {
        guard hello.protocolVersion == rpcProtocolVersion else {
            return .failure(
                RPCError(
                    code: .failedPrecondition,
                    message:
                        "Protocol version \(hello.protocolVersion) is not supported; this server speaks \(rpcProtocolVersion).",
                    reason: RPCError.Reason.unsupportedProtocolVersion
                )
            )
        }
        let refused = RPCError(
            code: .unauthenticated,
            message: "The service credential was refused.",
            reason: RPCError.Reason.invalidServiceCredential
        )
        guard !hello.service.isEmpty, hello.service.utf8.count <= 64, hello.nonce.count == ServiceCredential.nonceLength
        else {
            return .failure(refused)
        }
        guard hello.serverService == serverName else {
            return .failure(
                RPCError(
                    code: .unauthenticated,
                    message:
                        "This Hello is meant for \(hello.serverService.isEmpty ? "no service" : hello.serverService); this server is \(serverName).",
                    reason: RPCError.Reason.wrongServer
                )
            )
        }
        switch peer {
        case .certificate(let dnsNames):
            guard dnsNames.contains(hello.service) else {
                return .failure(
                    RPCError(
                        code: .unauthenticated,
                        message: "The client certificate does not name \(hello.service).",
                        reason: RPCError.Reason.invalidServiceCredential
                    )
                )
            }
            return .success(Accepted(caller: hello.service, ackMAC: []))
        case .none:
            guard let mac, hello.mac.count == 32 else { return .failure(refused) }
            let signed = ServiceCredential.helloSignedBytes(
                client: hello.service,
                server: serverName,
                challengeNonce: challenge.nonce,
                clientNonce: hello.nonce
            )
            guard mac.isValid(hello.mac, for: signed) else { return .failure(refused) }
            let ackMAC = mac.authenticationCode(
                for: ServiceCredential.helloAckSignedBytes(
                    server: serverName,
                    client: hello.service,
                    challengeNonce: challenge.nonce,
                    clientNonce: hello.nonce
                )
            )
            return .success(Accepted(caller: hello.service, ackMAC: ackMAC))
        }
    }
}
