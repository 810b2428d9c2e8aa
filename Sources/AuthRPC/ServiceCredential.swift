import AuthCrypto
import AuthProtobuf
import Synchronization

/// The protocol version this module speaks.
public let rpcProtocolVersion: UInt32 = 1

/// Makes the `Hello` a client sends: its service name, a timestamp and a fresh nonce,
/// authenticated with HMAC-SHA256 under the secret shared between services.
public struct ServiceCredentialSigner: Sendable {
    public let service: String
    private let mac: HMACSHA256

    public init(service: String, secret: [UInt8]) {
        self.service = service
        self.mac = HMACSHA256(key: secret)
    }

    public func hello(nowUnixMS: Int64, nonce: [UInt8] = SecureRandom.bytes(count: 16)) -> Auth_Rpc_V1_Hello {
        Auth_Rpc_V1_Hello(
            protocolVersion: rpcProtocolVersion,
            service: service,
            timestampUnixMS: nowUnixMS,
            nonce: nonce,
            mac: mac.authenticationCode(for: ServiceCredential.signedBytes(service: service, timestampUnixMS: nowUnixMS, nonce: nonce))
        )
    }
}

public enum ServiceCredential {
    /// `"auth-rpc-hello-v1" 0x00 service 0x00 decimal(timestamp) 0x00 nonce`: the bytes the MAC covers.
    public static func signedBytes(service: String, timestampUnixMS: Int64, nonce: [UInt8]) -> [UInt8] {
        var bytes = Array("auth-rpc-hello-v1".utf8)
        bytes.append(0)
        bytes += service.utf8
        bytes.append(0)
        bytes += String(timestampUnixMS).utf8
        bytes.append(0)
        bytes += nonce
        return bytes
    }
}

/// Checks a client's `Hello`: protocol version, MAC, timestamp within the allowed skew, and a
/// nonce not seen before within that window (so a captured hello cannot be replayed).
public final class ServiceCredentialVerifier: Sendable {
    /// Who may call: service names, or empty for any holder of the secret.
    public let allowedCallers: Set<String>
    /// How far a hello's timestamp may be from the server's clock, either way.
    public let allowedSkewMS: Int64
    /// The most nonces remembered; when full, hellos are refused until old ones expire.
    public let maxRememberedNonces: Int

    private let mac: HMACSHA256
    private let seenNonces: Mutex<SeenNonces>

    struct SeenNonces {
        var expiryByKey: [[UInt8]: Int64] = [:]
        var lastPruneMS: Int64 = 0
    }

    public init(
        secret: [UInt8],
        allowedCallers: Set<String> = [],
        allowedSkewMS: Int64 = 60_000,
        maxRememberedNonces: Int = 100_000
    ) {
        self.mac = HMACSHA256(key: secret)
        self.allowedCallers = allowedCallers
        self.allowedSkewMS = allowedSkewMS
        self.maxRememberedNonces = maxRememberedNonces
        self.seenNonces = Mutex(SeenNonces())
    }

    /// The caller's service name, or the error to answer with before closing.
    public func verify(_ hello: Auth_Rpc_V1_Hello, nowUnixMS: Int64) -> Result<String, RPCError> {
        guard hello.protocolVersion == rpcProtocolVersion else {
            return .failure(RPCError(
                code: .failedPrecondition,
                message: "Protocol version \(hello.protocolVersion) is not supported; this server speaks \(rpcProtocolVersion).",
                reason: "unsupported_protocol_version"
            ))
        }
        let refused = RPCError(code: .unauthenticated, message: "The service credential was refused.", reason: "invalid_service_credential")
        guard !hello.service.isEmpty, hello.service.utf8.count <= 64, hello.nonce.count == 16, hello.mac.count == 32 else {
            return .failure(refused)
        }
        let signed = ServiceCredential.signedBytes(service: hello.service, timestampUnixMS: hello.timestampUnixMS, nonce: hello.nonce)
        guard mac.isValid(hello.mac, for: signed) else { return .failure(refused) }
        guard allowedCallers.isEmpty || allowedCallers.contains(hello.service) else {
            return .failure(RPCError(code: .permissionDenied, message: "Service \(hello.service) may not call this server.", reason: "caller_not_allowed"))
        }
        let (skew, overflow) = hello.timestampUnixMS.subtractingReportingOverflow(nowUnixMS)
        guard !overflow, abs(skew) <= allowedSkewMS else {
            return .failure(RPCError(code: .unauthenticated, message: "The service credential's timestamp is outside the allowed window.", reason: "stale_service_credential"))
        }
        let key = Array(hello.service.utf8) + [0] + hello.nonce
        let accepted = seenNonces.withLock { seen -> Bool in
            if seen.expiryByKey.count >= maxRememberedNonces || nowUnixMS - seen.lastPruneMS > allowedSkewMS {
                seen.expiryByKey = seen.expiryByKey.filter { $0.value > nowUnixMS }
                seen.lastPruneMS = nowUnixMS
            }
            guard seen.expiryByKey[key] == nil, seen.expiryByKey.count < maxRememberedNonces else { return false }
            // A nonce must be remembered for as long as its timestamp would still be accepted.
            seen.expiryByKey[key] = hello.timestampUnixMS + allowedSkewMS
            return true
        }
        guard accepted else {
            return .failure(RPCError(code: .unauthenticated, message: "The service credential was already used.", reason: "replayed_service_credential"))
        }
        return .success(hello.service)
    }
}
