import ArgumentParser
import AuthConfiguration
import AuthCrypto
import AuthDevProvider
import Dispatch
import Logging

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

extension AuthCtl {
    struct DevProvider: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "dev-provider",
            abstract: "Runs a stand-in Google, Apple and Facebook sign-in provider on loopback. Development only.",
            discussion: """
                Serves OpenID discovery, authorize, token, a JWK Set and Facebook's Graph /me on \
                127.0.0.1, prints the AUTH_* variables that point the backend at it (one NAME=value a \
                line), and serves until SIGINT or SIGTERM. Everyone consents at once: login_hint=<email> \
                signs in as that address, login_hint=deny refuses. Refused with AUTH_ENVIRONMENT=production \
                (docs/authctl.md, dev-provider).
                """
        )

        @Option(help: "The port on 127.0.0.1 to listen on (0: any free port).")
        var port = 9400

        @Option(
            help: """
                Where to write the PEM private key the backend signs Apple client secrets with (mode \
                0600); printed as AUTH_OAUTH_APPLE_PRIVATE_KEY.
                """
        )
        var appleKeyOut: String?

        func run() async throws {
            let environment: DeploymentEnvironment
            do {
                environment = try EnvironmentReader(variables: ProcessInfo.processInfo.environment).environment()
            } catch {
                StandardStreams.writeError("authctl: \(error)\n")
                throw ExitCode(2)
            }
            guard environment != .production else {
                StandardStreams.writeError(
                    "authctl: dev-provider signs anyone in as anyone: refused with AUTH_ENVIRONMENT=production\n"
                )
                throw ExitCode(1)
            }

            let appleKey = try ES256PrivateKey()
            if let appleKeyOut {
                do {
                    try Self.writePrivateFile(appleKeyOut, contents: try appleKey.pemRepresentation)
                } catch {
                    StandardStreams.writeError("authctl: cannot write --apple-key-out \(appleKeyOut): \(error)\n")
                    throw ExitCode(1)
                }
            }
            var configuration = DevOAuthProvider.Configuration()
            configuration.appleClientSecretKey = appleKey.publicKey

            // Trapped before the server starts, so that a signal sent as soon as the variables
            // appear stops it gracefully rather than killing the process.
            let (stop, stopping) = AsyncStream<Int32>.makeStream()
            let sources = [SIGINT, SIGTERM].map { number in
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number)
                source.setEventHandler { stopping.yield(number) }
                source.resume()
                return source
            }
            defer { for source in sources { source.cancel() } }

            // Logs go to standard error: standard output carries only the variables.
            var logger = Logger(label: "authctl.dev-provider") { StreamLogHandler.standardError(label: $0) }
            logger.logLevel = .info
            try await DevOAuthProvider.with(port: port, configuration: configuration, logger: logger) { provider in
                for (name, value) in Self.variables(provider, configuration, appleKeyPath: appleKeyOut) {
                    print("\(name)=\(value)")
                }
                // Flushed at once: a script reads them through a pipe while the server runs.
                fflush(nil)
                for await _ in stop { break }
            }
        }

        /// The variables that point the backend at `provider`, in the order printed.
        static func variables(
            _ provider: DevOAuthProvider,
            _ configuration: DevOAuthProvider.Configuration,
            appleKeyPath: String?
        ) -> [(String, String)] {
            var variables = [
                ("AUTH_OIDC_GOOGLE_DISCOVERY_URL", provider.discoveryURL(.google)),
                ("AUTH_OAUTH_GOOGLE_CLIENT_ID", configuration.googleClientID),
                ("AUTH_OAUTH_GOOGLE_CLIENT_SECRET", configuration.googleClientSecret),
                ("AUTH_OIDC_APPLE_DISCOVERY_URL", provider.discoveryURL(.apple)),
                ("AUTH_OAUTH_APPLE_CLIENT_ID", configuration.appleClientID),
                ("AUTH_OAUTH_APPLE_TEAM_ID", configuration.appleTeamID),
                ("AUTH_OAUTH_APPLE_KEY_ID", configuration.appleKeyID),
            ]
            if let appleKeyPath { variables.append(("AUTH_OAUTH_APPLE_PRIVATE_KEY", appleKeyPath)) }
            variables += [
                ("AUTH_OAUTH_FACEBOOK_CLIENT_ID", configuration.facebookClientID),
                ("AUTH_OAUTH_FACEBOOK_CLIENT_SECRET", configuration.facebookClientSecret),
                ("AUTH_OAUTH_FACEBOOK_AUTHORIZE_URL", provider.facebookAuthorizeURL),
                ("AUTH_OAUTH_FACEBOOK_TOKEN_URL", provider.facebookTokenURL),
                ("AUTH_OAUTH_FACEBOOK_GRAPH_URL", provider.facebookGraphURL),
            ]
            return variables
        }

        struct FileError: Error, CustomStringConvertible {
            var operation: String
            var errno: Int32
            var description: String { "\(operation): \(String(cString: strerror(errno)))" }
        }

        /// Writes `contents` to `path`, readable by its owner only (an existing file too).
        static func writePrivateFile(_ path: String, contents: String) throws {
            let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else { throw FileError(operation: "open", errno: errno) }
            defer { close(descriptor) }
            // open's mode applies only to a file it creates.
            guard fchmod(descriptor, 0o600) == 0 else { throw FileError(operation: "chmod", errno: errno) }
            var bytes = Array(contents.utf8)[...]
            while !bytes.isEmpty {
                let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
                if written < 0 {
                    if errno == EINTR { continue }
                    throw FileError(operation: "write", errno: errno)
                }
                bytes = bytes.dropFirst(written)
            }
        }
    }
}
