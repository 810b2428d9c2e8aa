import ArgumentParser

/// The gateway's HTTP benchmark helpers (docs/benchmarks.md, "Gateway: wrk and
/// gateway-benchmark"); `scripts/bench/gateway-wrk.sh` runs them beside `wrk`.
@main
struct GatewayBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway-benchmark",
        abstract:
            "The gateway under load: a bare Hummingbird ceiling, signed-in sessions for wrk, full phone sign-ins.",
        subcommands: [Bare.self, Tokens.self, SignIns.self]
    )
}
