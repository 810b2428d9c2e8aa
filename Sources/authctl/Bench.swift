import ArgumentParser
import AuthConfiguration
import AuthProtobuf
import AuthRPC
import AuthRPCNIO
import AuthText
import BenchmarkHarness

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension AuthCtl {
    struct Bench: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Load-tests one method: throughput, latency percentiles, and counts by status.",
            discussion: """
                Closed loop by default: --concurrency calls in flight, each sent when the previous \
                one answers. With --rate, open loop: calls are due at a fixed rate and latency counts \
                from when a call was due, so a server that falls behind shows it (no coordinated \
                omission); --concurrency then caps the calls in flight. Stops after --total calls or \
                --duration seconds, or at Ctrl-C, and prints what it measured. Placeholders in the \
                template's strings vary each request: {{seq}}, {{uuid}}, {{phone}}, {{email}}, \
                {{setup.PATH}} (docs/authctl.md).
                """
        )

        @Argument(
            help:
                "The server's address, host:port; several replicas comma-separated (calls spread over them, a dead one skipped)."
        )
        var address: String

        @Argument(help: "The method, e.g. auth.health.v1.Health/Check.")
        var method: String

        @Argument(help: "The request template as JSON; '-' reads it from standard input.")
        var template = "{}"

        @Option(help: "Calls in flight (closed loop), or at most in flight (with --rate), 1-10000.")
        var concurrency = 16

        @Option(help: "RPC connections, 1-64.")
        var connections = 1

        @Option(help: "Calls to make (after warm-up); default: run for --duration.")
        var total: Int?

        @Option(help: "Seconds to run (after warm-up) when --total is not given, up to 3600.")
        var duration: Double = 10

        @Option(help: "Calls per second, open loop (latency measured from each call's due time).")
        var rate: Double?

        @Option(help: "Seconds of warm-up, not measured, up to 600.")
        var warmup: Double = 1

        @Option(help: "A method called once before the run; its response fills {{setup.PATH}}.")
        var setupMethod: String?

        @Option(help: "The setup call's request as JSON.")
        var setupJson = "{}"

        @Option(
            help:
                "A file of JSON objects, one a line (e.g. written by --record): call k takes line k (cycling) for {{input.PATH}}. With --warmup 0 and --total the line count, each line is used exactly once."
        )
        var inputs: String?

        @Option(
            help:
                "Append each OK response to this file as one line of JSON (e.g. the sessions a run issued, to refresh them later)."
        )
        var record: String?

        @Flag(help: "Print the result as JSON instead of a table.")
        var json = false

        @Flag(
            help:
                "Print the progress line (calls, calls/s, not OK) once a second even when standard error is not a terminal, one line each."
        )
        var progress = false

        @OptionGroup var connection: ConnectionOptions

        func validate() throws {
            guard (1...10_000).contains(concurrency) else {
                throw ValidationError("--concurrency must be in 1...10000")
            }
            guard (1...64).contains(connections) else { throw ValidationError("--connections must be in 1...64") }
            if let total, !(1...1_000_000_000).contains(total) {
                throw ValidationError("--total must be in 1...1000000000")
            }
            guard duration > 0, duration <= 3600 else { throw ValidationError("--duration must be in (0, 3600]") }
            guard warmup >= 0, warmup <= 600 else { throw ValidationError("--warmup must be in [0, 600]") }
            if let rate, !(rate > 0 && rate <= 10_000_000) { throw ValidationError("--rate must be in (0, 10000000]") }
        }

        func run() async throws {
            guard let method = ProtobufSchema.shared.method(method) else {
                fail("no method '\(self.method)' in proto/ (see authctl list ADDRESS)")
            }
            let text = template == "-" ? String(decoding: try StandardStreams.readInput(), as: UTF8.self) : template
            let requests: RequestTemplate
            do {
                requests = try RequestTemplate(json: text, type: method.inputType)
            } catch {
                fail(error)
            }
            let (client, transport) = try connection.makeClient(target: address, connections: connections)
            defer { Task { await transport.shutdown() } }
            let descriptor = MethodDescriptor(service: method.service, method: method.name)

            var setup: DynamicMessage?
            if let setupMethod {
                guard let setupSchema = ProtobufSchema.shared.method(setupMethod) else {
                    fail("no method '\(setupMethod)' in proto/")
                }
                do {
                    let request = try DynamicMessage(json: setupJson, type: setupSchema.inputType)
                    let answer = try await client.unary(
                        MethodDescriptor(service: setupSchema.service, method: setupSchema.name),
                        payload: try request.serializedBytes()
                    )
                    setup = try DynamicMessage(serializedBytes: answer, type: setupSchema.outputType)
                } catch {
                    fail("the setup call failed: \(error)")
                }
            } else if !requests.setupPaths.isEmpty {
                fail("the template uses {{setup.\(requests.setupPaths[0])}} but no --setup-method is given")
            }
            let inputLines: InputLines?
            if let inputs {
                do {
                    inputLines = try InputLines(path: inputs)
                } catch {
                    fail("--inputs \(inputs): \(error)")
                }
            } else if !requests.inputPaths.isEmpty {
                fail("the template uses {{input.\(requests.inputPaths[0])}} but no --inputs is given")
            } else {
                inputLines = nil
            }
            // A template that cannot render (a setup path that is not there) fails here, not in the run.
            do { _ = try requests.render(sequence: 0, setup: setup, input: inputLines?.first) } catch { fail(error) }

            let plan = LoadPlan(
                concurrency: concurrency,
                total: total,
                duration: .milliseconds(Int64(duration * 1000)),
                warmup: .milliseconds(Int64(warmup * 1000)),
                rate: rate
            )
            let run = LoadRun(plan: plan)
            let interrupt = run.stopOnInterrupt()
            let until = total.map { "\($0) calls" } ?? "\(LoadOptions.format(duration)) s"
            StandardStreams.writeError(
                "authctl: calling \(method.path) for \(until) after \(LoadOptions.format(warmup)) s warm-up; Ctrl-C stops and reports\n"
            )
            let terminal = StandardStreams.errorIsTerminal
            let progressTask =
                terminal || progress ? run.showProgress(overwriting: terminal, linePrefix: "authctl: ") : nil
            let setupResponse = setup
            let recorder: ResponseRecorder?
            do {
                recorder = try record.map { try ResponseRecorder(path: $0, type: method.outputType) }
            } catch {
                fail("cannot write --record \(record ?? ""): \(error)")
            }
            await run.drive { sequence in
                let payload = try requests.render(sequence: sequence, setup: setupResponse, input: inputLines?.next())
                let answer = try await client.unary(descriptor, payload: payload)
                recorder?.append(answer)
            }
            recorder?.close()
            progressTask?.cancel()
            interrupt.cancel()
            let report = run.report(method: method.path, connections: connections)
            print(json ? report.json : report.table)
        }
    }
}
