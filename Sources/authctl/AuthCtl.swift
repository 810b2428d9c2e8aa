import ArgumentParser
import AuthAPI
import AuthConfiguration
import AuthProtobuf
import AuthRPC
import AuthRPCNIO
import Logging

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The operators' tool.
@main
struct AuthCtl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "authctl",
        abstract: "Administers the authentication backend.",
        subcommands: [
            Health.self, Keys.self, List.self, Describe.self, Call.self, Bench.self, OTP.self, Users.self,
            DevProvider.self,
        ]
    )
}

/// Options every command that talks to a service shares: --target and the connection options.
struct ServiceTargetOptions: ParsableArguments {
    @Option(help: "The service's address, host:port.")
    var target: String

    @OptionGroup var connection: ConnectionOptions

    /// `defaultServer` is the service a command always talks to (keys: session), if any.
    func makeClient(defaultServer: String? = nil) throws -> (RPCClient, TCPClientTransport) {
        try connection.makeClient(target: target, defaultServer: defaultServer)
    }

    /// One call to the target: `call`'s answer, the connection closed either way. A failed call
    /// prints `authctl: <error>` and ends authctl with status 2 (docs/authctl.md).
    func call<Response>(
        defaultServer: String? = nil,
        _ call: (RPCClient) async throws -> Response
    ) async throws -> Response {
        let (client, transport) = try makeClient(defaultServer: defaultServer)
        let result: Result<Response, any Error>
        do {
            result = .success(try await call(client))
        } catch {
            result = .failure(error)
        }
        await transport.shutdown()
        switch result {
        case .success(let response):
            return response
        case .failure(let error):
            StandardStreams.writeError("authctl: \(error)\n")
            throw ExitCode(2)
        }
    }
}

/// How to connect to a service: TLS or the shared secret, names, timeout.
struct ConnectionOptions: ParsableArguments {
    @Option(
        help:
            "The service expected at the address (e.g. session): the connection is bound to it and, with TLS, its certificate must name it. Default: whichever service answers (its certificate still from the CA, or its HelloAck proving the secret)."
    )
    var serverName: String?

    @Option(help: "The caller name to present. Default: with TLS the first DNS name of the certificate, else authctl.")
    var caller: String?

    @Option(
        help:
            "This tool's certificate, PEM text or a file (env AUTH_RPC_TLS_CERT). With --tls-key and --tls-ca: mutual TLS; without them: plaintext with AUTH_RPC_SECRET."
    )
    var tlsCert: String?

    @Option(help: "The certificate's private key, PEM text or a file (env AUTH_RPC_TLS_KEY).")
    var tlsKey: String?

    @Option(help: "The CA certificate that signs the services' certificates, PEM text or a file (env AUTH_RPC_TLS_CA).")
    var tlsCa: String?

    @Option(help: "Seconds to wait for an answer.")
    var timeout: Double = 5

    /// The client configuration for `target`: host:port, or several separated by commas (calls
    /// are spread over them, and a dead one is skipped, as services do with AUTH_*_ADDRESSES).
    func clientConfiguration(
        target: String,
        defaultServer: String? = nil,
        connections: Int = 1
    ) throws -> RPCClientConfiguration {
        guard let addresses = RPCAddress.list(target) else {
            throw ValidationError("the address must be host:port (or several, comma-separated), got '\(target)'")
        }
        var environment = ProcessInfo.processInfo.environment
        for (variable, flag) in [
            (RPCTLSConfiguration.certificateVariable, tlsCert),
            (RPCTLSConfiguration.keyVariable, tlsKey),
            (RPCTLSConfiguration.caVariable, tlsCa),
        ] where flag != nil {
            environment[variable] = flag
        }
        let tls: RPCTLSConfiguration?
        do {
            tls = try RPCTLSConfiguration(environment: environment, expectedName: nil)
        } catch let error as ConfigurationError {
            throw ValidationError("\(error.variable) (or its --tls-* flag): \(error.problem)")
        }
        var secret: [UInt8] = []
        if tls == nil {
            do {
                secret = try readRPCSecret(environment)
            } catch let error as ConfigurationError {
                throw ValidationError("\(error.variable): \(error.problem)")
            }
        }
        return RPCClientConfiguration(
            addresses: addresses,
            connectionsPerAddress: connections,
            serviceName: caller ?? tls?.dnsNames.first ?? "authctl",
            secret: secret,
            tls: tls,
            serverName: serverName ?? defaultServer
        )
    }

    func makeClient(
        target: String,
        defaultServer: String? = nil,
        connections: Int = 1
    ) throws -> (RPCClient, TCPClientTransport) {
        let configuration = try clientConfiguration(
            target: target,
            defaultServer: defaultServer,
            connections: connections
        )
        var logger = Logger(label: "authctl")
        logger.logLevel = .error
        let transport = TCPClientTransport(configuration: configuration, logger: logger)
        let client = RPCClient(
            transport: transport,
            callerService: configuration.serviceName,
            defaultTimeout: .milliseconds(Int64(timeout * 1000))
        )
        return (client, transport)
    }
}

extension AuthCtl {
    struct Health: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Calls auth.health.v1.Health/Check; exits 0 when the service is SERVING."
        )

        @OptionGroup var target: ServiceTargetOptions

        @Option(help: "The service to ask about; empty asks about the server as a whole.")
        var service = ""

        func run() async throws {
            let response = try await target.call { client in
                try await Auth_Health_V1_Health.Client(wrapping: client)
                    .check(Auth_Health_V1_HealthCheckRequest(service: service))
            }
            print(response.status == .serving ? "SERVING" : "\(response.status)")
            if response.status != .serving { throw ExitCode(1) }
        }
    }
}

extension AuthCtl {
    struct Keys: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Manages the session service's access-token signing keys.",
            subcommands: [Rotate.self, Rewrap.self]
        )

        struct Rewrap: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Wraps every stored signing key under the session service's current master key.",
                discussion: """
                    The middle step of a master-key rotation (docs/session.md): run it once every session \
                    replica runs with the new key in AUTH_MASTER_KEY and the old one in \
                    AUTH_MASTER_KEY_PREVIOUS; afterwards AUTH_MASTER_KEY_PREVIOUS can be removed.
                    """
            )

            @OptionGroup var target: ServiceTargetOptions

            func run() async throws {
                let response = try await target.call { client in
                    try await Auth_Session_V1_Session.Client(wrapping: client)
                        .rewrapSigningKeys(Auth_Session_V1_RewrapSigningKeysRequest())
                }
                print(
                    "re-wrapped \(response.rewrapped) signing keys; \(response.alreadyCurrent) already under the current master key"
                )
            }
        }

        struct Rotate: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Adds a signing key: published in the JWKS now, signing after the publish delay.",
                discussion:
                    "The key it replaces stops signing then and leaves the JWKS once every token it signed has expired."
            )

            @OptionGroup var target: ServiceTargetOptions

            func run() async throws {
                let response = try await target.call(defaultServer: "session") { client in
                    try await Auth_Session_V1_Session.Client(wrapping: client)
                        .rotateSigningKey(Auth_Session_V1_RotateSigningKeyRequest())
                }
                let signsFrom = Date(timeIntervalSince1970: TimeInterval(response.signsFrom))
                print("new key \(response.newKeyID): published now, signs from \(signsFrom.ISO8601Format())")
                for kid in response.retiringKeyIds {
                    print("retiring key \(kid): stops signing then, leaves the JWKS once its tokens have expired")
                }
            }
        }
    }
}
