import AuthCrypto
import AuthProtobuf
import AuthText

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a verified ID token says.
struct VerifiedIDToken: Sendable {
    var identity: ProviderIdentity
    var expiresAt: Date
    /// What makes the token unique for replay detection: `jti:<jti>`, or `sha256:<hex>` of the
    /// whole token when it has no `jti`.
    var replayKey: String
}

/// Checks a provider's ID token (docs/identity.md, "ID tokens"): RS256 or ES256 signature by a
/// key of the provider's JWKS named by `kid`; `iss` one of the provider's issuers; `aud` one of
/// the configured client ids; `exp` and `iat` present, within the allowed skew; `sub` present;
/// the nonce rule of the provider. Every refusal names no part of the token.
struct IDTokenVerifier: Sendable {
    let configuration: OIDCProviderConfiguration
    let keys: JWKSCache
    let clockSkew: TimeInterval

    static let acceptedAlgorithms: Set<String> = [JWSAlgorithm.rs256.rawValue, JWSAlgorithm.es256.rawValue]

    private func invalid(_ why: String) -> IdentityError {
        IdentityError(.invalidIDToken, "The sign-in token is not valid (\(why)).")
    }

    /// `nonceHashed`: the token's `nonce` is hex SHA-256 of `rawNonce` whatever the provider
    /// (the Supabase door); otherwise the provider's own rule (``checkNonce``).
    func verify(
        _ token: String,
        rawNonce: String,
        nonceHashed: Bool = false,
        now: Date
    ) async throws
        -> VerifiedIDToken
    {
        let parts: JWS.Parts
        do {
            parts = try JWS.parse(token)
        } catch {
            throw invalid("malformed")
        }
        guard Self.acceptedAlgorithms.contains(parts.header.alg) else { throw invalid("algorithm not accepted") }
        guard let kid = parts.header.kid, !kid.isEmpty else { throw invalid("no key id") }
        guard let key = try await keys.key(kid: kid) else { throw invalid("unknown key") }
        guard key.jwsAlgorithm.rawValue == parts.header.alg else { throw invalid("algorithm does not match the key") }
        do {
            _ = try JWS.verify(parts, expectedAlgorithm: key.jwsAlgorithm, key: key)
        } catch {
            throw invalid("bad signature")
        }
        guard case .object(let claims)? = try? JSONValue.parse(parts.payload) else {
            throw invalid("claims are not a JSON object")
        }
        guard let issuer = claims["iss"]?.stringValue, configuration.issuers.contains(issuer) else {
            throw invalid("wrong issuer")
        }
        let audiences: [String]
        switch claims["aud"] {
        case .string(let single)?:
            audiences = [single]
        case .array?:
            guard let many = claims["aud"]?.stringArrayValue else { throw invalid("no audience") }
            audiences = many
        default:
            throw invalid("no audience")
        }
        guard audiences.contains(where: configuration.clientIDs.contains) else { throw invalid("wrong audience") }
        // OIDC Core §3.1.3.7: a token for several audiences names the party it was issued to in
        // `azp`, which must be ours (issue 19: any token listing our client id among others
        // was taken).
        if audiences.count > 1 {
            guard let azp = claims["azp"]?.stringValue, configuration.clientIDs.contains(azp) else {
                throw invalid("several audiences without our azp")
            }
        }
        guard let exp = claims["exp"]?.numberValue, let iat = claims["iat"]?.numberValue else {
            throw invalid("exp and iat are required")
        }
        let nowSeconds = now.timeIntervalSince1970
        guard iat <= nowSeconds + clockSkew else { throw invalid("issued in the future") }
        guard exp + clockSkew > nowSeconds else {
            throw IdentityError(.idTokenExpired, "The sign-in token has expired. Please sign in again.")
        }
        if let nbf = claims["nbf"]?.numberValue, nbf > nowSeconds + clockSkew { throw invalid("not yet valid") }
        guard let subject = claims["sub"]?.stringValue, !subject.isEmpty, subject.utf8.count <= 255 else {
            throw invalid("no subject")
        }
        try checkNonce(
            claims["nonce"]?.stringValue,
            rawNonce: rawNonce,
            hashed: nonceHashed || configuration.provider == .apple,
            claimPresent: claims["nonce"] != nil
        )

        var email: String?
        if let text = claims["email"]?.stringValue, let address = EmailAddress(text) {
            email = address.normalized
        }
        let emailVerified: Bool =
            switch claims["email_verified"] {
            case .bool(let flag)?: flag
            case .string(let text)?: text == "true"
            default: false
            }
        var name: String?
        if let text = claims["name"]?.stringValue, ContactRules.isValidDisplayName(text) {
            name = text
        } else if let given = claims["given_name"]?.stringValue {
            let joined = [given, claims["family_name"]?.stringValue ?? ""].filter { !$0.isEmpty }.joined(separator: " ")
            if ContactRules.isValidDisplayName(joined) { name = joined }
        }
        var picture: String?
        if let text = claims["picture"]?.stringValue, !text.isEmpty, ContactRules.isValidPhotoURL(text) {
            picture = text
        }
        let replayKey: String
        if let jti = claims["jti"]?.stringValue, !jti.isEmpty, jti.utf8.count <= 255 {
            replayKey = "jti:" + jti
        } else {
            replayKey = "sha256:" + hex(SHA256.hash(token))
        }
        return VerifiedIDToken(
            identity: ProviderIdentity(
                provider: configuration.provider,
                subject: subject,
                email: email,
                emailVerified: email != nil && emailVerified,
                name: name,
                pictureURL: picture
            ),
            expiresAt: Date(timeIntervalSince1970: exp + clockSkew),
            replayKey: replayKey
        )
    }

    /// Apple: the token's `nonce` is hex SHA-256 of the raw nonce the app sends (seed 002 §2.5);
    /// Google and Facebook: the raw nonce itself, unless `hashed` (the Supabase door hashes every
    /// provider's). Required for Apple and Google; for Facebook, checked when either side has one.
    private func checkNonce(_ claim: String?, rawNonce: String, hashed: Bool, claimPresent: Bool) throws {
        let provider = configuration.provider
        if !provider.requiresNonce && rawNonce.isEmpty && !claimPresent { return }
        let refused = IdentityError(.invalidNonce, "The sign-in could not be verified. Please try again.")
        guard !rawNonce.isEmpty, rawNonce.utf8.count <= 512, let claim, !claim.isEmpty else { throw refused }
        let expected = hashed ? hex(SHA256.hash(rawNonce)) : rawNonce
        guard ConstantTime.equals(Array(expected.utf8), Array(claim.utf8)) else { throw refused }
    }
}

func hex(_ bytes: [UInt8]) -> String {
    Hex.lowercase(bytes)
}
