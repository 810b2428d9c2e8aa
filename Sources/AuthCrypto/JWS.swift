import AuthText

#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif

/// A JWS `alg` value (RFC 7518 §3.1) that AuthCrypto can verify.
public struct JWSAlgorithm: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The `alg` header value.
    public let rawValue: String

    /// Wraps an `alg` header value.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// ECDSA P-256 with SHA-256.
    public static let es256 = JWSAlgorithm(rawValue: "ES256")
    /// RSASSA-PKCS1-v1_5 with SHA-256 (verification only).
    public static let rs256 = JWSAlgorithm(rawValue: "RS256")

    public var description: String { self.rawValue }
}

/// A public key that can check JWS signatures of one algorithm.
public protocol JWSVerificationKey: Sendable {
    /// The only algorithm this key verifies.
    var jwsAlgorithm: JWSAlgorithm { get }
    /// Whether `signature` (as carried in the JWS) signs `message` under this key.
    func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool
}

extension ES256PublicKey: JWSVerificationKey {
    /// ``JWSAlgorithm/es256``.
    public var jwsAlgorithm: JWSAlgorithm { .es256 }
}

extension RS256PublicKey: JWSVerificationKey {
    /// ``JWSAlgorithm/rs256``.
    public var jwsAlgorithm: JWSAlgorithm { .rs256 }
}

/// The JOSE header members AuthCrypto reads or writes (RFC 7515 §4.1). Other members are ignored
/// on decode; in particular a `jwk`, `jku`, `x5u` or `x5c` in a token is never used to find the key.
public struct JOSEHeader: Codable, Sendable, Equatable {
    /// The signature algorithm, for example `"ES256"`.
    public var alg: String
    /// The key ID, to pick the verification key from a JWK Set.
    public var kid: String?
    /// The media type of the whole JWS, for example `"JWT"`.
    public var typ: String?
    /// The media type of the payload.
    public var cty: String?
    /// Critical extensions. AuthCrypto understands none, so a token with `crit` is rejected.
    public var crit: [String]?

    /// Creates a header.
    public init(alg: String, kid: String? = nil, typ: String? = nil, cty: String? = nil, crit: [String]? = nil) {
        self.alg = alg
        self.kid = kid
        self.typ = typ
        self.cty = cty
        self.crit = crit
    }

    /// A parsed header: `alg` a string; `kid`, `typ`, `cty` strings and `crit` an array of
    /// strings when present and not null; other members ignored (what `JSONDecoder` did).
    init?(_ members: [String: JSONValue]) {
        guard case .string(let alg)? = members["alg"] else { return nil }
        /// `.some(nil)` for a member absent or null, nil for one of the wrong type.
        func optional<T>(_ name: String, _ read: (JSONValue) -> T?) -> T?? {
            guard let value = members[name].presentValue else { return .some(nil) }
            return read(value).map { .some($0) } ?? nil
        }
        guard let kid = optional("kid", \.stringValue), let typ = optional("typ", \.stringValue),
            let cty = optional("cty", \.stringValue), let crit = optional("crit", \.stringArrayValue)
        else { return nil }
        self.init(alg: alg, kid: kid, typ: typ, cty: cty, crit: crit)
    }

    /// The header as JSON, members sorted and absent ones left out: what `JSONEncoder` with
    /// `.sortedKeys` and `.withoutEscapingSlashes` wrote, by hand (it is on every signing).
    var json: String {
        var json = #"{"alg":"#
        JSONText.appendString(alg, to: &json)
        if let crit {
            json += #","crit":["#
            for (index, name) in crit.enumerated() {
                if index > 0 { json += "," }
                JSONText.appendString(name, to: &json)
            }
            json += "]"
        }
        for (name, value) in [("cty", cty), ("kid", kid), ("typ", typ)] {
            guard let value else { continue }
            json += #",""# + name + #"":"#
            JSONText.appendString(value, to: &json)
        }
        return json + "}"
    }
}

/// JWS compact serialization (RFC 7515 §7.1): `base64url(header).base64url(payload).base64url(signature)`.
///
/// This layer signs and verifies bytes. It does not read the payload: JWT claims (`exp`, `aud`,
/// `iss`, ...) are checked by the caller after ``verify(_:expectedAlgorithm:key:)`` succeeds.
public enum JWS {
    /// A compact JWS split and decoded, **not verified**.
    public struct Parts: Sendable {
        /// The decoded header bytes (the JSON as sent).
        public var headerJSON: [UInt8]
        /// The decoded header.
        public var header: JOSEHeader
        /// The decoded payload bytes.
        public var payload: [UInt8]
        /// `ASCII(base64url(header) "." base64url(payload))`: the bytes the signature covers.
        public var signingInput: [UInt8]
        /// The decoded signature bytes.
        public var signature: [UInt8]
    }

    /// Tokens longer than this many characters are rejected before any decoding.
    public static let maximumTokenLength = 16 * 1024

    /// Signs `payload` with ES256 under `header` (whose `alg` must be `"ES256"`); returns the
    /// compact serialization. The header is serialised with sorted keys.
    ///
    /// - Throws: ``CryptoError/Code/algorithmMismatch`` when `header.alg` is not `"ES256"`.
    public static func signES256(
        header: JOSEHeader,
        payload: [UInt8],
        key: ES256PrivateKey
    ) throws(CryptoError) -> String {
        guard header.alg == JWSAlgorithm.es256.rawValue else {
            throw CryptoError(
                code: .algorithmMismatch,
                message: "an ES256 signature needs alg ES256, not \(header.alg)"
            )
        }
        let signingInput = Base64URL.encode(Array(header.json.utf8)) + "." + Base64URL.encode(payload)
        let signature = try key.signature(for: Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// Signs `payload` with ES256 under the header `{"alg":"ES256","kid":kid,"typ":typ}`.
    public static func signES256(
        payload: [UInt8],
        key: ES256PrivateKey,
        kid: String? = nil,
        typ: String? = nil
    ) throws(CryptoError) -> String {
        try self.signES256(
            header: JOSEHeader(alg: JWSAlgorithm.es256.rawValue, kid: kid, typ: typ),
            payload: payload,
            key: key
        )
    }

    /// Splits and decodes a compact JWS **without verifying it** (for example to read `kid`
    /// before choosing a key). Never trust the result before ``verify(_:expectedAlgorithm:key:)-(Parts,_,_)``.
    ///
    /// - Throws: ``CryptoError/Code/malformedToken`` unless the token has exactly three segments,
    ///   each strict base64url, the header is a non-empty JSON object with a string `alg` and no
    ///   member named twice, and no `crit` member is present.
    public static func parse(_ token: String) throws(CryptoError) -> Parts {
        func malformed(_ why: String) -> CryptoError {
            CryptoError(code: .malformedToken, message: "malformed JWS: \(why)")
        }
        let bytes = Array(token.utf8)
        guard bytes.count <= self.maximumTokenLength else { throw malformed("longer than \(self.maximumTokenLength)") }
        let segments = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard segments.count == 3 else { throw malformed("expected 3 segments, found \(segments.count)") }
        guard !segments[0].isEmpty else { throw malformed("empty header") }
        guard let headerJSON = Base64URL.decode(segments[0]) else { throw malformed("header is not base64url") }
        guard let payload = Base64URL.decode(segments[1]) else { throw malformed("payload is not base64url") }
        guard let signature = Base64URL.decode(segments[2]) else { throw malformed("signature is not base64url") }

        // RFC 7515 §4: a header naming one member twice must be rejected (or read last-wins;
        // rejecting is the only reading every library agrees with). One strict pass.
        guard case .object(let members)? = try? JSONValue.parseRefusingRepeatedMembers(headerJSON, maxDepth: 16) else {
            throw malformed("header is not a JSON object without repeated members")
        }
        guard let header = JOSEHeader(members) else {
            throw malformed("header is not a JSON object with a string alg")
        }
        guard header.crit == nil else { throw malformed("unsupported critical header parameters") }

        let signingInputCount = segments[0].count + 1 + segments[1].count
        return Parts(
            headerJSON: headerJSON,
            header: header,
            payload: payload,
            signingInput: Array(bytes[0..<signingInputCount]),
            signature: signature
        )
    }

    /// Verifies a compact JWS and returns its payload.
    ///
    /// The header's `alg` must equal `expectedAlgorithm` and the key must be a key for that
    /// algorithm: the token never chooses the algorithm, so `alg: none` and the "HS256 keyed
    /// with the public key" confusion fail.
    ///
    /// - Throws: ``CryptoError/Code/malformedToken`` (see ``parse(_:)``),
    ///   ``CryptoError/Code/algorithmMismatch``, ``CryptoError/Code/invalidSignature``.
    public static func verify(
        _ token: String,
        expectedAlgorithm: JWSAlgorithm,
        key: some JWSVerificationKey
    ) throws(CryptoError) -> [UInt8] {
        try self.verify(try self.parse(token), expectedAlgorithm: expectedAlgorithm, key: key)
    }

    /// Verifies an already parsed JWS (from ``parse(_:)``) and returns its payload. Same checks as
    /// ``verify(_:expectedAlgorithm:key:)-(String,_,_)``.
    public static func verify(
        _ parts: Parts,
        expectedAlgorithm: JWSAlgorithm,
        key: some JWSVerificationKey
    ) throws(CryptoError) -> [UInt8] {
        guard parts.header.alg == expectedAlgorithm.rawValue else {
            throw CryptoError(
                code: .algorithmMismatch,
                message: "JWS alg \(parts.header.alg.prefix(32)) is not the expected \(expectedAlgorithm)"
            )
        }
        guard key.jwsAlgorithm == expectedAlgorithm else {
            throw CryptoError(
                code: .algorithmMismatch,
                message: "a \(key.jwsAlgorithm) key cannot verify \(expectedAlgorithm)"
            )
        }
        guard key.isValidSignature(parts.signature, for: parts.signingInput) else {
            throw CryptoError(code: .invalidSignature, message: "JWS signature does not verify")
        }
        return parts.payload
    }
}
