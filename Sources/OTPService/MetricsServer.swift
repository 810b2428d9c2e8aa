import Hummingbird
import Logging
import Prometheus
import ServiceLifecycle

/// The admin HTTP port (`AUTH_OTP_METRICS_PORT`): `GET /metrics` answers the Prometheus text
/// exposition of `registry`; nothing else is served.
public struct MetricsServer: Service {
    let application: Application<RouterResponder<BasicRequestContext>>

    public init(registry: PrometheusCollectorRegistry, host: String, port: Int, logger: Logger) {
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
        self.application = Application(
            router: router,
            configuration: ApplicationConfiguration(address: .hostname(host, port: port), serverName: "otp-dispatch-admin"),
            logger: logger
        )
    }

    public func run() async throws {
        try await application.run()
    }
}
