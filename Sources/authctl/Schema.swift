import ArgumentParser
import AuthAPI
import AuthConfiguration
import AuthProtobuf
import AuthRPC
import AuthRPCNIO

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// `list`, `describe` and `call`: any method of any service, from the protobuf-c descriptors of
// proto/ (AuthProtobuf's ProtobufSchema and DynamicMessage), with no code per method.

extension AuthCtl {
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Lists the services a server serves and their methods with request and response types.",
            discussion: """
                Asks the server's Health/Check about every service of proto/ and lists those it \
                answers SERVING for (Health itself always).
                """
        )

        @Argument(help: "The server's address, host:port.")
        var address: String

        @OptionGroup var connection: ConnectionOptions

        func run() async throws {
            let (client, transport) = try connection.makeClient(target: address)
            let health = Auth_Health_V1_Health.Client(wrapping: client)
            var served: [ProtobufServiceSchema] = []
            var failure: (any Error)?
            for service in ProtobufSchema.shared.services {
                if service.fullName == Auth_Health_V1_Health.serviceName {
                    served.append(service)
                    continue
                }
                do {
                    let answer = try await health.check(Auth_Health_V1_HealthCheckRequest(service: service.fullName))
                    if answer.status == .serving || answer.status == .notServing { served.append(service) }
                } catch {
                    failure = error
                    break
                }
            }
            await transport.shutdown()
            if let failure { fail(failure) }
            for service in served {
                print(service.fullName)
                for method in service.methods {
                    print("  \(method.name)(\(method.inputType)) returns (\(method.outputType))")
                }
            }
        }
    }

    struct Describe: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Describes a message's fields, an enum's values, or a service's or method's types.",
            discussion: """
                NAME is a full name from proto/: a message (auth.session.v1.IssueRequest), an enum \
                (auth.rpc.v1.StatusCode), a service (auth.session.v1.Session) or a method \
                (auth.session.v1.Session/Issue). Needs no server.
                """
        )

        @Argument(help: "A message, enum, service or method name.")
        var name: String

        func run() throws {
            let schema = ProtobufSchema.shared
            if let message = schema.message(name) {
                print("message \(message.fullName) {")
                for field in message.fields {
                    let label =
                        field.isRepeated ? "repeated " : (field.hasPresence && !field.isOneofMember ? "optional " : "")
                    let oneof = field.isOneofMember ? "  // oneof member" : ""
                    print(
                        "  \(label)\(field.kind.protoName) \(field.name) = \(field.number);  // JSON: \(field.jsonName)\(oneof)"
                    )
                }
                print("}")
            } else if let enumeration = schema.enums[name] {
                print("enum \(enumeration.fullName) {")
                for value in enumeration.values { print("  \(value.name) = \(value.number);") }
                print("}")
            } else if let service = schema.service(name) {
                print("service \(service.fullName) {")
                for method in service.methods {
                    print("  rpc \(method.name)(\(method.inputType)) returns (\(method.outputType));")
                }
                print("}")
            } else if let method = schema.method(name) {
                print("rpc \(method.path)(\(method.inputType)) returns (\(method.outputType));")
            } else {
                StandardStreams.writeError("authctl: no message, enum, service or method called '\(name)' in proto/\n")
                throw ExitCode(2)
            }
        }
    }

    struct Call: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Calls one method with a JSON request and prints the status and the response as JSON.",
            discussion: """
                JSON follows proto3's JSON mapping with the .proto field names (user_id; userId is \
                accepted too); 64-bit integers print as strings, bytes as base64, enums by name. \
                Exit status: 0 when the call succeeds, 1 when the service answers with an error \
                status (printed as JSON), 2 when the request is not valid or the call cannot be made.
                """
        )

        @Argument(help: "The server's address, host:port.")
        var address: String

        @Argument(
            help:
                "The method: /auth.session.v1.Session/Issue, auth.session.v1.Session/Issue or auth.session.v1.Session.Issue."
        )
        var method: String

        @Argument(help: "The request as JSON; '-' reads it from standard input.")
        var json = "{}"

        @OptionGroup var connection: ConnectionOptions

        func run() async throws {
            guard let method = ProtobufSchema.shared.method(method) else {
                fail("no method '\(self.method)' in proto/ (see authctl list ADDRESS)")
            }
            let text = json == "-" ? String(decoding: try StandardStreams.readInput(), as: UTF8.self) : json
            let request: DynamicMessage
            do {
                request = try DynamicMessage(json: text, type: method.inputType)
            } catch {
                fail(error)
            }
            let payload: [UInt8]
            do {
                payload = try request.serializedBytes()
            } catch {
                fail(error)
            }
            let (client, transport) = try connection.makeClient(target: address)
            let outcome: Result<[UInt8], any Error>
            do {
                outcome = .success(
                    try await client.unary(
                        MethodDescriptor(service: method.service, method: method.name),
                        payload: payload
                    )
                )
            } catch {
                outcome = .failure(error)
            }
            await transport.shutdown()
            switch outcome {
            case .success(let bytes):
                let response: DynamicMessage
                do {
                    response = try DynamicMessage(serializedBytes: bytes, type: method.outputType)
                } catch {
                    fail("the response is not a valid \(method.outputType): \(error)")
                }
                print(CallOutput.json(status: Auth_Rpc_V1_Status(), response: response))
            case .failure(let error as RPCError):
                print(CallOutput.json(status: error.status, response: nil))
                throw ExitCode(1)
            case .failure(let error):
                fail(error)
            }
        }
    }
}

/// What `call` prints: `{"status": {...}, "response": {...}}`.
enum CallOutput {
    static func json(status: Auth_Rpc_V1_Status, response: DynamicMessage?) -> String {
        var status = status
        if status.code == .ok { status = Auth_Rpc_V1_Status() }
        // The status goes through the same JSON mapping as any message; an OK status shows its code.
        var statusJSON =
            (try? DynamicMessage(serializedBytes: status.serializedBytes(), type: Auth_Rpc_V1_Status.protoMessageName))?
            .jsonString() ?? "{}"
        if status.code == .ok { statusJSON = #"{"code": "OK"}"# }
        var output = "{\n  \"status\": " + statusJSON.replacing("\n", with: "\n  ")
        if let response {
            output += ",\n  \"response\": " + response.jsonString().replacing("\n", with: "\n  ")
        }
        return output + "\n}"
    }
}

/// Prints `authctl: <what>` to standard error and exits with status 2.
func fail(_ what: Any) -> Never {
    StandardStreams.exitWithUsageError("authctl", "\(what)")
}
