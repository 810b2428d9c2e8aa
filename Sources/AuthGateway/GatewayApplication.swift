import AuthAPI
import AuthAdminHTTP
import AuthConfiguration
import AuthProtobuf
import AuthRPC
import AuthRPCNIO
import Hummingbird
import Logging
import Prometheus
import ServiceLifecycle

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The HTTP/JSON API the apps call (docs/gateway.md, `openapi.yaml`). Each route is implemented
/// by calling identity, otp-dispatch and session over RPC; the gateway holds no state but its
/// rate-limit buckets and the cached JWK Set, and never opens the database.
public struct GatewayApplication: Sendable {
    public let configuration: ProcessConfiguration
    public let gateway: GatewayConfiguration
    public let logger: Logger
    let registry: PrometheusCollectorRegistry
    let identity: RPCClient
    let otpDispatch: RPCClient
    let session: RPCClient
    /// The trace exporter (``ProcessTracing/bootstrap(serviceName:environment:logger:)``), run
    /// beside the server; nil when traces are off. When set, each request is a `server` span
    /// (``tracingMiddleware``).
    public var tracing: (any Service)?

    public init(
        configuration: ProcessConfiguration,
        gateway: GatewayConfiguration,
        registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
        logger: Logger
    ) {
        self.configuration = configuration
        self.gateway = gateway
        self.registry = registry
        self.logger = logger
        func client(_ service: AuthServiceName) -> RPCClient {
            configuration.rpcClient(for: service, logger: logger, defaultTimeout: gateway.rpcTimeout)
        }
        self.identity = client(.identity)
        self.otpDispatch = client(.otpDispatch)
        self.session = client(.session)
    }

    /// The API's OpenAPI document as JSON (`openapi.json`, generated from `openapi.yaml` by
    /// scripts/openapi/yaml-to-json.py, CI checks it is current; embedded in the executable).
    static let openAPIDocument = ByteBuffer(bytes: PackageResources.openapi_json)

    /// The Hummingbird application, ready to run as a `Service`.
    public func makeApplication() -> some ApplicationProtocol {
        let metrics = GatewayMetrics(factory: PrometheusMetricsFactory(registry: registry))
        func counted(_ client: RPCClient, _ service: Backends.Service) -> RPCClient {
            var client = client
            client.interceptors.append(RPCCallMetrics(service: service.rawValue, metrics: metrics))
            return client
        }
        let backends = Backends(
            identity: Auth_Identity_V1_Identity.Client(wrapping: counted(identity, .identity)),
            otp: Auth_Otp_V1_OTP.Client(wrapping: counted(otpDispatch, .otpDispatch)),
            session: Auth_Session_V1_Session.Client(wrapping: counted(session, .session)),
            timeout: gateway.rpcTimeout,
            metrics: metrics
        )
        let sessionClient = backends.session
        let timeout = gateway.rpcTimeout
        let jwks = JWKSCache(
            maxAge: gateway.jwksMaxAge,
            refetchInterval: gateway.jwksRefetchInterval,
            issuer: gateway.tokenIssuer,
            audience: gateway.tokenAudience
        ) {
            try await sessionClient.getJWKS(Auth_Session_V1_GetJWKSRequest(), options: CallOptions(timeout: timeout))
                .jwksJson
        }
        let routes = GatewayRoutes(
            backends: backends,
            authenticator: AccessTokenAuthenticator(jwks: jwks, backends: backends),
            routeLimiter: RateLimiter(
                capacity: gateway.requestsPerMinutePerRoute,
                per: .seconds(60),
                maxKeys: gateway.maxTrackedClients
            ),
            jwksMaxAge: gateway.jwksMaxAge,
            reauthenticationWindow: gateway.reauthenticationWindow,
            publicURL: gateway.publicURL,
            supabaseAnonKeys: gateway.supabaseAnonKeys,
            redirectAllowList: gateway.redirectAllowList,
            logger: logger
        )

        let router = Router(context: GatewayRequestContext.self)
        var forwardedForWarnings: ForwardedForWarnings?
        if configuration.environment == .production {
            let warnings = ForwardedForWarnings(logger: logger)
            warnings.started(trustedProxies: gateway.trustedProxies)
            forwardedForWarnings = warnings
        }
        if tracing != nil { router.add(middleware: Self.tracingMiddleware) }
        router.add(
            middleware: RequestIdentityMiddleware(
                resolver: ClientAddressResolver(trustedProxies: gateway.trustedProxies),
                forwardedForWarnings: forwardedForWarnings,
                accessLog: gateway.accessLog ? logger : nil
            )
        )
        router.add(middleware: MetricsMiddleware(metrics: metrics))
        router.add(middleware: ErrorResponseMiddleware(logger: logger))
        router.add(middleware: AuthDecisionMiddleware(logger: logger))

        router.post("/v1/otp/send", use: routes.sendCode)
        router.post("/v1/otp/resend", use: routes.resendCode)
        router.post("/v1/otp/verify", use: routes.verifyCode)
        router.get("/v1/otp/{verification_id}", use: routes.codeStatus)
        router.post("/v1/signup", use: routes.signUp)
        router.post("/v1/login", use: routes.logIn)
        router.post("/api/auth/login", use: routes.logIn)
        router.post("/v1/idtoken", use: routes.signInWithIDToken)
        router.get("/v1/oauth/{provider}/authorize", use: routes.oauthAuthorize)
        router.get("/v1/oauth/{provider}/callback", use: routes.oauthCallback)
        router.post("/v1/oauth/{provider}/callback", use: routes.oauthCallback)
        router.post("/v1/oauth/token", use: routes.oauthToken)
        router.post("/v1/password/reset", use: routes.requestPasswordReset)
        router.post("/v1/password/reset/confirm", use: routes.confirmPasswordReset)
        router.post("/v1/me/password", use: routes.changePassword)
        router.post("/v1/token/refresh", use: routes.refresh)
        router.post("/v1/logout", use: routes.logOut)
        router.get("/v1/session", use: routes.currentSession)
        router.get("/v1/me", use: routes.me)
        router.patch("/v1/me", use: routes.updateMe)
        router.delete("/v1/me", use: routes.deleteMe)
        router.get("/v1/me/identities", use: routes.myIdentities)
        router.post("/v1/me/identities", use: routes.linkIdentity)
        router.delete("/v1/me/identities/{provider}", use: routes.unlinkIdentity)
        router.post("/v1/me/identities/{provider}/authorize", use: routes.linkIdentityAuthorize)
        router.post("/v1/me/contact", use: routes.startContactChange)
        router.post("/v1/me/contact/verify", use: routes.verifyContactChange)
        router.get("/v1/sessions", use: routes.listSessions)
        router.delete("/v1/sessions/{id}", use: routes.revokeSession)
        router.get("/.well-known/jwks.json", use: routes.jwks)
        router.post("/v1/hooks/twilio/status", use: routes.twilioStatus)
        // The Supabase Auth door (docs/supabase.md).
        router.get("/auth/v1/health", use: routes.supabaseHealth)
        router.get("/auth/v1/.well-known/jwks.json", use: routes.supabaseJWKS)
        router.post("/auth/v1/token", use: routes.supabaseToken)
        router.get("/auth/v1/user", use: routes.supabaseGetUser)
        router.post("/auth/v1/logout", use: routes.supabaseLogout)
        router.post("/auth/v1/signup", use: routes.supabaseSignUp)
        router.get("/auth/v1/settings", use: routes.supabaseSettings)
        router.post("/auth/v1/recover", use: routes.supabaseRecover)
        router.put("/auth/v1/user", use: routes.supabaseUpdateUser)
        router.get("/auth/v1/authorize", use: routes.supabaseAuthorize)
        router.get("/auth/v1/user/identities/authorize", use: routes.supabaseLinkAuthorize)
        router.delete("/auth/v1/user/identities/{identity_id}", use: routes.supabaseUnlinkIdentity)
        router.post("/auth/v1/otp", use: routes.supabaseSendCode)
        router.post("/auth/v1/verify", use: routes.supabaseVerify)
        router.get("/auth/v1/verify", use: routes.supabaseFollowLink)
        router.post("/auth/v1/resend", use: routes.supabaseResend)
        for method in [HTTPRequest.Method.get, .post, .put, .delete, .patch] {
            router.on("/auth/v1/**", method: method, use: routes.supabaseNotFound)
        }

        let live = try? JSONResponse.make(HealthReport(status: "SERVING", services: [:]))
        router.get("/health/live") { _, _ in
            guard let live else { throw APIError.internalError }
            return live
        }
        // Answered from a result at most 1 s old, and one probe at a time: a flood of it costs
        // the services one fan-out per second (issue 19).
        let readiness = ReadinessCache(maxAge: .seconds(1)) { await self.readiness() }
        router.get("/health/ready") { _, _ in
            let report = await readiness.report()
            return try JSONResponse.make(report, status: report.status == "SERVING" ? .ok : .serviceUnavailable)
        }
        router.get("/openapi.json") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "application/json; charset=utf-8"],
                body: ResponseBody(byteBuffer: Self.openAPIDocument)
            )
        }

        return Application(
            router: router,
            server: .guardedHTTP1(
                headerTimeout: gateway.headerTimeout,
                idleTimeout: gateway.idleTimeout,
                maxConnections: gateway.maxConnections
            ),
            configuration: ApplicationConfiguration(
                address: .hostname(configuration.bindHost, port: configuration.port),
                serverName: "auth-gateway"
            ),
            // `/metrics` is on the admin port, off the public listener (issue 19).
            services: [
                MetricsServer(
                    registry: registry,
                    host: configuration.bindHost,
                    port: gateway.adminPort,
                    serverName: "auth-gateway-admin",
                    logger: logger
                )
            ] + (configuration.rpcTLSWatcher(logger: logger).map { [$0] } ?? []) + (tracing.map { [$0] } ?? []),
            logger: logger
        )
    }

    /// A `server` span per request, named by its route template, continuing the caller's
    /// `traceparent`. The query's values that are credentials (a link's `token`, the provider
    /// callback's `code` and `state`, …) are recorded as `REDACTED`.
    static var tracingMiddleware: TracingMiddleware<GatewayRequestContext> {
        TracingMiddleware(
            redactingQueryParameters: [
                "token", "token_hash", "code", "state", "code_verifier", "access_token", "refresh_token",
                "id_token", "apikey",
            ]
        )
    }

    /// Asks every backend service's Health/Check, concurrently, each bounded by one second.
    func readiness() async -> HealthReport {
        let backends: [(String, RPCClient)] = [
            (AuthServiceName.identity.rawValue, identity),
            (AuthServiceName.otpDispatch.rawValue, otpDispatch),
            (AuthServiceName.session.rawValue, session),
        ]
        let statuses = await withTaskGroup(of: (String, String).self) { group in
            for (name, client) in backends {
                group.addTask {
                    do {
                        let response = try await Auth_Health_V1_Health.Client(wrapping: client)
                            .check(Auth_Health_V1_HealthCheckRequest(), options: CallOptions(timeout: .seconds(1)))
                        return (name, response.status == .serving ? "SERVING" : "NOT_SERVING")
                    } catch {
                        return (name, "UNREACHABLE")
                    }
                }
            }
            var statuses: [String: String] = [:]
            for await (name, status) in group { statuses[name] = status }
            return statuses
        }
        let allServing = statuses.values.allSatisfy { $0 == "SERVING" }
        return HealthReport(status: allServing ? "SERVING" : "NOT_SERVING", services: statuses)
    }
}

extension GatewayApplication {
    /// `request_id` of the HTTP request the current task serves, for the process's log handler.
    public static var logMetadata: Logger.MetadataProvider { RequestIdentityMiddleware.logMetadata }
}
