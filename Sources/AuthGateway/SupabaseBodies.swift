import AuthCrypto
import AuthProtobuf

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The user object of the Supabase door (docs/supabase.md), as Supabase's clients decode it:
/// `aud` and `role` `authenticated`, the phone without its `+`, `*_confirmed_at` for a proved
/// contact, `app_metadata` (`provider`, `providers`), `user_metadata` (`display_name`,
/// `avatar_url`), `identities`, `is_anonymous` false.
struct SupabaseUserBody: Encodable, Sendable {
    var user: Auth_Identity_V1_User
    var identities: [Auth_Identity_V1_SignInIdentity]

    /// Supabase's provider names: ours, but `password` is `email` and a proved phone `phone`.
    static func providerName(_ ours: String) -> String { ours == "password" ? "email" : ours }

    /// A stable identity id (Supabase's are UUIDs): the first 16 bytes of SHA-256 over the user
    /// id, the provider and the identity's id, shaped as a version-8 UUID.
    static func identityID(userID: String, provider: String, id: String) -> String {
        var bytes = Array(SHA256.hash("\(userID)\u{0}\(provider)\u{0}\(id)").prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x80
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = Hex.lowercase(bytes)
        let parts = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { range in
            String(hex.dropFirst(range.lowerBound).prefix(range.count))
        }
        return parts.joined(separator: "-")
    }

    struct Identity: Encodable {
        var id: String
        var identityID: String
        var userID: String
        var identityData: [String: String]
        var provider: String
        var email: String?
        var createdAt: String
        var updatedAt: String

        enum CodingKeys: String, CodingKey {
            case id, provider, email
            case identityID = "identity_id"
            case userID = "user_id"
            case identityData = "identity_data"
            case createdAt = "created_at"
            case updatedAt = "updated_at"
        }
    }

    enum CodingKeys: String, CodingKey {
        case id, aud, role, email, phone, identities
        case emailConfirmedAt = "email_confirmed_at"
        case phoneConfirmedAt = "phone_confirmed_at"
        case confirmedAt = "confirmed_at"
        case appMetadata = "app_metadata"
        case userMetadata = "user_metadata"
        case createdAt = "created_at"
        case updatedAt = "updated_at"
        case isAnonymous = "is_anonymous"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        let created = Timestamp.rfc3339(user.createdAt)
        let updated = Timestamp.rfc3339(user.updatedAt)
        try container.encode(user.id, forKey: .id)
        try container.encode("authenticated", forKey: .aud)
        try container.encode("authenticated", forKey: .role)
        try container.encode(user.email, forKey: .email)
        try container.encode(user.phone.hasPrefix("+") ? String(user.phone.dropFirst()) : user.phone, forKey: .phone)
        // When a contact was proved is not kept: its account's creation stands for it.
        let emailConfirmed = user.emailVerified ? created : nil
        let phoneConfirmed = user.phoneVerified ? created : nil
        try container.encode(emailConfirmed, forKey: .emailConfirmedAt)
        try container.encode(phoneConfirmed, forKey: .phoneConfirmedAt)
        try container.encode(emailConfirmed ?? phoneConfirmed, forKey: .confirmedAt)
        let providers = identities.map { Self.providerName($0.provider) }.reduce(into: [String]()) { list, name in
            if !list.contains(name) { list.append(name) }
        }
        struct AppMetadata: Encodable {
            var provider: String
            var providers: [String]
        }
        try container.encode(
            AppMetadata(provider: providers.first ?? "email", providers: providers),
            forKey: .appMetadata
        )
        var metadata: [String: String] = [:]
        if !user.displayName.isEmpty { metadata["display_name"] = user.displayName }
        if !user.photoURL.isEmpty { metadata["avatar_url"] = user.photoURL }
        try container.encode(metadata, forKey: .userMetadata)
        try container.encode(
            identities.map { identity in
                let provider = Self.providerName(identity.provider)
                var data = ["sub": identity.id]
                if !identity.email.isEmpty { data["email"] = identity.email }
                let at = Timestamp.rfc3339(identity.createdAt)
                return Identity(
                    id: identity.id,
                    identityID: Self.identityID(userID: user.id, provider: provider, id: identity.id),
                    userID: user.id,
                    identityData: data,
                    provider: provider,
                    email: identity.email.isEmpty ? nil : identity.email,
                    createdAt: at,
                    updatedAt: at
                )
            },
            forKey: .identities
        )
        try container.encode(created, forKey: .createdAt)
        try container.encode(updated, forKey: .updatedAt)
        try container.encode(false, forKey: .isAnonymous)
    }
}

/// The session of the Supabase door: `access_token`, `token_type` `bearer`, `expires_in`,
/// `expires_at` (Unix seconds), `refresh_token`, `user`.
struct SupabaseSessionBody: Encodable, Sendable {
    var tokens: Auth_Session_V1_TokenPair
    var user: SupabaseUserBody
    var now: Date

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresIn = "expires_in"
        case expiresAt = "expires_at"
        case refreshToken = "refresh_token"
        case user
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        let expiresIn = Int(tokens.accessTokenExpiresIn)
        try container.encode(tokens.accessToken, forKey: .accessToken)
        try container.encode("bearer", forKey: .tokenType)
        try container.encode(expiresIn, forKey: .expiresIn)
        try container.encode(Int(now.timeIntervalSince1970) + expiresIn, forKey: .expiresAt)
        try container.encode(tokens.refreshToken, forKey: .refreshToken)
        try container.encode(user, forKey: .user)
    }

    /// The session as a followed link hands it to the app in the URL's fragment (Supabase's
    /// implicit flow): the body's members but `user`, and the link's `type`.
    static func fragment(
        _ tokens: Auth_Session_V1_TokenPair,
        now: Date,
        type: String
    ) -> [(name: String, value: String)] {
        let expiresIn = Int(tokens.accessTokenExpiresIn)
        return [
            (CodingKeys.accessToken.rawValue, tokens.accessToken),
            (CodingKeys.expiresAt.rawValue, String(Int(now.timeIntervalSince1970) + expiresIn)),
            (CodingKeys.expiresIn.rawValue, String(expiresIn)),
            (CodingKeys.refreshToken.rawValue, tokens.refreshToken),
            (CodingKeys.tokenType.rawValue, "bearer"),
            ("type", type),
        ]
    }
}

/// `GET /auth/v1/settings`, as Supabase answers it.
struct SupabaseSettingsBody: Encodable, Sendable {
    var external: [String: Bool]
    var disableSignup: Bool
    var mailerAutoconfirm: Bool
    var phoneAutoconfirm: Bool
    var smsProvider: String
    var samlEnabled: Bool

    enum CodingKeys: String, CodingKey {
        case external
        case disableSignup = "disable_signup"
        case mailerAutoconfirm = "mailer_autoconfirm"
        case phoneAutoconfirm = "phone_autoconfirm"
        case smsProvider = "sms_provider"
        case samlEnabled = "saml_enabled"
    }
}
