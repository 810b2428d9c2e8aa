import Tracing

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// OTLP's JSON encoding of an `ExportTraceServiceRequest` (opentelemetry-proto's
/// `trace_service.proto`, with the JSON mapping of the OTLP specification: ids as lower-case
/// hex, 64-bit integers as strings, enums as numbers, field names in lowerCamelCase).
enum OTLPJSON {
    static func exportRequest(
        _ spans: [FinishedSpan],
        resource: [(String, String)],
        scope: String
    ) throws -> [UInt8] {
        let request = ExportRequest(
            resourceSpans: [
                ResourceSpans(
                    resource: Resource(attributes: resource.map { KeyValue(key: $0.0, value: .string($0.1)) }),
                    scopeSpans: [ScopeSpans(scope: Scope(name: scope), spans: spans.map(SpanJSON.init))]
                )
            ]
        )
        return Array(try JSONEncoder().encode(request))
    }

    struct ExportRequest: Encodable {
        var resourceSpans: [ResourceSpans]
    }

    struct ResourceSpans: Encodable {
        var resource: Resource
        var scopeSpans: [ScopeSpans]
    }

    struct Resource: Encodable {
        var attributes: [KeyValue]
    }

    struct ScopeSpans: Encodable {
        var scope: Scope
        var spans: [SpanJSON]
    }

    struct Scope: Encodable {
        var name: String
    }

    struct SpanJSON: Encodable {
        var traceId: String
        var spanId: String
        var parentSpanId: String?
        var traceState: String?
        var name: String
        var kind: Int
        var startTimeUnixNano: String
        var endTimeUnixNano: String
        var attributes: [KeyValue]
        var events: [Event]
        var status: Status?

        init(_ span: FinishedSpan) {
            traceId = span.trace.traceID.hex
            spanId = W3CTraceContext.hex(span.trace.spanID)
            parentSpanId = span.parentSpanID.map(W3CTraceContext.hex)
            traceState = span.trace.traceState.isEmpty ? nil : span.trace.traceState
            name = span.name
            kind = Self.kind(span.kind)
            startTimeUnixNano = String(span.startNanoseconds)
            endTimeUnixNano = String(span.endNanoseconds)
            attributes = KeyValue.list(span.attributes)
            events = span.events.map {
                Event(
                    name: $0.name,
                    timeUnixNano: String($0.nanosecondsSinceEpoch),
                    attributes: KeyValue.list($0.attributes)
                )
            }
            status = span.status.map {
                // STATUS_CODE_OK 1, STATUS_CODE_ERROR 2.
                Status(code: $0.code == .ok ? 1 : 2, message: $0.message)
            }
        }

        /// `SpanKind`: internal 1, server 2, client 3, producer 4, consumer 5.
        static func kind(_ kind: SpanKind) -> Int {
            switch kind {
            case .internal: 1
            case .server: 2
            case .client: 3
            case .producer: 4
            case .consumer: 5
            }
        }
    }

    struct Event: Encodable {
        var name: String
        var timeUnixNano: String
        var attributes: [KeyValue]
    }

    struct Status: Encodable {
        var code: Int
        var message: String?
    }

    struct KeyValue: Encodable {
        var key: String
        var value: AnyValue

        static func list(_ attributes: SpanAttributes) -> [KeyValue] {
            var list: [KeyValue] = []
            attributes.forEach { key, attribute in
                if let value = AnyValue(attribute) { list.append(KeyValue(key: key, value: value)) }
            }
            return list.sorted { $0.key < $1.key }
        }
    }

    /// `AnyValue`: one of its members.
    indirect enum AnyValue: Encodable {
        case string(String)
        case int(Int64)
        case double(Double)
        case bool(Bool)
        case array([AnyValue])

        init?(_ attribute: SpanAttribute) {
            switch attribute {
            case .int32(let value): self = .int(Int64(value))
            case .int64(let value): self = .int(value)
            case .double(let value): self = .double(value)
            case .bool(let value): self = .bool(value)
            case .string(let value): self = .string(value)
            case .stringConvertible(let value): self = .string(value.description)
            case .int32Array(let values): self = .array(values.map { .int(Int64($0)) })
            case .int64Array(let values): self = .array(values.map { .int($0) })
            case .doubleArray(let values): self = .array(values.map { .double($0) })
            case .boolArray(let values): self = .array(values.map { .bool($0) })
            case .stringArray(let values): self = .array(values.map { .string($0) })
            case .stringConvertibleArray(let values): self = .array(values.map { .string($0.description) })
            default: return nil
            }
        }

        private enum Keys: String, CodingKey {
            case stringValue, intValue, doubleValue, boolValue, arrayValue
        }

        private struct ArrayValue: Encodable {
            var values: [AnyValue]
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            switch self {
            case .string(let value): try container.encode(value, forKey: .stringValue)
            // int64 as a string, as the JSON mapping has it.
            case .int(let value): try container.encode(String(value), forKey: .intValue)
            case .double(let value): try container.encode(value, forKey: .doubleValue)
            case .bool(let value): try container.encode(value, forKey: .boolValue)
            case .array(let values): try container.encode(ArrayValue(values: values), forKey: .arrayValue)
            }
        }
    }
}
