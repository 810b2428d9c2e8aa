/// A JSON Web Key (RFC 7517) restricted to the public-key members AuthCrypto uses.
///
/// Decoding accepts any JSON object and ignores members it does not know (including a private
/// `d`, which is never read from a JWK); import into a key type validates strictly.
public struct JWK: Codable, Sendable, Equatable {
    /// Key type: `"EC"` or `"RSA"`.
    public var kty: String?
    /// Curve of an EC key: `"P-256"`.
    public var crv: String?
    /// EC X coordinate, base64url.
    public var x: String?
    /// EC Y coordinate, base64url.
    public var y: String?
    /// RSA modulus, base64url big-endian.
    public var n: String?
    /// RSA public exponent, base64url big-endian.
    public var e: String?
    /// Key ID, matched against a JWS header's `kid`.
    public var kid: String?
    /// Intended algorithm: `"ES256"`, `"RS256"`.
    public var alg: String?
    /// Intended use: `"sig"`.
    public var use: String?

    /// Creates a JWK from its members.
    public init(
        kty: String? = nil,
        crv: String? = nil,
        x: String? = nil,
        y: String? = nil,
        n: String? = nil,
        e: String? = nil,
        kid: String? = nil,
        alg: String? = nil,
        use: String? = nil
    ) {
        self.kty = kty
        self.crv = crv
        self.x = x
        self.y = y
        self.n = n
        self.e = e
        self.kid = kid
        self.alg = alg
        self.use = use
    }
}

/// A JWK Set (RFC 7517 §5): `{"keys": [...]}`.
public struct JWKSet: Codable, Sendable, Equatable {
    /// The keys.
    public var keys: [JWK]

    /// Creates a set.
    public init(keys: [JWK]) {
        self.keys = keys
    }

    /// The keys whose `kid` is `kid`.
    public func keys(withID kid: String) -> [JWK] {
        self.keys.filter { $0.kid == kid }
    }
}

extension ES256PublicKey {
    /// Imports an EC public JWK: `kty` must be `"EC"`, `crv` `"P-256"`, `alg` absent or
    /// `"ES256"`, `use` absent or `"sig"`, and `x`/`y` strict base64url of 32 bytes each.
    ///
    /// - Throws: ``CryptoError/Code/invalidKey``.
    public convenience init(jwk: JWK) throws(CryptoError) {
        guard jwk.kty == "EC" else { throw CryptoError(code: .invalidKey, message: "JWK kty is not EC") }
        guard jwk.crv == "P-256" else { throw CryptoError(code: .invalidKey, message: "JWK crv is not P-256") }
        try JWK.checkAlgorithmAndUse(jwk, algorithm: .es256)
        guard jwk.n == nil, jwk.e == nil else {
            throw CryptoError(code: .invalidKey, message: "EC JWK carries RSA members")
        }
        guard let xText = jwk.x, let yText = jwk.y,
            let x = Base64URL.decode(xText), let y = Base64URL.decode(yText),
            x.count == 32, y.count == 32
        else {
            throw CryptoError(code: .invalidKey, message: "JWK x and y must be base64url of 32 bytes each")
        }
        try self.init(x: x, y: y)
    }

    /// This key as a public JWK with `alg` `"ES256"` and `use` `"sig"`.
    public func jwk(kid: String? = nil) -> JWK {
        JWK(
            kty: "EC",
            crv: "P-256",
            x: Base64URL.encode(self.x),
            y: Base64URL.encode(self.y),
            kid: kid,
            alg: JWSAlgorithm.es256.rawValue,
            use: "sig"
        )
    }
}

extension RS256PublicKey {
    /// Imports an RSA public JWK: `kty` must be `"RSA"`, `alg` absent or `"RS256"`, `use` absent
    /// or `"sig"`, `n` and `e` strict base64url; the modulus must have at least 2048 bits.
    ///
    /// - Throws: ``CryptoError/Code/invalidKey``.
    public convenience init(jwk: JWK) throws(CryptoError) {
        guard jwk.kty == "RSA" else { throw CryptoError(code: .invalidKey, message: "JWK kty is not RSA") }
        try JWK.checkAlgorithmAndUse(jwk, algorithm: .rs256)
        guard jwk.crv == nil, jwk.x == nil, jwk.y == nil else {
            throw CryptoError(code: .invalidKey, message: "RSA JWK carries EC members")
        }
        guard let nText = jwk.n, let eText = jwk.e,
            let n = Base64URL.decode(nText), let e = Base64URL.decode(eText)
        else {
            throw CryptoError(code: .invalidKey, message: "JWK n and e must be base64url")
        }
        try self.init(modulus: n, exponent: e)
    }

    /// This key as a public JWK with `alg` `"RS256"` and `use` `"sig"`.
    public func jwk(kid: String? = nil) throws(CryptoError) -> JWK {
        JWK(
            kty: "RSA",
            n: Base64URL.encode(try self.modulus),
            e: Base64URL.encode(try self.exponent),
            kid: kid,
            alg: JWSAlgorithm.rs256.rawValue,
            use: "sig"
        )
    }
}

extension JWK {
    fileprivate static func checkAlgorithmAndUse(_ jwk: JWK, algorithm: JWSAlgorithm) throws(CryptoError) {
        if let alg = jwk.alg, alg != algorithm.rawValue {
            throw CryptoError(code: .invalidKey, message: "JWK alg \(alg) is not \(algorithm.rawValue)")
        }
        if let use = jwk.use, use != "sig" {
            throw CryptoError(code: .invalidKey, message: "JWK use \(use) is not sig")
        }
    }
}
