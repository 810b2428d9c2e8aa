// Tests of the generated kitchen-sink code; run by scripts/codegen/selftest.sh.
import AuthAPI
import AuthProtobuf
import AuthRPC
import Testing

private func roundTrip<M: ProtobufCMessage>(_ message: M) throws -> M {
    try M(serializedBytes: message.serializedBytes())
}

private struct SinkService: Ks_V1_Sink.ServiceProtocol {
    let allowedCallers = Ks_V1_Sink.AllowedCallersByMethod(
        put: .only(["gateway"]),
        getHTTPThing: .anyAuthenticated,
        import: .only(["authctl", "gateway"])
    )

    func put(request: Ks_V1_KitchenSink, context: ServerContext) async throws -> Ks_V1_Empty { .init() }
    func getHTTPThing(request: Ks_V1_Empty, context: ServerContext) async throws -> Ks_V1_KitchenSink { .init() }
    func `import`(request: Ks_V1_Leaf, context: ServerContext) async throws -> Ks_V1_Leaf { request }
}

@Test func everyFieldKind() throws {
    var sink = Ks_V1_KitchenSink(
        d: -1.5,
        f: 2.25,
        i64: .min,
        u64: .max,
        i32: .min,
        f64: .max,
        f32: .max,
        flag: true,
        class: "cls",
        in: [0, 1, 0],
        u32: .max,
        color: .unrecognized(-9),
        sf32: -7,
        sf64: .min,
        s32: .min,
        s64: .max,
        leaf: .init(name: "leaf"),
        rD: [0, -0.5, .infinity],
        rF: [1, 2],
        rI64: [.min, 0, .max],
        rU64: [0, .max],
        rI32: [-1, 1],
        rF64: [1, 2],
        rF32: [3],
        rFlag: [true, false, true],
        rString: ["", "a", "ü"],
        rBytes: [[], [0], [1, 2]],
        rU32: [.max],
        rColor: [.red, .unspecified, .unrecognized(77), .httpURLID],
        rSf32: [-1],
        rSf64: [-2],
        rS32: [.min, .max],
        rS64: [.min, .max],
        rLeaf: [.init(), .init(name: "x")],
        choice: .oInt(0),
        secondChoice: .jwksURL(""),
        default: "dflt",
        endUserIP: 5
    )
    #expect(try roundTrip(sink) == sink)

    let choices: [Ks_V1_KitchenSink.Choice] = [
        .oInt(0), .oInt(-3), .oString(""), .oString("s"), .oBytes([]), .oBytes([0]), .oColor(.unspecified),
        .oColor(.unrecognized(-1)), .oLeaf(.init()), .oBool(false), .oBool(true), .oDouble(0),
    ]
    for choice in choices {
        sink.choice = choice
        #expect(try roundTrip(sink).choice == choice)
    }
    sink.secondChoice = .userID(0)
    #expect(try roundTrip(sink).secondChoice == .userID(0))
    sink.secondChoice = nil
    #expect(try roundTrip(sink).secondChoice == nil)

    // A set oneof member is sent even at its zero value: field 40 VARINT 0.
    #expect(try Ks_V1_KitchenSink(choice: .oInt(0)).serializedBytes() == [0xC0, 0x02, 0x00])
    // proto3 packs repeated scalars: field 28 LEN 2, then 01 00.
    #expect(try Ks_V1_KitchenSink(rFlag: [true, false]).serializedBytes() == [0xE2, 0x01, 0x02, 0x01, 0x00])
    #expect(throws: ProtobufCError.self) { try Ks_V1_KitchenSink(rString: ["ok", "a\0"]).serializedBytes() }
    #expect(try roundTrip(Ks_V1_Empty()) == Ks_V1_Empty())
    #expect(try Ks_V1_Empty().serializedBytes() == [])
}

@Test func enumNames() {
    #expect(Ks_V1_Color.allKnownCases == [.unspecified, .red, .color2D, .default, .httpURLID])
    #expect(Ks_V1_Color(rawValue: -4) == .httpURLID)
}

@Test func keywordNames() throws {
    var sink = Ks_V1_KitchenSink()
    sink.var = "v"
    sink.inout = true
    sink.let = ["l"]
    sink.switch = .for("f")
    #expect(try roundTrip(sink) == sink)
    sink.switch = .selfValue(3)
    #expect(try roundTrip(sink).switch == .selfValue(3))
}

/// Every field kind through DynamicMessage (protobuf-c via the descriptors) and its JSON form:
/// the generated type reads back what it wrote.
@Test func everyFieldKindThroughDynamicMessageAndJSON() throws {
    let sink = Ks_V1_KitchenSink(
        d: -1.5,
        f: 2.25,
        i64: .min,
        u64: .max,
        i32: .min,
        f64: .max,
        f32: .max,
        flag: true,
        class: "cls \"q\" \u{1}",
        in: [0, 1, 0],
        u32: .max,
        color: .unrecognized(-9),
        sf32: -7,
        sf64: .min,
        s32: .min,
        s64: .max,
        leaf: .init(name: "leaf"),
        rD: [0, -0.5, .infinity, -.infinity],
        rF: [1, 2],
        rI64: [.min, 0, .max],
        rU64: [0, .max],
        rI32: [-1, 1],
        rF64: [1, 2],
        rF32: [3],
        rFlag: [true, false, true],
        rString: ["", "a", "ü"],
        rBytes: [[], [0], [1, 2, 255]],
        rU32: [.max],
        rColor: [.red, .unspecified, .unrecognized(77), .httpURLID],
        rSf32: [-1],
        rSf64: [-2],
        rS32: [.min, .max],
        rS64: [.min, .max],
        rLeaf: [.init(), .init(name: "x")],
        choice: .oInt(0),
        secondChoice: .jwksURL(""),
        default: "dflt",
        endUserIP: 5
    )
    let dynamic = try DynamicMessage(serializedBytes: sink.serializedBytes(), type: "ks.v1.KitchenSink")
    for pretty in [true, false] {
        let json = dynamic.jsonString(pretty: pretty)
        let parsed = try DynamicMessage(json: json, type: "ks.v1.KitchenSink")
        #expect(try Ks_V1_KitchenSink(serializedBytes: parsed.serializedBytes()) == sink, "\(json)")
    }
    #expect(ProtobufSchema.shared.services.map(\.fullName) == ["ks.v1.Sink"])
}

@Test func serviceStubs() async throws {
    var router = RPCRouter()
    SinkService().registerMethods(with: &router)
    #expect(router.count == 3)
    #expect(router.allowed == [.only(["gateway"]), .anyAuthenticated, .only(["authctl", "gateway"])])
    #expect(Ks_V1_Sink.Method.all.count == 3)
    #expect(Ks_V1_Sink.serviceName == "ks.v1.Sink")
    let client = Ks_V1_Sink.Client(wrapping: RPCClient())
    let leaf = try await client.import(.init(name: "n"))
    #expect(leaf.name == "n")
}
