import AuthProtobuf
import Testing

@testable import AuthGateway

@Suite struct RequestReadingTests {
    @Test(arguments: [
        ("application/json", true), ("application/json; charset=utf-8", true), ("Application/JSON", true),
        (" application/json ;charset=UTF-8", true), ("text/plain", false), ("application/jsonx", false),
        ("application/x-www-form-urlencoded", false), ("", false),
    ])
    func contentTypes(value: String, accepted: Bool) {
        #expect(JSONRequest.isJSON(value) == accepted)
    }

    @Test func membersAreReadWithTheirTypes() throws {
        let body = JSONRequest(members: [
            "phone": .string("+15555550100"), "flag": .bool(true), "number": .integer("1"), "nothing": .null,
            "purpose": .string("signup"),
        ])
        #expect(try body.string("phone") == "+15555550100")
        #expect(try body.string("absent") == nil)
        #expect(try body.bool("flag") == true)
        #expect(throws: APIError.self) { try body.bool("number") }
        #expect(throws: APIError.self) { try body.string("flag") }
        #expect(throws: APIError.self) { try body.requiredString("absent") }
        // protobuf-c cannot carry U+0000 in a string: refused here, not a 500 later.
        let nul = JSONRequest(members: ["name": .string("a\u{0}b")])
        #expect(throws: APIError.invalidRequest("`name` must not contain NUL (U+0000).")) { try nul.string("name") }
        #expect(throws: APIError.self) { try nul.nullableString("name") }
        #expect(try body.nullableString("nothing") == .some(nil))
        #expect(try body.nullableString("absent") == nil)
        #expect(try body.choice("purpose", default: GatewayRoutes.Purpose.auto) == .signup)
        #expect(try body.choice("absent", default: GatewayRoutes.Purpose.auto) == .auto)
        let unknown = JSONRequest(members: ["purpose": .string("LOGIN")])
        #expect(throws: APIError.invalidRequest("`purpose` must be one of login, signup, auto.")) {
            try unknown.choice("purpose", default: GatewayRoutes.Purpose.auto)
        }
    }

    @Test(arguments: [
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true),
        ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", false),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false),
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false),
        ("00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", false),
        ("00-4bf92f3577b34da6a3ce929d0e0e47zz-00f067aa0ba902b7-01", false),
        // Upper-case hex is not well-formed (§3.2.2.3), nor is a version-00 header with more
        // fields, nor a future version (the gateway passes on version 00 only).
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-00", false),
        ("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false),
        // Digits outside ASCII (Character.isHexDigit once took the full-width ones).
        ("00-４bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", false),
    ])
    func traceparents(value: String, valid: Bool) {
        #expect(RequestIdentityMiddleware.isValidTraceparent(value) == valid)
        let used = RequestIdentityMiddleware.traceparent(value)
        #expect(RequestIdentityMiddleware.isValidTraceparent(used))
        #expect((used == value) == valid)
    }

    @Test func codes() {
        #expect(GatewayRoutes.isSixDigitCode("012345"))
        #expect(!GatewayRoutes.isSixDigitCode("12345"))
        #expect(!GatewayRoutes.isSixDigitCode("１２３４５６"))
    }
}
