import Hummingbird
import Logging
import Prometheus
import ServiceLifecycle

/// A process's admin HTTP port: `GET /metrics` answers the Prometheus text exposition of
/// `registry`; nothing else is served. otp-dispatch (`AUTH_OTP_METRICS_PORT`) and the gateway
/// (`AUTH_GATEWAY_ADMIN_PORT`) run one, bound like their RPC or API port, so the metrics stay off
/// the public listener.
///
/// It logs one line when it listens, `Admin port serving /metrics` with `admin.host` and
/// `admin.port` (not Hummingbird's "listening on" line: scripts and tests read the public port
/// from that one).
public struct MetricsServer: Service {
    let application: Application<RouterResponder<BasicRequestContext>>

    public init(registry: PrometheusCollectorRegistry, host: String, port: Int, serverName: String, logger: Logger) {
        let router = Router()
        router.get("/metrics") { _, _ -> Response in
            var buffer: [UInt8] = []
            buffer.reserveCapacity(4096)
            registry.emit(into: &buffer)
            return Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: buffer))
            )
        }
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .warning)
        self.application = Application(
            router: router,
            configuration: ApplicationConfiguration(address: .hostname(host, port: port), serverName: serverName),
            onServerRunning: { channel in
                logger.info(
                    "Admin port serving /metrics",
                    metadata: ["admin.host": "\(host)", "admin.port": "\(channel.localAddress?.port ?? port)"]
                )
            },
            logger: quiet
        )
    }

    public func run() async throws {
        try await application.run()
    }
}
