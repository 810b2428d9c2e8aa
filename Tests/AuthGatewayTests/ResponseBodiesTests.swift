import AuthProtobuf
import AuthText
import Foundation
import NIOCore
import Testing

@testable import AuthGateway

/// Every answer's body is the JSON `JSONEncoder` writes for it (the same members and values),
/// now written by `JSONStreamEncoder`, and a body that encoder does not write still goes out.
@Suite struct ResponseBodiesTests {
    static func user(photo: String = "https://cdn.example/u/1.png?a=1&b=\"2\"") -> Auth_Identity_V1_User {
        var user = Auth_Identity_V1_User()
        user.id = "0b8f2a8e-6c1d-4d7e-9a51-3b7c2f1e9d40"
        user.phone = "+919876543210"
        user.email = ""
        user.phoneVerified = true
        user.displayName = "Zoë \\ \"Z\"\n"
        user.photoURL = photo
        user.onboardingCompleted = true
        user.createdAt = 1_780_000_000
        user.hasPassword = true
        user.providers = ["phone", "google"]
        return user
    }

    static let tokens = Auth_Session_V1_TokenPair(
        accessToken: "eyJhbGciOiJFUzI1NiJ9.e30.sig",
        accessTokenExpiresIn: 900,
        refreshToken: "rt_abc/def",
        refreshTokenExpiresIn: 2_592_000,
        sessionID: "5d2c9a77-1f0e-4d0b-8f6a-0c9e7d1b2a33",
        tokenType: "Bearer"
    )

    static func sessionInfo(lastRefreshed: Int64, device: Bool) -> Auth_Session_V1_SessionInfo {
        var info = Auth_Session_V1_SessionInfo()
        info.sessionID = "5d2c9a77-1f0e-4d0b-8f6a-0c9e7d1b2a33"
        info.amr = ["otp_sms"]
        if device {
            var value = Auth_Session_V1_Device()
            value.platform = "ios"
            value.name = "Zoë's iPhone"
            info.device = value
        }
        info.clientIP = device ? "2001:db8::1" : ""
        info.createdAt = 1_780_000_000
        info.lastRefreshedAt = lastRefreshed
        info.expiresAt = 1_782_592_000
        return info
    }

    static func sameAsJSONEncoder(_ body: some Encodable, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let buffer = try JSONResponse.body(body)
        let written = try JSONValue.parse(Array(buffer.readableBytesView))
        let foundation = try JSONValue.parse(Array(JSONEncoder().encode(body)))
        #expect(written == foundation, sourceLocation: sourceLocation)
    }

    @Test func signInAndSessionBodies() throws {
        try Self.sameAsJSONEncoder(SessionBody(tokens: Self.tokens, user: Self.user(), isNewUser: true))
        try Self.sameAsJSONEncoder(
            SessionBody(tokens: Self.tokens, user: Self.user(photo: ""), isNewUser: false, verificationID: .some(nil))
        )
        try Self.sameAsJSONEncoder(
            SessionBody(tokens: Self.tokens, user: Self.user(), isNewUser: true, verificationID: "v-1")
        )
        let info = SessionInfoBody(
            id: "s",
            amr: ["pwd", "otp_email"],
            createdAt: "2026-06-01T00:00:00Z",
            expiresAt: "2026-07-01T00:00:00Z"
        )
        try Self.sameAsJSONEncoder(CurrentSessionBody(user: UserBody(Self.user()), session: info))
        try Self.sameAsJSONEncoder(
            SessionListBody(sessions: [
                SessionItemBody(Self.sessionInfo(lastRefreshed: 0, device: false), currentSessionID: "other"),
                SessionItemBody(
                    Self.sessionInfo(lastRefreshed: 1_780_000_100, device: true),
                    currentSessionID: "5d2c9a77-1f0e-4d0b-8f6a-0c9e7d1b2a33"
                ),
            ])
        )
        try Self.sameAsJSONEncoder(SessionListBody(sessions: []))
    }

    @Test func otherBodies() throws {
        try Self.sameAsJSONEncoder(
            VerificationBody(
                verificationID: "v",
                channel: "sms",
                destination: "+91 ••••• ••210",
                expiresIn: 300,
                resendAfter: 30,
                attemptsRemaining: 5
            )
        )
        try Self.sameAsJSONEncoder(PasswordResetStartedBody(verificationID: "v"))
        try Self.sameAsJSONEncoder(HealthReport(status: "ok", services: ["identity": "ok", "session": "unavailable"]))
        try Self.sameAsJSONEncoder(
            CodeStatusBody(
                status: "sent",
                channel: "email",
                destination: "z•••@example.com",
                expiresIn: 1,
                resendAfter: 0,
                resendsRemaining: 2
            )
        )
        var identity = Auth_Identity_V1_SignInIdentity()
        identity.provider = "google"
        identity.id = "1234"
        identity.createdAt = 1_780_000_000
        try Self.sameAsJSONEncoder(IdentityListBody(identities: [IdentityBody(identity)]))
        try Self.sameAsJSONEncoder(AuthorizationURLBody(url: "https://accounts.example/o?x=1&y=a/b"))
        try Self.sameAsJSONEncoder(
            SupabaseSessionBody(
                tokens: Self.tokens,
                user: SupabaseUserBody(user: Self.user(), identities: [identity]),
                now: Date(timeIntervalSince1970: 1_780_000_000)
            )
        )
        try Self.sameAsJSONEncoder(
            SupabaseSettingsBody(
                external: ["google": true, "apple": false],
                disableSignup: false,
                mailerAutoconfirm: false,
                phoneAutoconfirm: false,
                smsProvider: "webhook",
                samlEnabled: false
            )
        )
    }

    @Test func errorBodies() throws {
        try Self.sameAsJSONEncoder(ErrorBody(.invalidToken))
        try Self.sameAsJSONEncoder(ErrorBody(.internalError))
        try Self.sameAsJSONEncoder(ErrorBody(APIError.invalidRequest("`phone` is required.")))
    }

    /// A body whose `encode(to:)` takes a nested container: `JSONEncoder` writes it.
    struct Nested: Encodable {
        enum Keys: String, CodingKey { case outer, inner }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            var nested = container.nestedContainer(keyedBy: Keys.self, forKey: .outer)
            try nested.encode("x", forKey: .inner)
        }
    }

    @Test func aBodyTheStreamEncoderRefusesGoesOutThroughJSONEncoder() throws {
        #expect(throws: JSONStreamEncoder.Unsupported.self) { try JSONStreamEncoder.encode(Nested()) }
        let buffer = try JSONResponse.body(Nested())
        #expect(String(buffer: buffer) == #"{"outer":{"inner":"x"}}"#)
    }
}
