import AuthAPI
import AuthProtobuf
import AuthText
import HTTPTypes
import Hummingbird

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The JSON bodies of docs/gateway.md and openapi.yaml. Every member of `user` and of a session
// item is always present: an unknown value is written as `null`, never left out, so each of
// these encodes its optionals with `encode` (which writes null), not `encodeIfPresent`.

/// `user`
struct UserBody: Encodable, Sendable {
    var id: String
    var phone: String?
    var email: String?
    var name: String?
    var photoURL: String?
    var onboardingCompleted: Bool
    var emailVerified: Bool
    var phoneVerified: Bool
    var createdAt: String

    init(_ user: Auth_Identity_V1_User) {
        id = user.id
        phone = user.phone.nonEmpty
        email = user.email.nonEmpty
        name = user.displayName.nonEmpty
        photoURL = user.photoURL.nonEmpty
        onboardingCompleted = user.onboardingCompleted
        emailVerified = user.emailVerified
        phoneVerified = user.phoneVerified
        createdAt = Timestamp.rfc3339(user.createdAt)
    }

    enum CodingKeys: String, CodingKey {
        case id, phone, email, name
        case photoURL = "photo_url"
        case onboardingCompleted = "onboarding_completed"
        case emailVerified = "email_verified"
        case phoneVerified = "phone_verified"
        case createdAt = "created_at"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(phone, forKey: .phone)
        try container.encode(email, forKey: .email)
        try container.encode(name, forKey: .name)
        try container.encode(photoURL, forKey: .photoURL)
        try container.encode(onboardingCompleted, forKey: .onboardingCompleted)
        try container.encode(emailVerified, forKey: .emailVerified)
        try container.encode(phoneVerified, forKey: .phoneVerified)
        try container.encode(createdAt, forKey: .createdAt)
    }
}

/// The session body: tokens, the user, whether the user is new. `/v1/signup` adds
/// `verification_id` (null when no email code could be sent).
struct SessionBody: Encodable, Sendable {
    var accessToken: String
    var expiresIn: Int
    var refreshToken: String
    var user: UserBody
    var isNewUser: Bool
    /// Only `/v1/signup`: `.some(nil)` is written as null, nil leaves the member out.
    var verificationID: String??

    init(
        tokens: Auth_Session_V1_TokenPair,
        user: Auth_Identity_V1_User,
        isNewUser: Bool,
        verificationID: String?? = nil
    ) {
        accessToken = tokens.accessToken
        expiresIn = Int(tokens.accessTokenExpiresIn)
        refreshToken = tokens.refreshToken
        self.user = UserBody(user)
        self.isNewUser = isNewUser
        self.verificationID = verificationID
    }

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresIn = "expires_in"
        case refreshToken = "refresh_token"
        case user
        case isNewUser = "is_new_user"
        case verificationID = "verification_id"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(accessToken, forKey: .accessToken)
        // Lower-case whatever the service says (RFC 6749 token types compare case-insensitively).
        try container.encode("bearer", forKey: .tokenType)
        try container.encode(expiresIn, forKey: .expiresIn)
        try container.encode(refreshToken, forKey: .refreshToken)
        try container.encode(user, forKey: .user)
        try container.encode(isNewUser, forKey: .isNewUser)
        if let verificationID { try container.encode(verificationID, forKey: .verificationID) }
    }
}

/// `/v1/otp/send` and `/v1/otp/resend`.
struct VerificationBody: Encodable, Sendable {
    var verificationID: String
    var channel: String
    var destination: String
    var expiresIn: Int
    var resendAfter: Int
    var attemptsRemaining: Int

    enum CodingKeys: String, CodingKey {
        case verificationID = "verification_id"
        case channel, destination
        case expiresIn = "expires_in"
        case resendAfter = "resend_after"
        case attemptsRemaining = "attempts_remaining"
    }
}

/// `/v1/password/reset`.
struct PasswordResetStartedBody: Encodable, Sendable {
    var verificationID: String
    enum CodingKeys: String, CodingKey { case verificationID = "verification_id" }
}

/// `session` of `/v1/session`.
struct SessionInfoBody: Encodable, Sendable {
    var id: String
    var amr: [String]
    var createdAt: String
    var expiresAt: String
    enum CodingKeys: String, CodingKey {
        case id, amr
        case createdAt = "created_at"
        case expiresAt = "expires_at"
    }
}

/// `/v1/session`.
struct CurrentSessionBody: Encodable, Sendable {
    var user: UserBody
    var session: SessionInfoBody
}

/// One of `/v1/sessions`.
struct SessionItemBody: Encodable, Sendable {
    struct Device: Encodable, Sendable {
        var platform: String?
        var name: String?
        var userAgent: String?
        enum CodingKeys: String, CodingKey {
            case platform, name
            case userAgent = "user_agent"
        }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(platform, forKey: .platform)
            try container.encode(name, forKey: .name)
            try container.encode(userAgent, forKey: .userAgent)
        }
    }

    var id: String
    var amr: [String]
    var device: Device
    /// The app's own name of the device (`device_name` at sign-in or refresh), or null.
    var deviceName: String? { device.name }
    /// `ios`, `android` or `web` as the app said, or null.
    var platform: String? { device.platform }
    var ip: String?
    var createdAt: String
    var lastRefreshedAt: String?
    var expiresAt: String
    var current: Bool

    init(_ info: Auth_Session_V1_SessionInfo, currentSessionID: String) {
        id = info.sessionID
        amr = info.amr
        device = Device(
            platform: info.device?.platform.nonEmpty,
            name: info.device?.name.nonEmpty,
            userAgent: info.device?.userAgent.nonEmpty
        )
        ip = info.clientIP.nonEmpty
        createdAt = Timestamp.rfc3339(info.createdAt)
        lastRefreshedAt = info.lastRefreshedAt == 0 ? nil : Timestamp.rfc3339(info.lastRefreshedAt)
        expiresAt = Timestamp.rfc3339(info.expiresAt)
        current = info.sessionID == currentSessionID
    }

    enum CodingKeys: String, CodingKey {
        case id, amr, device, ip, current, platform
        case deviceName = "device_name"
        case createdAt = "created_at"
        case lastRefreshedAt = "last_refreshed_at"
        case expiresAt = "expires_at"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(amr, forKey: .amr)
        try container.encode(device, forKey: .device)
        try container.encode(deviceName, forKey: .deviceName)
        try container.encode(platform, forKey: .platform)
        try container.encode(ip, forKey: .ip)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(lastRefreshedAt, forKey: .lastRefreshedAt)
        try container.encode(expiresAt, forKey: .expiresAt)
        try container.encode(current, forKey: .current)
    }
}

struct SessionListBody: Encodable, Sendable {
    var sessions: [SessionItemBody]
}

/// `GET /health/live`, `GET /health/ready`.
struct HealthReport: Encodable, Sendable {
    var status: String
    var services: [String: String]
}

/// The error body of ``APIError``.
struct ErrorBody: Encodable, Sendable {
    var error: String
    var message: String
    var retryAfter: Int?
    var attemptsRemaining: Int?
    var fields: [String: String]?

    init(_ error: APIError) {
        self.error = error.reason
        self.message = error.message
        self.retryAfter = error.retryAfter
        self.attemptsRemaining = error.attemptsRemaining
        self.fields = error.fields
    }

    enum CodingKeys: String, CodingKey {
        case error, message, fields
        case retryAfter = "retry_after"
        case attemptsRemaining = "attempts_remaining"
    }
}

enum Timestamp {
    /// RFC 3339 in UTC, whole seconds: `2026-06-01T00:00:00Z`.
    static func rfc3339(_ unixSeconds: Int64) -> String {
        RFC3339.string(unixSeconds: unixSeconds)
    }
}

enum JSONResponse {
    /// For a body `JSONStreamEncoder` does not write (none of this file's do): its options never
    /// change, and encoding keeps its state per call.
    private static let fallbackEncoder = JSONEncoder()

    /// Every JSON answer is `Cache-Control: no-store` (with `Pragma: no-cache` for HTTP/1.0
    /// caches): sign-ins and refreshes carry tokens, the rest user data or a per-request error,
    /// and no proxy or browser cache may keep any of them (OWASP ASVS 5.0 V14.3).
    static func make(
        _ value: some Encodable,
        status: HTTPResponse.Status = .ok,
        headers: HTTPFields = [:]
    ) throws -> Response {
        var headers = headers
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.cacheControl] = "no-store"
        headers[Self.pragma] = "no-cache"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: try body(value)))
    }

    /// `value`'s JSON: written in one pass by `JSONStreamEncoder` (members in the order the body
    /// encodes them; on `GET /v1/session` 3–5 % of the gateway's CPU samples where `JSONEncoder`
    /// took 7–7.5 %, docs/benchmarks.md), by `JSONEncoder` for a body the stream encoder does not
    /// write.
    static func body(_ value: some Encodable) throws -> ByteBuffer {
        do {
            return ByteBuffer(string: try JSONStreamEncoder.encode(value))
        } catch is JSONStreamEncoder.Unsupported {
            return ByteBuffer(data: try fallbackEncoder.encode(value))
        }
    }

    private static let pragma = HTTPField.Name("Pragma")!

    /// 204.
    static let noContent = Response(status: .noContent)
}

extension String {
    /// nil for the empty string (the services' "unknown").
    var nonEmpty: String? { isEmpty ? nil : self }
}

/// `GET /v1/otp/{verification_id}`.
struct CodeStatusBody: Encodable, Sendable {
    /// `queued`, `sent`, `delivered` or `failed`.
    var status: String
    var channel: String
    var destination: String
    var expiresIn: Int
    var resendAfter: Int
    var resendsRemaining: Int

    enum CodingKeys: String, CodingKey {
        case status, channel, destination
        case expiresIn = "expires_in"
        case resendAfter = "resend_after"
        case resendsRemaining = "resends_remaining"
    }
}

/// `GET /v1/me/identities`.
struct IdentityListBody: Encodable, Sendable {
    var identities: [IdentityBody]
}

/// One way the account can sign in; every key present, `email` null when it has none.
struct IdentityBody: Encodable, Sendable {
    var provider: String
    var id: String
    var email: String?
    var createdAt: String

    init(_ identity: Auth_Identity_V1_SignInIdentity) {
        provider = identity.provider
        id = identity.id
        email = identity.email.nonEmpty
        createdAt = Timestamp.rfc3339(identity.createdAt)
    }

    enum CodingKeys: String, CodingKey {
        case provider, id, email
        case createdAt = "created_at"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(provider, forKey: .provider)
        try container.encode(id, forKey: .id)
        try container.encode(email, forKey: .email)
        try container.encode(createdAt, forKey: .createdAt)
    }
}
