import ArgumentParser
import AuthAPI
import AuthConfiguration
import AuthProtobuf
import AuthRPC
import Foundation
import Logging
import Synchronization

extension GatewayBenchmark {
    /// Signed-in sessions for wrk's scripts, made as the gateway's `/v1/otp/verify` makes them
    /// after a right code (identity FindOrCreateByContact, then session Issue with amr otp_sms),
    /// but over RPC directly: through the HTTP API each would need a code, and tens of thousands
    /// of sign-ins would take longer than the benchmark.
    struct Tokens: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Makes N signed-in sessions over RPC (caller gateway) and writes their tokens, one per line.",
            discussion: """
                Reads the gateway's configuration from the environment: AUTH_RPC_SECRET (plaintext RPC) or \
                AUTH_RPC_TLS_* with a certificate naming gateway, AUTH_IDENTITY_ADDRESSES, AUTH_SESSION_ADDRESSES. \
                Writes DIR/access-tokens.txt and DIR/refresh-tokens.txt (line i of each: the same session).
                """
        )

        @Option(help: "Sessions to make, 1-1000000.")
        var count = 10_000

        @Option(help: "Folder for access-tokens.txt and refresh-tokens.txt (created if missing).")
        var out: String

        @Option(help: "Sessions per user (a new random +91 phone number per user), 1-1000.")
        var sessionsPerUser = 1

        @Option(help: "Calls in flight, 1-1024.")
        var concurrency = 32

        @Option(help: "The sessions' access-token format: standard (/v1) or supabase (the /auth/v1 door's).")
        var format: TokenFormat = .standard

        @Option(help: "Also make an account with this email, confirmed, whose password is \(Self.benchPassword).")
        var passwordEmail: String?

        /// The password of `--password-email`'s account.
        static let benchPassword = "Bench-Password-42"

        enum TokenFormat: String, ExpressibleByArgument {
            case standard, supabase
        }

        func validate() throws {
            guard (1...1_000_000).contains(count) else { throw ValidationError("--count must be in 1...1000000") }
            guard (1...1000).contains(sessionsPerUser) else {
                throw ValidationError("--sessions-per-user must be in 1...1000")
            }
            guard (1...1024).contains(concurrency) else { throw ValidationError("--concurrency must be in 1...1024") }
        }

        func run() async throws {
            let configuration: ProcessConfiguration
            do {
                configuration = try ProcessConfiguration(service: .gateway)
            } catch {
                throw ValidationError("configuration: \(error)")
            }
            var logger = Logger(label: "gateway-benchmark")
            logger.logLevel = .warning
            let identity = Auth_Identity_V1_Identity.Client(
                wrapping: configuration.rpcClient(for: .identity, logger: logger)
            )
            let session = Auth_Session_V1_Session.Client(
                wrapping: configuration.rpcClient(for: .session, logger: logger)
            )

            if let passwordEmail {
                // Signed up, then its email proved by the sign-up's own code (the password kept).
                _ = try await identity.signUp(
                    Auth_Identity_V1_SignUpRequest(
                        displayName: "Bench User",
                        email: passwordEmail,
                        password: Self.benchPassword,
                        clientIP: "127.0.0.1"
                    )
                )
                _ = try await identity.findOrCreateByContact(
                    Auth_Identity_V1_FindOrCreateByContactRequest(
                        email: passwordEmail,
                        clientIP: "127.0.0.1",
                        signupVerification: true
                    )
                )
            }
            let tokenFormat: Auth_Session_V1_AccessTokenFormat = format == .supabase ? .supabase : .standard
            let users = (count + sessionsPerUser - 1) / sessionsPerUser
            let next = SequenceCounter()
            let started = ContinuousClock.now
            let pairs = try await withThrowingTaskGroup(of: [(String, String)].self) { group in
                for _ in 0..<min(concurrency, users) {
                    group.addTask {
                        var made: [(String, String)] = []
                        while true {
                            let user = next.take()
                            guard user < users else { return made }
                            let phone = randomIndianMobile()
                            let found = try await identity.findOrCreateByContact(
                                Auth_Identity_V1_FindOrCreateByContactRequest(phone: phone, clientIP: "127.0.0.1")
                            )
                            guard let userID = found.user?.id else {
                                throw ValidationError("FindOrCreateByContact answered no user")
                            }
                            let sessions = min(sessionsPerUser, count - user * sessionsPerUser)
                            for _ in 0..<sessions {
                                var request = Auth_Session_V1_IssueRequest(
                                    userID: userID,
                                    amr: ["otp_sms"],
                                    device: Auth_Session_V1_Device(userAgent: "gateway-benchmark"),
                                    clientIP: "127.0.0.1",
                                    tokenFormat: tokenFormat
                                )
                                if tokenFormat == .supabase { request.phone = phone }
                                let issued = try await session.issue(request)
                                guard let tokens = issued.tokens else {
                                    throw ValidationError("Issue answered no tokens")
                                }
                                made.append((tokens.accessToken, tokens.refreshToken))
                            }
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append(contentsOf: $1) }
            }
            let elapsed = ContinuousClock.now - started
            try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
            try Self.write(pairs.map(\.0), to: "\(out)/access-tokens.txt")
            try Self.write(pairs.map(\.1), to: "\(out)/refresh-tokens.txt")
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            FileHandle.standardError.write(
                Data(
                    "gateway-benchmark: \(pairs.count) sessions of \(users) users in \(String(format: "%.1f", seconds)) s, tokens in \(out)\n"
                        .utf8
                )
            )
        }

        static func write(_ lines: [String], to path: String) throws {
            try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: path))
        }
    }
}

/// Hands out 0, 1, 2, … to concurrent tasks.
final class SequenceCounter: Sendable {
    private let value = Atomic<Int>(0)

    func take() -> Int { value.add(1, ordering: .relaxed).oldValue }
}

/// A random Indian mobile number in E.164 (+91, ten digits starting with 9): a new user for
/// every sign-in (one in a billion repeats, which then signs in instead of signing up).
func randomIndianMobile() -> String {
    "+919" + String(UInt32.random(in: 0..<1_000_000_000)).leftPadded(to: 9)
}

extension String {
    func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: "0", count: length - count) + self
    }
}
