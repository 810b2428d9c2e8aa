import AuthCrypto
import AuthText
import AuthTime

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The claims of an access token (a JWT, RFC 9068 profile): header
/// `{"alg":"ES256","kid":…,"typ":"at+jwt"}`, payload with these members.
public struct AccessTokenClaims: Sendable, Equatable {
    /// `iss`
    public var issuer: String
    /// `aud`
    public var audience: String
    /// `sub`: the user id.
    public var subject: String
    /// `sid`: the session id (lowercase UUID).
    public var sessionID: String
    /// `iat`, Unix seconds.
    public var issuedAt: Int64
    /// `exp`, Unix seconds.
    public var expiresAt: Int64
    /// `jti`: unique token id.
    public var tokenID: String
    /// `amr`: how the user authenticated (ours: `pwd`, `otp_sms`, …; read back from a Supabase
    /// token, the methods of its objects: `password`, `otp`, `oauth`, `recovery`).
    public var amr: [String]
    /// The claims Supabase's clients read, for a session of the Supabase door; nil for ours.
    public var supabase: SupabaseClaims?

    public init(
        issuer: String,
        audience: String,
        subject: String,
        sessionID: String,
        issuedAt: Int64,
        expiresAt: Int64,
        tokenID: String,
        amr: [String],
        supabase: SupabaseClaims? = nil
    ) {
        self.issuer = issuer
        self.audience = audience
        self.subject = subject
        self.sessionID = sessionID
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.tokenID = tokenID
        self.amr = amr
        self.supabase = supabase
    }
}

/// What a Supabase-format access token adds (docs/session.md, "Access tokens"): `role`
/// `authenticated`, `session_id` (the `sid`), `aal` `aal1`, `is_anonymous` false, `email`, `phone`
/// (without `+`), `aud` also `authenticated`, and `amr` as `[{"method", "timestamp"}]`.
public struct SupabaseClaims: Sendable, Equatable {
    /// `email` ("" for none).
    public var email: String
    /// `phone`, without its `+` as Supabase writes it ("" for none).
    public var phone: String
    /// Each `amr` entry's `timestamp`: when the session was signed in to (Unix seconds).
    public var authenticatedAt: Int64

    public init(email: String, phone: String, authenticatedAt: Int64) {
        self.email = email
        self.phone = phone.hasPrefix("+") ? String(phone.dropFirst()) : phone
        self.authenticatedAt = authenticatedAt
    }

    /// Supabase's name of one of our methods.
    public static func method(_ ours: String) -> String {
        switch ours {
        case "pwd": "password"
        case "otp_sms", "otp_email": "otp"
        case _ where ours.hasPrefix("oidc_"): "oauth"
        default: ours
        }
    }
}

/// Why an access token was refused. The session service sends these as its
/// `invalid_access_token`, `access_token_expired` and `unknown_signing_key` reasons; the gateway
/// answers each with 401 `invalid_token`.
public struct AccessTokenError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// Malformed, wrong algorithm, type, signature, issuer or audience, or issued in the future.
        case invalid
        /// `exp` has passed.
        case expired
        /// The `kid` is missing or not (or no longer) published.
        case unknownSigningKey
    }

    public var code: Code
    /// For logs; holds no part of the token.
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

/// Writes and reads access tokens.
public enum AccessTokenCodec {
    /// The JOSE `typ` of our access tokens (RFC 9068 §2.1), so that no other JWT (an ID token
    /// from a provider, say) can pass as one (RFC 8725 §3.11).
    public static let type = "at+jwt"
    /// Longest access token the service accepts for validation.
    public static let maximumLength = 8 * 1024

    /// Signs `claims` with `key` under `kid`.
    public static func sign(
        _ claims: AccessTokenClaims,
        key: ES256PrivateKey,
        kid: String
    ) throws(CryptoError) -> String {
        try JWS.signES256(payload: payload(claims), key: key, kid: kid, typ: type)
    }

    /// The JSON payload, members sorted, written by hand (no JSONEncoder on the hot path).
    public static func payload(_ claims: AccessTokenClaims) -> [UInt8] {
        var json = "{"
        if let supabase = claims.supabase {
            json += #""aal":"aal1","amr":["#
            for (index, method) in claims.amr.enumerated() {
                if index > 0 { json += "," }
                json += #"{"method":"#
                JSONText.appendString(SupabaseClaims.method(method), to: &json)
                json += #","timestamp":\#(supabase.authenticatedAt)}"#
            }
            json += #"],"aud":["#
            JSONText.appendString(claims.audience, to: &json)
            json += #","authenticated"],"email":"#
            JSONText.appendString(supabase.email, to: &json)
            json += ","
        } else {
            json += #""amr":["#
            for (index, method) in claims.amr.enumerated() {
                if index > 0 { json += "," }
                JSONText.appendString(method, to: &json)
            }
            json += #"],"aud":"#
            JSONText.appendString(claims.audience, to: &json)
            json += ","
        }
        json += #""exp":\#(claims.expiresAt),"iat":\#(claims.issuedAt),"#
        if claims.supabase != nil { json += #""is_anonymous":false,"# }
        json += #""iss":"#
        JSONText.appendString(claims.issuer, to: &json)
        json += #","jti":"#
        JSONText.appendString(claims.tokenID, to: &json)
        if let supabase = claims.supabase {
            json += #","phone":"#
            JSONText.appendString(supabase.phone, to: &json)
            json += #","role":"authenticated","session_id":"#
            JSONText.appendString(claims.sessionID, to: &json)
        }
        json += #","sid":"#
        JSONText.appendString(claims.sessionID, to: &json)
        json += #","sub":"#
        JSONText.appendString(claims.subject, to: &json)
        json += "}"
        return Array(json.utf8)
    }

    /// The payload as read back: `aud` may be a string or an array (RFC 7519 §4.1.3). Read
    /// from ``JSONValue`` (one pass, AuthText's parser) under the rules `JSONDecoder` applied
    /// to the `Decodable` struct this was: every member below of its type (an integer claim a
    /// number that is exactly a 64-bit integer), the optional ones absent or null, others ignored.
    struct DecodedPayload {
        var iss: String
        var aud: Audience
        var sub: String
        var sid: String
        var iat: Int64
        var exp: Int64
        var nbf: Int64?
        var jti: String
        var amr: Methods?
        /// Supabase-format members (present together).
        var role: String?
        var email: String?
        var phone: String?

        struct Malformed: Error {}

        init(json: [UInt8]) throws(Malformed) {
            guard case .object(let claims)? = try? JSONValue.parse(json) else { throw Malformed() }
            func string(_ value: JSONValue?) throws(Malformed) -> String {
                guard case .string(let text)? = value else { throw Malformed() }
                return text
            }
            func integer(_ value: JSONValue?) throws(Malformed) -> Int64 {
                guard case .integer(let text)? = value, let number = Int64(text) else { throw Malformed() }
                return number
            }
            func optional<T>(_ value: JSONValue?, _ read: (JSONValue?) throws(Malformed) -> T) throws(Malformed) -> T? {
                guard let present = value.presentValue else { return nil }
                return try read(present)
            }
            iss = try string(claims["iss"])
            aud = try Audience(claims["aud"])
            sub = try string(claims["sub"])
            sid = try string(claims["sid"])
            iat = try integer(claims["iat"])
            exp = try integer(claims["exp"])
            nbf = try optional(claims["nbf"], integer)
            jti = try string(claims["jti"])
            amr = try optional(claims["amr"]) { (value) throws(Malformed) in try Methods(value) }
            role = try optional(claims["role"], string)
            email = try optional(claims["email"], string)
            phone = try optional(claims["phone"], string)
        }

        /// `amr`: our strings, or Supabase's `{"method", "timestamp"}` objects.
        struct Methods {
            var methods: [String]
            /// The first object's `timestamp` (Supabase's shape only).
            var timestamp: Int64?

            init(_ value: JSONValue?) throws(Malformed) {
                guard case .array(let elements)? = value else { throw Malformed() }
                if let strings = value?.stringArrayValue {
                    methods = strings
                    timestamp = nil
                    return
                }
                var methods: [String] = []
                var timestamps: [Int64] = []
                for element in elements {
                    guard case .object(let entry) = element, case .string(let method)? = entry["method"],
                        case .integer(let text)? = entry["timestamp"], let timestamp = Int64(text)
                    else { throw Malformed() }
                    methods.append(method)
                    timestamps.append(timestamp)
                }
                self.methods = methods
                self.timestamp = timestamps.first
            }
        }

        enum Audience {
            case one(String)
            case many([String])

            init(_ value: JSONValue?) throws(Malformed) {
                switch value {
                case .string(let one)?: self = .one(one)
                case .array?:
                    guard let many = value?.stringArrayValue else { throw Malformed() }
                    self = .many(many)
                default: throw Malformed()
                }
            }

            func contains(_ audience: String) -> Bool {
                switch self {
                case .one(let one): one == audience
                case .many(let many): many.contains(audience)
                }
            }

            var first: String {
                switch self {
                case .one(let one): one
                case .many(let many): many.first ?? ""
                }
            }
        }
    }
}

/// An access token whose signature (under a key of one key set), `typ`, `iss` and `aud`
/// ``AccessTokenVerifier/verifyIgnoringTime(_:key:)`` checked, but not its times: valid only
/// after ``AccessTokenVerifier/checkTimes(of:now:)``.
public struct VerifiedAccessToken: Sendable, Equatable {
    public let claims: AccessTokenClaims
    /// `nbf`, Unix seconds, when the token has one.
    public let notBefore: Int64?
}

/// Verifies our access tokens: signature (ES256 only, by `kid`), `typ`, `iss`, `aud`, `exp`,
/// `iat`/`nbf`. Checks run in this order and the first failure is thrown:
///
/// 1. malformed (not a compact JWS, bad base64url, duplicate or `crit` header members,
///    longer than 8 KiB) → ``AccessTokenError/Code/invalid``
/// 2. `alg` other than `ES256` (`none`, `HS256`, …) → ``AccessTokenError/Code/invalid``
/// 3. `typ` other than `at+jwt` → ``AccessTokenError/Code/invalid``
/// 4. missing or unpublished `kid` → ``AccessTokenError/Code/unknownSigningKey``
/// 5. signature → ``AccessTokenError/Code/invalid``
/// 6. claims missing or of the wrong type, wrong `iss` or `aud`, `iat`/`nbf` in the future →
///    ``AccessTokenError/Code/invalid``
/// 7. `exp` passed → ``AccessTokenError/Code/expired``
public struct AccessTokenVerifier: Sendable {
    public var issuer: String
    public var audience: String
    /// Allowed difference between the issuer's clock and ours for `exp`, `iat`, `nbf`.
    public var clockSkewTolerance: Duration

    public init(issuer: String, audience: String, clockSkewTolerance: Duration = .seconds(30)) {
        self.issuer = issuer
        self.audience = audience
        self.clockSkewTolerance = clockSkewTolerance
    }

    /// Verifies `token` at time `now`, finding the key with `key(kid)`.
    public func verify(
        _ token: String,
        now: Date,
        key: (String) -> ES256PublicKey?
    ) throws(AccessTokenError) -> AccessTokenClaims {
        try checkTimes(of: try verifyIgnoringTime(token, key: key), now: now)
    }

    /// Checks 1 to 6 but `iat`/`nbf` (everything that does not change with time): what a
    /// cache of verified tokens may keep for the key set that verified them, passing it to
    /// ``checkTimes(of:now:)`` on each use.
    public func verifyIgnoringTime(
        _ token: String,
        key: (String) -> ES256PublicKey?
    ) throws(AccessTokenError) -> VerifiedAccessToken {
        guard token.utf8.count <= AccessTokenCodec.maximumLength else { throw Self.invalid("too long") }
        let parts: JWS.Parts
        do {
            parts = try JWS.parse(token)
        } catch {
            throw Self.invalid("malformed")
        }
        guard parts.header.alg == JWSAlgorithm.es256.rawValue else {
            throw Self.invalid("algorithm \(parts.header.alg.prefix(16)) is not accepted")
        }
        guard let typ = parts.header.typ, Self.isAccessTokenType(typ) else {
            throw Self.invalid("typ is not at+jwt")
        }
        guard let kid = parts.header.kid, let publicKey = key(kid) else {
            throw AccessTokenError(.unknownSigningKey, "The access token's signing key is not known (or retired).")
        }
        let payload: [UInt8]
        do {
            payload = try JWS.verify(parts, expectedAlgorithm: .es256, key: publicKey)
        } catch {
            throw Self.invalid("bad signature")
        }
        let decoded: AccessTokenCodec.DecodedPayload
        do {
            decoded = try AccessTokenCodec.DecodedPayload(json: payload)
        } catch {
            throw Self.invalid("claims missing or malformed")
        }
        guard decoded.iss == issuer else { throw Self.invalid("wrong issuer") }
        guard decoded.aud.contains(audience) else { throw Self.invalid("wrong audience") }
        return VerifiedAccessToken(
            claims: AccessTokenClaims(
                issuer: decoded.iss,
                audience: audience,
                subject: decoded.sub,
                sessionID: decoded.sid,
                issuedAt: decoded.iat,
                expiresAt: decoded.exp,
                tokenID: decoded.jti,
                amr: decoded.amr?.methods ?? [],
                supabase: decoded.role == nil
                    ? nil
                    : SupabaseClaims(
                        email: decoded.email ?? "",
                        phone: decoded.phone ?? "",
                        authenticatedAt: decoded.amr?.timestamp ?? decoded.iat
                    )
            ),
            notBefore: decoded.nbf
        )
    }

    /// The checks that depend on the time, in order: `iat`/`nbf` in the future (check 6,
    /// ``AccessTokenError/Code/invalid``), then `exp` passed (check 7,
    /// ``AccessTokenError/Code/expired``).
    public func checkTimes(of token: VerifiedAccessToken, now: Date) throws(AccessTokenError) -> AccessTokenClaims {
        let skew = Int64(clockSkewTolerance.timeInterval.rounded(.up))
        let nowSeconds = now.unixSeconds
        guard token.claims.issuedAt <= nowSeconds + skew else { throw Self.invalid("issued in the future") }
        if let nbf = token.notBefore, nbf > nowSeconds + skew { throw Self.invalid("not yet valid") }
        guard nowSeconds < token.claims.expiresAt + skew else {
            throw AccessTokenError(.expired, "The access token has expired.")
        }
        return token.claims
    }

    private static func invalid(_ why: String) -> AccessTokenError {
        AccessTokenError(.invalid, "The access token is not valid: \(why).")
    }

    /// `at+jwt`, also as the full media type; media types compare case-insensitively (RFC 9068 §4).
    static func isAccessTokenType(_ typ: String) -> Bool {
        let lowered = typ.lowercased()
        return lowered == "at+jwt" || lowered == "application/at+jwt"
    }
}

/// Verifies access tokens locally against a published JWK Set (GetJWKS), without calling the
/// session service: what an API server does on every request. Revocation is not seen this
/// way; call Validate with `check_session` where it matters.
public struct LocalAccessTokenVerifier: Sendable {
    public let verifier: AccessTokenVerifier
    private let keys: [String: ES256PublicKey]

    /// - Parameter jwksJSON: the JWK Set JSON from GetJWKS. Keys other than EC P-256 for
    ///   ES256 are skipped.
    public init(jwksJSON: String, issuer: String, audience: String, clockSkewTolerance: Duration = .seconds(30)) throws
    {
        let set = try JSONDecoder().decode(JWKSet.self, from: Data(jwksJSON.utf8))
        var keys: [String: ES256PublicKey] = [:]
        for jwk in set.keys {
            guard let kid = jwk.kid, let key = try? ES256PublicKey(jwk: jwk) else { continue }
            keys[kid] = key
        }
        self.keys = keys
        self.verifier = AccessTokenVerifier(issuer: issuer, audience: audience, clockSkewTolerance: clockSkewTolerance)
    }

    /// Verifies `token`; see ``AccessTokenVerifier`` for the checks and errors.
    public func verify(_ token: String, now: Date = Date()) throws(AccessTokenError) -> AccessTokenClaims {
        try verifier.verify(token, now: now) { keys[$0] }
    }

    /// Verifies all but the times of `token`; see ``AccessTokenVerifier/verifyIgnoringTime(_:key:)``.
    public func verifyIgnoringTime(_ token: String) throws(AccessTokenError) -> VerifiedAccessToken {
        try verifier.verifyIgnoringTime(token) { keys[$0] }
    }

    /// The checks of a token's times; see ``AccessTokenVerifier/checkTimes(of:now:)``.
    public func checkTimes(
        of token: VerifiedAccessToken,
        now: Date = Date()
    ) throws(AccessTokenError) -> AccessTokenClaims {
        try verifier.checkTimes(of: token, now: now)
    }
}
