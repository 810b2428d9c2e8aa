import AuthAPI
import AuthTestSupport
import Foundation
import Testing

@testable import SessionService

/// Our tokens verify with an independent JOSE implementation (Python's `joserfc`, from PyPI)
/// against the JWKS we publish: scripts/jose-check/verify.py.
@Suite(.serialized) struct JOSEInteropTests {
    static let projectRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static var python3: URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent("python3")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return nil
    }

    struct Output {
        var status: Int32
        var text: String
    }

    static func run(_ executable: URL, _ arguments: [String]) async throws -> Output {
        let result = try await ChildProcess.run(executable, arguments, currentDirectory: projectRoot)
        return Output(status: result.status, text: result.standardOutput + result.standardError)
    }

    /// The venv's python with joserfc, installed by scripts/jose-check/install.sh when missing.
    static func venvPython() async throws -> URL {
        let python = projectRoot.appendingPathComponent(".data/jose-venv/bin/python")
        let install = try await run(
            URL(fileURLWithPath: "/bin/bash"),
            [projectRoot.appendingPathComponent("scripts/jose-check/install.sh").path]
        )
        guard install.status == 0 else {
            throw ServiceProcessError(
                message: "scripts/jose-check/install.sh failed (PyPI reachable?):\n\(install.text)"
            )
        }
        return python
    }

    @Test(.enabled(if: python3 != nil, "python3 is not installed: the independent JOSE check (joserfc) cannot run"))
    func joserfcVerifiesOurTokensAgainstOurJWKS() async throws {
        let python = try await Self.venvPython()
        let script = Self.projectRoot.appendingPathComponent("scripts/jose-check/verify.py").path
        // Real time: joserfc checks exp and iat against its own clock.
        try await withSessionService(clock: ManualClock(Date())) { fixture in
            // Both keys of a rotation in the JWKS, the token signed by the one that signs now.
            _ = try await fixture.operatorClient.rotateSigningKey(.init())
            let pair = try await fixture.issue(userID: "user-py", amr: ["oidc_apple"])
            let jwks = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID().uuidString).json")
            try Data(try await fixture.client.getJWKS(.init()).jwksJson.utf8).write(to: jwks)
            defer { try? FileManager.default.removeItem(at: jwks) }
            let common = [
                script, "--jwks", jwks.path, "--issuer", fixture.configuration.issuer, "--audience",
                fixture.configuration.audience,
            ]

            let verified = try await Self.run(python, common + ["--token", pair.accessToken])
            #expect(verified.status == 0, "\(verified.text)")
            #expect(verified.text.contains("verified kid=\(try kid(of: pair.accessToken)) sub=user-py"))

            // And the same library refuses a tampered token and a wrong audience.
            var segments = pair.accessToken.split(separator: ".").map(String.init)
            segments[1] = String(segments[1].reversed())
            let tampered = try await Self.run(python, common + ["--token", segments.joined(separator: ".")])
            #expect(tampered.status != 0)
            let wrongAudience = try await Self.run(
                python,
                [
                    script, "--jwks", jwks.path, "--issuer", fixture.configuration.issuer, "--audience", "other",
                    "--token", pair.accessToken,
                ]
            )
            #expect(wrongAudience.status != 0)
        }
    }
}
