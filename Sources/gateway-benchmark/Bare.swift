import ArgumentParser
import Foundation
import Hummingbird
import Logging

extension GatewayBenchmark {
    /// The ceiling: Hummingbird with one route answering a constant, no middleware, on the same
    /// event loops a default `Application` uses (as the gateway does).
    struct Bare: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Serves GET /health/live with a constant JSON body (the ceiling wrk measures the gateway against).",
            discussion: "Prints 'listening on 127.0.0.1:PORT' once it serves; runs until SIGTERM or SIGINT."
        )

        @Option(help: "Port to listen on (0: any free port, printed).")
        var port = 0

        @Option(help: "Address to listen on.")
        var host = "127.0.0.1"

        func validate() throws {
            guard (0...65535).contains(port) else { throw ValidationError("--port must be in 0...65535") }
        }

        func run() async throws {
            // The gateway's /health/live answer, byte for byte (JSONEncoder, declaration order).
            let body = ByteBuffer(string: #"{"status":"SERVING","services":{}}"#)
            let router = Router()
            router.get("/health/live") { _, _ in
                Response(
                    status: .ok,
                    headers: [.contentType: "application/json; charset=utf-8"],
                    body: ResponseBody(byteBuffer: body)
                )
            }
            var logger = Logger(label: "gateway-benchmark")
            logger.logLevel = .warning
            let application = Application(
                router: router,
                configuration: ApplicationConfiguration(address: .hostname(host, port: port), serverName: "bare"),
                onServerRunning: { channel in
                    // Unbuffered: the script waits for this line in a file.
                    FileHandle.standardOutput.write(
                        Data("listening on \(host):\(channel.localAddress?.port ?? 0)\n".utf8)
                    )
                },
                logger: logger
            )
            try await application.runService()
        }
    }
}
