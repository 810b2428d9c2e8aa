import AuthCrypto
import Hummingbird
import Logging
import Synchronization

/// A stand-in OAuth 2.0 / OpenID Connect provider imitating Google, Apple and Facebook on
/// loopback, so that the browser sign-in (authorization-code flow) can be tested end to end and
/// run locally. Development only: anyone who can reach it signs in as anyone.
///
/// Each provider lives under its own path (`/google`, `/apple`, `/facebook`): OpenID discovery
/// and a JWK Set for Google and Apple, `authorize` (the person consents at once; `login_hint`
/// picks who, `deny` refuses), `token` (client authentication as the real provider does it,
/// single-use codes, PKCE S256, ES256 ID tokens) and Facebook's Graph `/me`. Every request is
/// recorded for tests to look at (``requests``).
public final class DevOAuthProvider: Sendable {
    /// The providers imitated; the raw value is the path prefix.
    public enum Provider: String, Sendable, CaseIterable {
        case google
        case apple
        case facebook
    }

    /// The clients the provider knows and Apple's client-secret key.
    public struct Configuration: Sendable {
        public var googleClientID = "dev-google-client"
        public var googleClientSecret = "dev-google-secret"
        public var facebookClientID = "dev-facebook-app"
        public var facebookClientSecret = "dev-facebook-secret"
        /// Apple's client ID: the Services ID.
        public var appleClientID = "dev.apple.services"
        /// The team ID, which Apple client secrets carry as `iss`.
        public var appleTeamID = "DEVTEAM001"
        /// The key ID, which Apple client secrets carry in their header as `kid`.
        public var appleKeyID = "DEVKEY0001"
        /// The public half of the key the backend signs Apple client secrets with. nil: every
        /// Apple token request is refused with `invalid_client`.
        public var appleClientSecretKey: ES256PublicKey?

        public init() {}

        /// The client ID registered at `provider`.
        func clientID(for provider: Provider) -> String {
            switch provider {
            case .google: googleClientID
            case .apple: appleClientID
            case .facebook: facebookClientID
            }
        }
    }

    /// One request as received.
    public struct Received: Sendable {
        /// `GET`, `POST`, ...
        public var method: String
        /// The path, as sent (not percent-decoded), without the query.
        public var path: String
        /// The query's parameters, decoded; a repeated name keeps its last value.
        public var query: [String: String]
        /// A form body's (`application/x-www-form-urlencoded`) parameters, decoded; empty for
        /// other bodies.
        public var form: [String: String]
        /// Header names lower-cased; a repeated header keeps its last value.
        public var headers: [String: String]
    }

    let configuration: Configuration
    let logger: Logger
    /// Signs every ID token, of every provider; published at each `/<provider>/jwks`.
    let signingKey: ES256PrivateKey
    let signingKeyID: String
    let state = Mutex(ProviderState())
    private let boundPort = Atomic<Int>(0)

    private init(configuration: Configuration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        self.signingKey = try ES256PrivateKey()
        self.signingKeyID = Hex.lowercase(SecureRandom.bytes(count: 8))
    }

    /// Runs `body` with a provider listening on 127.0.0.1:`port` (0: any free port, see
    /// ``port``), and stops it when `body` returns or throws.
    ///
    /// - Parameter logger: where refused requests are explained (no secret is logged);
    ///   silent by default.
    public static func with<R>(
        port: Int = 0,
        configuration: Configuration,
        logger: Logger = Logger(label: "auth.dev-provider", factory: { _ in SwiftLogNoOpLogHandler() }),
        _ body: (DevOAuthProvider) async throws -> R
    ) async throws -> R {
        let provider = try DevOAuthProvider(configuration: configuration, logger: logger)
        let router = Router()
        let handler: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, _ in
            try await provider.respond(to: request)
        }
        router.get("**", use: handler)
        router.post("**", use: handler)
        let running = AsyncStream<Int>.makeStream()
        // Stopped by cancellation (`Application.run` runs the server in a ServiceGroup of its own,
        // which cancellation shuts down; this module does not depend on ServiceLifecycle), so that
        // a request held by `setTokenDelay` does not hold the stop up either. Hummingbird logs
        // that cancellation as an error: its own logger says only what is critical.
        var serverLogger = logger
        serverLogger.logLevel = .critical
        let application = Application(
            router: router,
            configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: port)),
            onServerRunning: { channel in running.continuation.yield(channel.localAddress?.port ?? 0) },
            logger: serverLogger
        )
        let server = Task {
            defer { running.continuation.finish() }
            try await application.run()
        }
        var iterator = running.stream.makeAsyncIterator()
        guard let bound = await iterator.next() else {
            // The server failed to start (say, the port is taken), or this task was cancelled.
            server.cancel()
            try await server.value
            throw CancellationError()
        }
        provider.boundPort.store(bound, ordering: .relaxed)
        logger.info("development OAuth provider listening", metadata: [LogKey.url: "\(provider.baseURL)"])
        let result: Result<R, any Error>
        do {
            result = .success(try await body(provider))
        } catch {
            result = .failure(error)
        }
        server.cancel()
        _ = await server.result
        return try result.get()
    }

    /// The port it listens on.
    public var port: Int { boundPort.load(ordering: .relaxed) }

    /// `http://127.0.0.1:<port>`.
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// The issuer of `provider`'s ID tokens: ``baseURL``, `/`, the provider's name.
    public func issuer(_ provider: Provider) -> String {
        baseURL + "/" + provider.rawValue
    }

    /// The OpenID discovery document's URL of Google and Apple. Facebook has none: its URL here
    /// answers 404 (use ``facebookAuthorizeURL``, ``facebookTokenURL``, ``facebookGraphURL``).
    public func discoveryURL(_ provider: Provider) -> String {
        issuer(provider) + "/.well-known/openid-configuration"
    }

    /// Facebook's authorization dialog (`www.facebook.com/dialog/oauth`).
    public var facebookAuthorizeURL: String { issuer(.facebook) + "/authorize" }

    /// Facebook's token endpoint (`graph.facebook.com/oauth/access_token`): GET or POST.
    public var facebookTokenURL: String { issuer(.facebook) + "/token" }

    /// The Graph API's base URL; the caller appends `/me`.
    public var facebookGraphURL: String { issuer(.facebook) }

    /// While set, every provider's token endpoint waits this long before answering (a provider
    /// that does not answer in time). nil: answer at once.
    public func setTokenDelay(_ delay: Duration?) {
        state.withLock { $0.tokenDelay = delay }
    }

    /// The requests received so far, oldest first (the most recent 10,000).
    public var requests: [Received] { state.withLock { $0.requests } }
}
