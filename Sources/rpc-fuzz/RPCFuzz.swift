import AuthProtobuf
import AuthRPC
import AuthRPCNIO
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Fuzz target for what a peer controls before and after Hello: the frame decoder, the
/// envelope unpack (protobuf-c), the connection state machine, metadata checks, and the unpack
/// of every message a payload may carry. Built with libFuzzer by `scripts/fuzz/run.sh`
/// (`-DAUTH_FUZZING`, `--sanitize fuzzer --sanitize address`); a normal build replays the
/// files named on the command line through the same code (e.g. the seed corpus).
///
/// Input layout: byte 0 chooses how the rest is cut into reads (1...256 bytes each), so the
/// decoder sees frames split across reads as a socket delivers them; the rest is the stream.
enum RPCFuzzTarget {
    /// Small enough to keep each run fast, large enough for every real message.
    static let maxFrameSize = 64 * 1024
    static let verifier = ServiceCredentialVerifier(serverName: "fuzz", secret: [UInt8](repeating: 0x5A, count: 32))
    /// A fixed challenge: the MAC check runs on every fuzzed Hello (and fails, as made-up MACs do).
    static let challenge = verifier.challenge(nonce: [UInt8](repeating: 0xC3, count: ServiceCredential.nonceLength))

    static func run(_ input: UnsafeRawBufferPointer) {
        guard let first = input.first else { return }
        let chunk = Int(first) + 1
        let stream = UnsafeRawBufferPointer(rebasing: input.dropFirst())
        var decoder = FrameDecoder(maxFrameSize: ConnectionLimits().maxHelloFrameSize)
        var machine = ServerConnectionStateMachine(maxConcurrentCalls: 4)
        var offset = 0
        while offset < stream.count {
            let end = min(offset + chunk, stream.count)
            decoder.append(ByteBuffer(bytes: UnsafeRawBufferPointer(rebasing: stream[offset..<end])))
            offset = end
            while machine.state != .closed {
                if machine.state != .awaitingHello { decoder.maxFrameSize = maxFrameSize }
                let body: ByteBuffer?
                do {
                    body = try decoder.nextFrame()
                } catch {
                    return
                }
                guard let body else { break }
                guard let frame = try? Auth_Rpc_V1_Frame(frameBody: body) else { return }
                checkRoundTrip(frame)
                drive(&machine, with: frame)
            }
        }
    }

    /// What decodes must encode, and decode again to the same value.
    static func checkRoundTrip(_ frame: Auth_Rpc_V1_Frame) {
        guard let bytes = try? frame.serializedBytes() else { return }
        guard let again = try? Auth_Rpc_V1_Frame(serializedBytes: bytes) else {
            fatalError("a decoded frame re-encoded to bytes that do not decode")
        }
        precondition(again == frame, "a decoded frame changed through encode and decode")
    }

    static func drive(_ machine: inout ServerConnectionStateMachine, with frame: Auth_Rpc_V1_Frame) {
        switch frame.kind {
        case .request(let request):
            if let metadata = request.metadata {
                _ = RPCMetadata.violation(in: metadata)
                _ = RPCMetadata(proto: metadata).violation()
            }
            unpackRequest(request.payload)
        case .response(let response):
            unpackResponse(response.payload)
        default:
            break
        }
        switch machine.frameReceived(frame) {
        case .verifyHello(let hello):
            // A made-up MAC fails; the state machine is then driven as if it had passed, so
            // the frames after the Hello are fuzzed too.
            _ = verifier.verify(hello, challenge: challenge, peer: .none)
            _ = machine.helloVerified(.success(String(hello.service.prefix(64))))
        case .startCall(let request):
            if request.callID % 2 == 0 { _ = machine.callFinished(callID: request.callID, now: .now) }
        default:
            break
        }
    }

    static func unpackRequest(_ payload: [UInt8]) {
        _ = try? Auth_Health_V1_HealthCheckRequest(serializedBytes: payload)
        _ = try? Auth_Session_V1_IssueRequest(serializedBytes: payload)
        _ = try? Auth_Session_V1_RefreshRequest(serializedBytes: payload)
        _ = try? Auth_Session_V1_ValidateRequest(serializedBytes: payload)
        _ = try? Auth_Session_V1_CheckSessionRequest(serializedBytes: payload)
        _ = try? Auth_Session_V1_RevokeRequest(serializedBytes: payload)
        _ = try? Auth_Session_V1_RevokeAllRequest(serializedBytes: payload)
        _ = try? Auth_Session_V1_ListSessionsRequest(serializedBytes: payload)
        _ = try? Auth_Session_V1_GetJWKSRequest(serializedBytes: payload)
        _ = try? Auth_Session_V1_RotateSigningKeyRequest(serializedBytes: payload)
        _ = try? Auth_Session_V1_RewrapSigningKeysRequest(serializedBytes: payload)
        _ = try? Auth_Identity_V1_GetUserRequest(serializedBytes: payload)
        _ = try? Auth_Identity_V1_GetUserByPhoneRequest(serializedBytes: payload)
        _ = try? Auth_Identity_V1_GetUserByEmailRequest(serializedBytes: payload)
        _ = try? Auth_Identity_V1_ContactExistsRequest(serializedBytes: payload)
        _ = try? Auth_Identity_V1_FindOrCreateByContactRequest(serializedBytes: payload)
        _ = try? Auth_Identity_V1_SignUpRequest(serializedBytes: payload)
        _ = try? Auth_Identity_V1_SignInWithPasswordRequest(serializedBytes: payload)
        _ = try? Auth_Identity_V1_SignInWithIDTokenRequest(serializedBytes: payload)
        _ = try? Auth_Identity_V1_UpdateProfileRequest(serializedBytes: payload)
        _ = try? Auth_Identity_V1_ResetPasswordRequest(serializedBytes: payload)
        _ = try? Auth_Identity_V1_ChangePasswordRequest(serializedBytes: payload)
        _ = try? Auth_Identity_V1_ValidatePasswordRequest(serializedBytes: payload)
        _ = try? Auth_Identity_V1_DeleteUserRequest(serializedBytes: payload)
        _ = try? Auth_Identity_V1_ListAuditEventsRequest(serializedBytes: payload)
        _ = try? Auth_Otp_V1_StartRequest(serializedBytes: payload)
        _ = try? Auth_Otp_V1_ResendRequest(serializedBytes: payload)
        _ = try? Auth_Otp_V1_CheckRequest(serializedBytes: payload)
        _ = try? Auth_Otp_V1_GetDeliveryStatusRequest(serializedBytes: payload)
        _ = try? Auth_Otp_V1_ReportDeliveryRequest(serializedBytes: payload)
    }

    static func unpackResponse(_ payload: [UInt8]) {
        _ = try? Auth_Health_V1_HealthCheckResponse(serializedBytes: payload)
        _ = try? Auth_Session_V1_IssueResponse(serializedBytes: payload)
        _ = try? Auth_Session_V1_RefreshResponse(serializedBytes: payload)
        _ = try? Auth_Session_V1_ValidateResponse(serializedBytes: payload)
        _ = try? Auth_Session_V1_CheckSessionResponse(serializedBytes: payload)
        _ = try? Auth_Session_V1_ListSessionsResponse(serializedBytes: payload)
        _ = try? Auth_Session_V1_GetJWKSResponse(serializedBytes: payload)
        _ = try? Auth_Session_V1_RevokeResponse(serializedBytes: payload)
        _ = try? Auth_Session_V1_RevokeAllResponse(serializedBytes: payload)
        _ = try? Auth_Session_V1_RotateSigningKeyResponse(serializedBytes: payload)
        _ = try? Auth_Session_V1_RewrapSigningKeysResponse(serializedBytes: payload)
        _ = try? Auth_Identity_V1_GetUserResponse(serializedBytes: payload)
        _ = try? Auth_Identity_V1_ContactExistsResponse(serializedBytes: payload)
        _ = try? Auth_Identity_V1_FindOrCreateByContactResponse(serializedBytes: payload)
        _ = try? Auth_Identity_V1_SignUpResponse(serializedBytes: payload)
        _ = try? Auth_Identity_V1_SignInWithPasswordResponse(serializedBytes: payload)
        _ = try? Auth_Identity_V1_SignInWithIDTokenResponse(serializedBytes: payload)
        _ = try? Auth_Identity_V1_UpdateProfileResponse(serializedBytes: payload)
        _ = try? Auth_Identity_V1_ResetPasswordResponse(serializedBytes: payload)
        _ = try? Auth_Identity_V1_ChangePasswordResponse(serializedBytes: payload)
        _ = try? Auth_Identity_V1_ValidatePasswordResponse(serializedBytes: payload)
        _ = try? Auth_Identity_V1_DeleteUserResponse(serializedBytes: payload)
        _ = try? Auth_Identity_V1_ListAuditEventsResponse(serializedBytes: payload)
        _ = try? Auth_Otp_V1_StartResponse(serializedBytes: payload)
        _ = try? Auth_Otp_V1_ResendResponse(serializedBytes: payload)
        _ = try? Auth_Otp_V1_CheckResponse(serializedBytes: payload)
        _ = try? Auth_Otp_V1_GetDeliveryStatusResponse(serializedBytes: payload)
        _ = try? Auth_Otp_V1_ReportDeliveryResponse(serializedBytes: payload)
    }
}

#if AUTH_FUZZING
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    RPCFuzzTarget.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

/// SwiftPM links an executable's entry point as `main` itself; whichever `main` the linker
/// keeps (libFuzzer's, which calls `LLVMFuzzerTestOneInput`, or this one), libFuzzer drives.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

@main
enum RPCFuzzMain {
    static func main() {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        let status = withUnsafeMutablePointer(to: &argv) { argvPointer in
            LLVMFuzzerRunDriver(&argc, argvPointer) { data, size in fuzzOneInput(data, size) }
        }
        exit(status)
    }
}
#else
@main
enum RPCFuzzReplay {
    /// Replays each file named on the command line (without libFuzzer).
    static func main() {
        var count = 0
        for path in CommandLine.arguments.dropFirst() {
            guard let file = fopen(path, "rb") else {
                print("rpc-fuzz: cannot open \(path)")
                exit(2)
            }
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = fread(&buffer, 1, buffer.count, file)
                if n <= 0 { break }
                bytes += buffer[0..<n]
            }
            fclose(file)
            bytes.withUnsafeBytes { RPCFuzzTarget.run($0) }
            count += 1
        }
        print("rpc-fuzz: replayed \(count) input(s) without a crash")
    }
}
#endif
