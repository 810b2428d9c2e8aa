import AuthProtobuf
import Foundation
import Testing

@Suite struct ProtobufSchemaTests {
    let schema = ProtobufSchema.shared

    @Test func listsEveryServiceWithItsMethods() throws {
        let names = schema.services.map(\.fullName)
        #expect(names.contains("auth.health.v1.Health"))
        #expect(names.contains("auth.session.v1.Session"))
        let check = try #require(schema.service("auth.health.v1.Health")?.methods.first)
        #expect(check.path == "/auth.health.v1.Health/Check")
        #expect(check.inputType == "auth.health.v1.HealthCheckRequest")
        #expect(check.outputType == "auth.health.v1.HealthCheckResponse")
    }

    @Test func findsMethodsByPathOrDottedName() {
        for name in [
            "/auth.session.v1.Session/Issue", "auth.session.v1.Session/Issue", "auth.session.v1.Session.Issue",
        ] {
            #expect(schema.method(name)?.path == "/auth.session.v1.Session/Issue", "\(name)")
        }
        #expect(schema.method("auth.session.v1.Session/Nope") == nil)
        #expect(schema.method("Issue") == nil)
    }

    @Test func describesFieldsKindsAndEnums() throws {
        let request = try #require(schema.message("auth.session.v1.IssueRequest"))
        let amr = try #require(request.field(named: "amr"))
        #expect(amr.isRepeated && amr.kind == .string)
        let device = try #require(request.field(named: "device"))
        #expect(device.kind == .message("auth.session.v1.Device") && device.hasPresence)
        #expect(request.field(named: "clientIp")?.name == "client_ip")  // the JSON name works too
        let status = try #require(schema.message("auth.rpc.v1.Status")?.field(named: "code"))
        guard case .enumeration(let enumName) = status.kind else {
            Issue.record("Status.code is \(status.kind)")
            return
        }
        #expect(schema.enums[enumName]?.number(of: "NOT_FOUND") == 5)
        // The envelope's oneof members are marked.
        let frame = try #require(schema.message("auth.rpc.v1.Frame"))
        #expect(frame.fields.filter(\.isOneofMember).count >= 5)
    }
}

@Suite struct DynamicMessageTests {
    @Test func matchesTheGeneratedTypesBothWays() throws {
        let typed = Auth_Session_V1_IssueRequest(
            userID: "u-1",
            amr: ["otp_sms", "pwd"],
            device: Auth_Session_V1_Device(platform: "ios", name: "Ana's \"iPhone\"", userAgent: "App/1.0"),
            clientIP: "203.0.113.7"
        )
        let dynamic = try DynamicMessage(
            serializedBytes: try typed.serializedBytes(),
            type: "auth.session.v1.IssueRequest"
        )
        #expect(dynamic.fields["user_id"] == .string("u-1"))
        #expect(dynamic.fields["amr"] == .list([.string("otp_sms"), .string("pwd")]))
        let json = dynamic.jsonString(pretty: false)
        #expect(json.contains(#""device":{"platform":"ios","name":"Ana's \"iPhone\"","#))
        let parsed = try DynamicMessage(json: json, type: "auth.session.v1.IssueRequest")
        #expect(try Auth_Session_V1_IssueRequest(serializedBytes: parsed.serializedBytes()) == typed)
    }

    @Test func writesProto3JSON() throws {
        let status = Auth_Rpc_V1_Status(code: .notFound, message: "gone", reason: "verification_not_found")
        let dynamic = try DynamicMessage(serializedBytes: try status.serializedBytes(), type: "auth.rpc.v1.Status")
        let json = dynamic.jsonString(pretty: false)
        #expect(json.hasPrefix(#"{"code":"NOT_FOUND","message":"gone","reason":"verification_not_found""#))
        // 64-bit integers are strings; bytes are base64.
        let ping = try DynamicMessage(json: #"{"payload": 18446744073709551615}"#, type: "auth.rpc.v1.Ping")
        #expect(ping.jsonString(pretty: false) == #"{"payload":"18446744073709551615"}"#)
        let hello = try DynamicMessage(json: #"{"nonce": "AAEC/w=="}"#, type: "auth.rpc.v1.Hello")
        #expect(hello.fields["nonce"] == .bytes([0, 1, 2, 255]))
    }

    @Test func acceptsJSONNamesNumbersForEnumsAndQuotedIntegers() throws {
        let request = try DynamicMessage(
            json: #"{"userId": "u", "clientIp": "::1"}"#,
            type: "auth.session.v1.IssueRequest"
        )
        #expect(request.fields["user_id"] == .string("u") && request.fields["client_ip"] == .string("::1"))
        let status = try DynamicMessage(json: #"{"code": 5}"#, type: "auth.rpc.v1.Status")
        #expect(status.fields["code"] == .enumeration(5))
        let ping = try DynamicMessage(json: #"{"payload": "42"}"#, type: "auth.rpc.v1.Ping")
        #expect(ping.fields["payload"] == .uint(42))
    }

    @Test(arguments: [
        (#"{"user_id": 5}"#, "user_id", "expected a string"),
        (#"{"nope": 1}"#, "nope", "unknown field"),
        (#"{"amr": "pwd"}"#, "amr", "expected an array"),
        (#"{"amr": ["pwd", 7]}"#, "amr[1]", "expected a string"),
        (#"{"device": {"platform": true}}"#, "device.platform", "expected a string"),
        (#"{"device": {"os": "ios"}}"#, "device.os", "unknown field"),
        (#"{"device": []}"#, "device", "expected an object"),
        (#"{"user_id": "a", "userId": "b"}"#, "user_id", "given twice"),
    ])
    func refusesBadJSONNamingTheField(json: String, path: String, problem: String) throws {
        let error = #expect(throws: ProtobufCError.self) {
            try DynamicMessage(json: json, type: "auth.session.v1.IssueRequest")
        }
        #expect(error?.code == .invalidJSON)
        #expect(error?.fieldName == path)
        #expect(error?.detail?.contains(problem) == true, "\(String(describing: error))")
    }

    @Test func refusesValuesOutOfRangeAndNotJSON() {
        let cases: [(String, String, String)] = [
            (#"{"code": "NOPE"}"#, "auth.rpc.v1.Status", "unknown value"),
            (#"{"payload": -1}"#, "auth.rpc.v1.Ping", "not a uint64"),
            (#"{"payload": 1.5}"#, "auth.rpc.v1.Ping", "whole number"),
            (#"{"nonce": "AA=!"}"#, "auth.rpc.v1.Hello", "not base64"),
            (#"{"user_id": "u""#, "auth.session.v1.IssueRequest", "not valid JSON"),
            (#"[]"#, "auth.session.v1.IssueRequest", "expected an object"),
        ]
        for (json, type, problem) in cases {
            let error = #expect(throws: ProtobufCError.self, "\(json)") { try DynamicMessage(json: json, type: type) }
            #expect(error?.detail?.contains(problem) == true, "\(json): \(String(describing: error))")
        }
        let unknown = #expect(throws: ProtobufCError.self) { try DynamicMessage(json: "{}", type: "auth.nope.v1.Nope") }
        #expect(unknown?.code == .unknownMessage)
    }

    @Test func refusesANULInAString() {
        let message = DynamicMessage(
            schema: ProtobufSchema.shared.message("auth.session.v1.IssueRequest")!,
            fields: ["user_id": .string("a\u{0}b")]
        )
        let error = #expect(throws: ProtobufCError.self) { try message.serializedBytes() }
        #expect(error?.code == .embeddedNUL && error?.fieldName == "user_id")
    }

    /// Every message of `proto/`: random valid messages → protobuf → JSON → protobuf gives the
    /// same bytes, and the same message.
    @Test func everyMessageSurvivesTheJSONRoundTrip() throws {
        let seed = UInt64.random(in: 0...UInt64.max)
        var random = SplitMix64(seed: seed)
        let schema = ProtobufSchema.shared
        #expect(schema.messages.count >= 20)
        for message in schema.messages.values.sorted(by: { $0.fullName < $1.fullName }) {
            for _ in 0..<40 {
                let original = RandomMessage.make(message, random: &random, depth: 0)
                let bytes = try original.serializedBytes()
                let decoded = try DynamicMessage(serializedBytes: bytes, type: message.fullName)
                for pretty in [true, false] {
                    let json = decoded.jsonString(pretty: pretty)
                    let parsed = try DynamicMessage(json: json, type: message.fullName)
                    #expect(try parsed.serializedBytes() == bytes, "\(message.fullName), seed \(seed): \(json)")
                    #expect(
                        try DynamicMessage(serializedBytes: try parsed.serializedBytes(), type: message.fullName)
                            == decoded
                    )
                }
            }
        }
    }
}

/// Random valid values for any message of the schema.
enum RandomMessage {
    static func make(_ schema: ProtobufMessageSchema, random: inout SplitMix64, depth: Int) -> DynamicMessage {
        var fields: [String: DynamicMessage.Value] = [:]
        var oneofChosen = Set<String>()
        // One member at most per oneof: pick one member of the envelope's oneof, or none.
        let oneofMembers = schema.fields.filter(\.isOneofMember)
        if !oneofMembers.isEmpty, random.next() % 4 != 0 {
            oneofChosen.insert(oneofMembers[Int(random.next() % UInt64(oneofMembers.count))].name)
        }
        for field in schema.fields {
            if field.isOneofMember && !oneofChosen.contains(field.name) { continue }
            if case .message = field.kind, depth >= 4 { continue }
            if field.isRepeated {
                let count = Int(random.next() % 4)
                fields[field.name] = .list((0..<count).map { _ in value(field.kind, random: &random, depth: depth) })
            } else if field.hasPresence && !field.isOneofMember && random.next() % 3 == 0 {
                continue
            } else {
                fields[field.name] = value(field.kind, random: &random, depth: depth)
            }
        }
        return DynamicMessage(schema: schema, fields: fields)
    }

    static func value(_ kind: ProtobufFieldSchema.Kind, random: inout SplitMix64, depth: Int) -> DynamicMessage.Value {
        let bits = random.next()
        let small = random.next() % 2 == 0  // zero and small values are as interesting as big ones
        switch kind {
        case .int32, .sint32, .sfixed32:
            return .int(Int64(small ? Int32(truncatingIfNeeded: bits % 3) : Int32(truncatingIfNeeded: bits)))
        case .int64, .sint64, .sfixed64: return .int(small ? Int64(bits % 3) - 1 : Int64(bitPattern: bits))
        case .uint32, .fixed32: return .uint(UInt64(small ? UInt32(bits % 3) : UInt32(truncatingIfNeeded: bits)))
        case .uint64, .fixed64: return .uint(small ? bits % 3 : bits)
        case .float: return .float(Float(Int32(truncatingIfNeeded: bits)) / 7)
        case .double: return .double(Double(Int64(bitPattern: bits)) / 3)
        case .bool: return .bool(bits % 2 == 0)
        case .string:
            let alphabet: [Unicode.Scalar] = [
                "a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{1}", "\u{1F}", "é", "€", "😀", "\u{2028}", "_",
            ]
            let length = Int(bits % 12)
            var text = ""
            for _ in 0..<length { text.unicodeScalars.append(alphabet[Int(random.next() % UInt64(alphabet.count))]) }
            return .string(text)
        case .bytes:
            return .bytes((0..<Int(bits % 40)).map { _ in UInt8(truncatingIfNeeded: random.next()) })
        case .enumeration(let name):
            let values = ProtobufSchema.shared.enums[name]!.values
            return .enumeration(values[Int(bits % UInt64(values.count))].number)
        case .message(let name):
            return .message(make(ProtobufSchema.shared.message(name)!, random: &random, depth: depth + 1))
        }
    }
}
