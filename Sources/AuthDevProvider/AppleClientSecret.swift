import AuthCrypto

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Sign in with Apple's client secret: a JWT the client signs with its ES256 key (header `kid`
/// the key ID; `iss` the team ID, `sub` the Services ID, `aud` `https://appleid.apple.com`, at
/// most six months between `iat` and `exp`). Checked as Apple's token endpoint checks it.
enum AppleClientSecret {
    /// Apple's audience for client secrets.
    static let audience = "https://appleid.apple.com"
    /// The longest lifetime Apple accepts: 6 months, in seconds.
    static let maximumLifetime: Double = 15_777_000
    /// Clock skew allowed on `iat` and `exp`, in seconds.
    static let skew: Double = 60

    private struct Claims: Decodable {
        var iss: String?
        var sub: String?
        var aud: String?
        var iat: Double?
        var exp: Double?
    }

    /// Why a client secret is refused; nil when it is accepted. `now` is Unix time in seconds.
    static func problem(
        with secret: String,
        configuration: DevOAuthProvider.Configuration,
        now: Double
    ) -> String? {
        guard let key = configuration.appleClientSecretKey else {
            return "no Apple client-secret key is configured"
        }
        let parts: JWS.Parts
        let payload: [UInt8]
        do {
            parts = try JWS.parse(secret)
            payload = try JWS.verify(parts, expectedAlgorithm: .es256, key: key)
        } catch {
            return "the client secret is not an ES256 JWS signed with the configured key (\(error.code))"
        }
        guard parts.header.kid == configuration.appleKeyID else { return "the client secret's kid is not the key ID" }
        guard let claims = try? JSONDecoder().decode(Claims.self, from: Data(payload)) else {
            return "the client secret's claims are not a JSON object of the expected types"
        }
        guard claims.iss == configuration.appleTeamID else { return "iss is not the team ID" }
        guard claims.sub == configuration.appleClientID else { return "sub is not the Services ID" }
        guard claims.aud == audience else { return "aud is not \(audience)" }
        // Compared as Doubles: a huge exp must be refused, not overflow.
        guard let iat = claims.iat, let exp = claims.exp else { return "iat or exp is missing" }
        guard exp + skew > now else { return "the client secret has expired" }
        guard iat <= now + skew else { return "the client secret is issued in the future" }
        guard exp - iat <= maximumLifetime else { return "the client secret lives longer than six months" }
        return nil
    }
}
