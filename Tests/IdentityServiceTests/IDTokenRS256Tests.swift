import AuthAPI
import AuthCrypto
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import Foundation
import Testing

@testable import IdentityService

/// An RSA key made in the test with the `openssl` command (AuthCrypto verifies RS256 but does not
/// sign it), used to sign RS256 ID tokens as Apple and Google do.
struct OpenSSLRSAKey: Sendable {
    let directory: URL
    let jwk: JWK

    /// Makes a 2048-bit key. Runs `openssl` on a thread of its own, not on Swift's cooperative pool.
    static func make(kid: String) async throws -> OpenSSLRSAKey {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rsa-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let key = directory.appendingPathComponent("key.pem").path
        _ = try await run(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", key])
        let modulusLine = String(decoding: try await run(["rsa", "-in", key, "-noout", "-modulus"]), as: UTF8.self)
        let hexModulus = modulusLine.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(
            of: "Modulus=",
            with: ""
        )
        var modulus: [UInt8] = []
        var index = hexModulus.startIndex
        while index < hexModulus.endIndex {
            let next = hexModulus.index(index, offsetBy: 2)
            modulus.append(UInt8(hexModulus[index..<next], radix: 16)!)
            index = next
        }
        let jwk = JWK(
            kty: "RSA",
            n: Base64URL.encode(modulus),
            e: Base64URL.encode([1, 0, 1]),
            kid: kid,
            alg: "RS256",
            use: "sig"
        )
        return OpenSSLRSAKey(directory: directory, jwk: jwk)
    }

    /// An RS256 JWS of `claims`.
    func sign(_ claims: [String: Any?], kid: String) async throws -> String {
        let header = Base64URL.encode(Array(#"{"alg":"RS256","kid":"\#(kid)","typ":"JWT"}"#.utf8))
        let payload = try JSONSerialization.data(withJSONObject: claims.compactMapValues { $0 }, options: [.sortedKeys])
        let input = header + "." + Base64URL.encode(Array(payload))
        let inputFile = directory.appendingPathComponent("input-\(UUID().uuidString)")
        try Data(input.utf8).write(to: inputFile)
        let signature = try await Self.run([
            "dgst", "-sha256", "-sign", directory.appendingPathComponent("key.pem").path, inputFile.path,
        ])
        return input + "." + Base64URL.encode(signature)
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    private static func run(_ arguments: [String]) async throws -> [UInt8] {
        let result = try await ChildProcess.run(URL(fileURLWithPath: "/usr/bin/openssl"), arguments)
        guard result.status == 0 else {
            throw IdentityError(.internal, "openssl \(arguments.first ?? "") failed: \(result.standardError)")
        }
        return result.output
    }
}

@Suite struct IDTokenRS256Tests {
    @Test func rs256TokensVerifyAndTheKeyTypeMustMatchTheAlgorithm() async throws {
        let provider = try TestProvider()
        let rsa = try await OpenSSLRSAKey.make(kid: "rsa-1")
        defer { rsa.remove() }
        provider.publish([provider.key.publicKey.jwk(kid: provider.kid), rsa.jwk])
        let clock = ManualClock()
        try await withProviderService(provider, clock: clock) { fixture in
            let raw = "rsa-nonce"
            let claims = provider.claims(subject: "rsa-user", nonce: appleNonce(raw), now: clock.now())
            let token = try await rsa.sign(claims, kid: "rsa-1")
            let response = try await fixture.signIn(.apple, token: token, rawNonce: raw)
            #expect(response.created)
            // An RS256 header naming the EC key, and a tampered payload, are refused.
            let onECKey = try await rsa.sign(
                provider.claims(subject: "x", nonce: appleNonce(raw), now: clock.now()),
                kid: provider.kid
            )
            await expectRPCError(.unauthenticated, "invalid_id_token") {
                try await fixture.signIn(.apple, token: onECKey, rawNonce: raw)
            }
            var parts = try await rsa.sign(
                provider.claims(subject: "y", nonce: appleNonce(raw), now: clock.now()),
                kid: "rsa-1"
            )
            .split(separator: ".").map(String.init)
            parts[1] = Base64URL.encode(Array(#"{"sub":"someone-else"}"#.utf8))
            await expectRPCError(.unauthenticated, "invalid_id_token") {
                try await fixture.signIn(.apple, token: parts.joined(separator: "."), rawNonce: raw)
            }
        }
    }

    @Test func nameEmailAndPictureComeFromTheToken() async throws {
        let provider = try TestProvider()
        let clock = ManualClock()
        try await withProviderService(provider, clock: clock) { fixture in
            var claims = provider.claims(
                subject: "g-name",
                nonce: "n",
                email: "Priya@Example.com",
                emailVerified: true,
                now: clock.now()
            )
            claims["name"] = "Priya S"
            claims["picture"] = "https://lh3.example.com/photo.jpg"
            let response = try await fixture.signIn(
                .google,
                token: try provider.token(claims),
                rawNonce: "n",
                displayName: "Ignored Name"
            )
            #expect(response.user?.displayName == "Priya S")
            #expect(response.user?.photoURL == "https://lh3.example.com/photo.jpg")
            #expect(response.user?.email == "priya@example.com")
            #expect(response.user?.emailVerified == true)
            #expect(response.user?.providers == ["google"])
        }
    }
}
