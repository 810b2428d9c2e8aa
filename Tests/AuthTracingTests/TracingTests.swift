import AuthConfiguration
import AuthTestSupport
import Foundation
import Logging
import ServiceLifecycle
import Testing
import Tracing

@testable import AuthTracing

@Suite struct W3CTraceContextTests {
    let example = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test func aTraceparentIsReadAndWrittenBack() throws {
        let trace = try #require(W3CTraceContext(traceparent: example, traceState: "vendor=1"))
        #expect(trace.traceID.hex == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(trace.spanID == 0x00f0_67aa_0ba9_02b7)
        #expect(trace.sampled)
        #expect(trace.traceState == "vendor=1")
        #expect(trace.traceparent == example)
        let unsampled = try #require(
            W3CTraceContext(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
        )
        #expect(!unsampled.sampled)
        // A later version's first four fields (§3.2.4).
        #expect(W3CTraceContext(traceparent: "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra") != nil)
    }

    @Test(arguments: [
        "",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",  // upper case
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // zero span id
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // version ff
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",  // version 00 with more
        "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",  // dashes misplaced
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
    ])
    func malformedTraceparentsAreIgnored(_ text: String) {
        #expect(W3CTraceContext(traceparent: text) == nil)
    }
}

@Suite struct TraceSamplerTests {
    let parent = W3CTraceContext(
        traceID: .init(high: 1, low: 2),
        spanID: 3,
        sampled: false
    )

    @Test func aParentBasedSamplerFollowsTheParent() {
        let sampler = TraceSampler(name: nil, argument: nil)
        #expect(sampler == .parentBased(root: .alwaysOn))
        #expect(sampler?.shouldSample(traceID: parent.traceID, parent: parent) == false)
        var sampledParent = parent
        sampledParent.sampled = true
        #expect(sampler?.shouldSample(traceID: parent.traceID, parent: sampledParent) == true)
        #expect(sampler?.shouldSample(traceID: parent.traceID, parent: nil) == true)
    }

    @Test func aRatioSamplesThatShareOfTraceIDs() throws {
        let sampler = try #require(TraceSampler(name: "traceidratio", argument: "0.25"))
        var generator = SystemRandomNumberGenerator()
        let sampled = (0..<20_000).filter { _ in
            sampler.shouldSample(traceID: .random(using: &generator), parent: nil)
        }.count
        // 5,000 expected; 6 standard deviations (61) either side.
        #expect((4_634...5_366).contains(sampled), "\(sampled)")
        let id = W3CTraceContext.TraceID.random(using: &generator)
        #expect(sampler.shouldSample(traceID: id, parent: nil) == sampler.shouldSample(traceID: id, parent: nil))
        #expect(TraceSampler(name: "traceidratio", argument: "1.5") == nil)
        #expect(TraceSampler(name: "jaeger_remote", argument: nil) == nil)
    }
}

@Suite struct TracingConfigurationTests {
    func configuration(_ environment: [String: String]) throws -> TracingConfiguration? {
        try TracingConfiguration(serviceName: "session", environment: environment)
    }

    @Test func tracesAreOffUnlessAnEndpointIsSet() throws {
        #expect(try configuration([:]) == nil)
        #expect(try configuration(["OTEL_EXPORTER_OTLP_ENDPOINT": ""]) == nil)
        let endpoint = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"]
        #expect(try configuration(endpoint.merging(["OTEL_SDK_DISABLED": "true"]) { $1 }) == nil)
        #expect(try configuration(endpoint.merging(["OTEL_TRACES_EXPORTER": "none"]) { $1 }) == nil)
    }

    @Test func defaultsAndOverrides() throws {
        let defaults = try #require(try configuration(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"]))
        #expect(defaults.tracesURL == "http://collector:4318/v1/traces")
        #expect(defaults.scheduleDelay == .seconds(5))
        #expect(defaults.maxQueueSize == 2_048 && defaults.maxBatchSize == 512)
        #expect(defaults.exportTimeout == .seconds(10))
        #expect(defaults.resourceAttributes.map(\.0) == ["service.name"])
        #expect(defaults.resourceAttributes.first?.1 == "session")
        let set = try #require(
            try configuration([
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces.example/otlp",
                "OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b,tenant=t1",
                "OTEL_SERVICE_NAME": "session-eu",
                "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod",
                "OTEL_BSP_SCHEDULE_DELAY": "100",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
            ])
        )
        #expect(set.tracesURL == "https://traces.example/otlp")
        #expect(set.headers.map { "\($0.0)=\($0.1)" } == ["api-key=a b", "tenant=t1"])
        #expect(
            set.resourceAttributes.map { "\($0.0)=\($0.1)" } == [
                "service.name=session-eu", "deployment.environment=prod",
            ]
        )
        #expect(set.scheduleDelay == .milliseconds(100))
    }

    @Test(arguments: [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"),
        ("OTEL_TRACES_SAMPLER", "sometimes"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "no-value"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "0"),
        ("OTEL_TRACES_EXPORTER", "zipkin"),
    ])
    func badValuesNameTheVariable(_ variable: String, _ value: String) {
        var environment = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"]
        environment[variable] = value
        #expect {
            _ = try configuration(environment)
        } throws: { error in
            (error as? ConfigurationError)?.variable == variable
        }
    }
}

@Suite struct OTLPExportTests {
    /// A parent and a child span, and an unsampled trace's span, through the real exporter to
    /// an HTTP receiver: one JSON export with the two sampled spans.
    @Test func spansAreExportedAsOTLPJSON() async throws {
        try await HTTPReceiver.with { collector in
            let configuration = try #require(
                try TracingConfiguration(
                    serviceName: "session",
                    environment: [
                        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(collector.port)",
                        "OTEL_BSP_SCHEDULE_DELAY": "50",
                    ]
                )
            )
            let exporter = try OTLPSpanExporter(configuration: configuration, logger: Logger(label: "test"))
            let tracer = OTLPTracer(sampler: configuration.sampler, exporter: exporter)
            let group = ServiceGroup(services: [exporter], logger: Logger(label: "test"))
            let running = Task { try await group.run() }

            let parent = tracer.startSpan("/v1/otp/verify", context: .topLevel, ofKind: .server)
            parent.attributes["http.route"] = "/v1/otp/verify"
            let child = tracer.startSpan("postgresql", context: parent.context, ofKind: .client)
            child.attributes["db.operation.batch.size"] = 2
            child.recordError(CancellationError())
            child.end()
            parent.setStatus(SpanStatus(code: .error, message: "unavailable"))
            parent.end()
            // A caller that does not sample: its trace is carried on, nothing is recorded.
            var context = ServiceContext.topLevel
            tracer.extract(
                ["traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"],
                into: &context,
                using: DictionaryExtractor()
            )
            let unsampled = tracer.startSpan("/v1/session", context: context, ofKind: .server)
            #expect(!unsampled.isRecording)
            var headers: [String: String] = [:]
            tracer.inject(unsampled.context, into: &headers, using: DictionaryInjector())
            #expect(headers["traceparent"]?.hasPrefix("00-4bf92f3577b34da6a3ce929d0e0e4736-") == true)
            #expect(headers["traceparent"]?.hasSuffix("-00") == true)
            unsampled.end()

            let arrived = await collector.wait(timeout: .seconds(10)) { !$0.isEmpty }
            #expect(arrived)
            await group.triggerGracefulShutdown()
            try await running.value

            let request = try #require(collector.requests.first)
            #expect(request.path == "/v1/traces")
            #expect(request.headers["content-type"] == "application/json")
            let export = try #require(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
            let resourceSpans = try #require((export["resourceSpans"] as? [[String: Any]])?.first)
            let resource = try #require(
                ((resourceSpans["resource"] as? [String: Any])?["attributes"] as? [[String: Any]])?.first
            )
            #expect(resource["key"] as? String == "service.name")
            #expect((resource["value"] as? [String: Any])?["stringValue"] as? String == "session")
            let spans = try #require(
                ((resourceSpans["scopeSpans"] as? [[String: Any]])?.first?["spans"]) as? [[String: Any]]
            )
            #expect(spans.count == 2, "\(spans)")
            let byName = Dictionary(spans.map { ($0["name"] as? String ?? "", $0) }) { first, _ in first }
            let exportedParent = try #require(byName["/v1/otp/verify"])
            let exportedChild = try #require(byName["postgresql"])
            #expect(exportedParent["traceId"] as? String == parent.context.traceContext?.traceID.hex)
            #expect(exportedChild["traceId"] as? String == exportedParent["traceId"] as? String)
            #expect(exportedChild["parentSpanId"] as? String == exportedParent["spanId"] as? String)
            #expect(exportedParent["parentSpanId"] == nil)
            #expect((exportedParent["spanId"] as? String)?.count == 16)
            #expect(exportedParent["kind"] as? Int == 2 && exportedChild["kind"] as? Int == 3)
            #expect((exportedParent["status"] as? [String: Any])?["code"] as? Int == 2)
            let start = UInt64(exportedChild["startTimeUnixNano"] as? String ?? "") ?? 0
            let end = UInt64(exportedChild["endTimeUnixNano"] as? String ?? "") ?? 0
            #expect(start > 0 && end >= start)
            let attribute = try #require((exportedChild["attributes"] as? [[String: Any]])?.first)
            #expect(attribute["key"] as? String == "db.operation.batch.size")
            #expect((attribute["value"] as? [String: Any])?["intValue"] as? String == "2")
            let event = try #require((exportedChild["events"] as? [[String: Any]])?.first)
            #expect(event["name"] as? String == "exception")
        }
    }
}

struct DictionaryExtractor: Extractor {
    func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
}

struct DictionaryInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) { carrier[key] = value }
}
