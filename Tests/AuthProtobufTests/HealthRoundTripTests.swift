import AuthProtobuf
import Testing

@Suite("auth.health.v1 round trips")
struct HealthRoundTripTests {
    @Test("every ServingStatus", arguments: Auth_Health_V1_ServingStatus.allKnownCases)
    func servingStatus(_ status: Auth_Health_V1_ServingStatus) throws {
        let response = Auth_Health_V1_HealthCheckResponse(status: status)
        #expect(try roundTrip(response).status == status)
    }

    @Test("ServingStatus cases and numbers")
    func servingStatusNames() {
        let expected: [Auth_Health_V1_ServingStatus] = [.unknown, .serving, .notServing, .serviceUnknown]
        #expect(Auth_Health_V1_ServingStatus.allKnownCases == expected)
        #expect(expected.map(\.rawValue) == [0, 1, 2, 3])
        #expect(Auth_Health_V1_HealthCheckResponse().status == .unknown)
    }

    @Test("HealthCheckRequest", arguments: ["", "auth.session.v1.Session"])
    func request(_ service: String) throws {
        let request = Auth_Health_V1_HealthCheckRequest(service: service)
        #expect(try roundTrip(request) == request)
    }
}
