import AuthAPI
import AuthConfiguration
import AuthCrypto
import AuthRPC
import AuthRPCNIO
import AuthTestSupport
import Foundation
import Logging
import Testing

/// The `identity` executable as a process: a bad setting of its own stops the start at once, and
/// a sign-up then a sign-in go through the real server over TCP to the shared test database.
@Suite(.serialized) struct IdentityProcessTests {
    let secret = SecureRandom.bytes(count: 32)

    @Test func aBadSettingStopsTheStartAtOnce() async throws {
        let identity = try await ServiceProcess.run(
            "identity",
            environment: [
                "AUTH_RPC_SECRET": Data(secret).base64EncodedString(),
                "AUTH_DATABASE_URL": ProcessEnvironment.unreachableDatabase,
                "AUTH_OIDC_GOOGLE_CLIENT_IDS": "123.apps.googleusercontent.com",
                "AUTH_OIDC_GOOGLE_JWKS_URL": "http://example.com/jwks",
                "AUTH_DB_START_TIMEOUT_SECONDS": "60",
            ],
            timeout: .seconds(20)
        )
        #expect(identity.status == 2)
        #expect(
            identity.log.contains(
                "identity: configuration error: AUTH_OIDC_GOOGLE_JWKS_URL: must be an https:// URL (http:// only to a loopback address)"
            )
        )
        #expect(!identity.log.contains("The database is not reachable"))
    }

    /// It exited with status 1 ("Service stopped with an error") where the README promises 2
    /// for every configuration error (issue 19).
    @Test func aMissingDatabaseURLIsAConfigurationError() async throws {
        let identity = try await ServiceProcess.run(
            "identity",
            environment: ["AUTH_RPC_SECRET": Data(secret).base64EncodedString()],
            timeout: .seconds(20)
        )
        #expect(identity.status == 2)
        #expect(
            identity.log.contains(
                "identity: configuration error: AUTH_DATABASE_URL: is required (a libpq connection string)"
            ),
            "\(identity.log)"
        )
    }

    @Test func signUpAndSignInThroughTheExecutable() async throws {
        let environment = [
            "AUTH_RPC_SECRET": Data(secret).base64EncodedString(),
            "AUTH_DATABASE_URL": try await PostgresTestDatabase.connectionString(),
            "AUTH_IDENTITY_PORT": "0",
            // Cheaper hashes than the production default, to keep the test quick.
            "AUTH_IDENTITY_SCRYPT_LOG_N": "12",
            "AUTH_OIDC_APPLE_CLIENT_IDS": "com.laten.app",
        ]
        let password = "Sunny-Meadow-31"
        let identity = try await withServiceProcess("identity", environment: environment) { identity, port in
            try await self.signUpAndSignIn(identity: identity, port: port, password: password)
            return identity
        }
        // No password ever reaches the log.
        #expect(!identity.log.contains(password))
        #expect(!identity.log.contains("Wrong-Meadow-31"))
    }

    private func signUpAndSignIn(identity: ServiceProcess, port: Int, password: String) async throws {
        _ = try await identity.waitForLog(#"identity\.providers=apple .*Identity ready"#)
        let (rpc, transport) = loopbackClient(
            port: port,
            caller: "gateway",
            secret: secret,
            defaultTimeout: .seconds(30)
        )
        let client = Auth_Identity_V1_Identity.Client(wrapping: rpc)
        let email = "e2e-\(Base64URL.encode(SecureRandom.bytes(count: 6)).lowercased().filter(\.isLetter))@example.com"
        let created = try await client.signUp(.init(displayName: "End To End", email: email, password: password))
        let user = try #require(created.user)
        #expect(user.email == email)
        let signedIn = try await client.signInWithPassword(.init(email: email, password: password))
        #expect(signedIn.user?.id == user.id)
        do {
            _ = try await client.signInWithPassword(.init(email: email, password: "Wrong-Meadow-31"))
            Issue.record("a wrong password signed in")
        } catch let error as RPCError {
            #expect(error.reason == "invalid_credentials")
            #expect(error.message == "Invalid email or password")
        }
        let taken = try? await client.signUp(.init(displayName: "Again", email: email, password: password))
        #expect(taken == nil)
        let exists = try await client.contactExists(.init(email: email))
        #expect(exists.exists)
        // `authctl users unlock` (issue 19, item 6) clears the email's counted failures.
        let unlock = try await ServiceProcess.run(
            "authctl",
            arguments: ["users", "unlock", "--target", "127.0.0.1:\(port)", email],
            environment: ["AUTH_RPC_SECRET": Data(secret).base64EncodedString()]
        )
        #expect(unlock.status == 0)
        #expect(unlock.log.hasPrefix("cleared: the password was not locked"), "\(unlock.log)")
        _ = try await client.deleteUser(.init(userID: user.id))
        let after = try await client.contactExists(.init(email: email))
        #expect(!after.exists)
        await transport.shutdown()
    }
}
