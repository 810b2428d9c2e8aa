import AuthCrypto
import AuthText
import Hummingbird
import Logging

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension DevOAuthProvider {
    /// How long an authorization code can be redeemed.
    static let codeLifetime = Duration.seconds(60)
    /// `expires_in` of access tokens.
    static let accessTokenLifetime = 3600
    /// Between `iat` and `exp` of ID tokens.
    static let idTokenLifetime = 600
    /// Who signs in when `login_hint` names nobody.
    static let defaultEmail = "dev.user@example.com"
    /// Form bodies larger than this are refused.
    static let maximumBodySize = 64 * 1024

    // MARK: Dispatch

    func respond(to request: Request) async throws -> Response {
        let body = try await request.body.collect(upTo: Self.maximumBodySize)
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName] = field.value }
        let isForm =
            headers["content-type"]?.lowercased().hasPrefix("application/x-www-form-urlencoded") ?? false
        let received = Received(
            method: request.method.rawValue,
            path: request.uri.path,
            query: FormURLEncoding.decode(form: request.uri.query ?? ""),
            form: isForm ? FormURLEncoding.decode(form: String(decoding: body.readableBytesView, as: UTF8.self)) : [:],
            headers: headers
        )
        state.withLock { $0.record(received) }

        let segments = received.path.split(separator: "/")
        guard let first = segments.first, let provider = Provider(rawValue: String(first)) else {
            return Self.notFound()
        }
        let endpoint = segments.dropFirst().joined(separator: "/")
        switch (received.method, endpoint) {
        case ("GET", ".well-known/openid-configuration") where provider != .facebook:
            return discovery(provider)
        case ("GET", "jwks") where provider != .facebook:
            return Self.json(.ok, JWKSet(keys: [signingKey.publicKey.jwk(kid: signingKeyID)]))
        case ("GET", "authorize"):
            return authorize(provider, received.query)
        case ("POST", "token"):
            return await token(provider, received.form, headers: headers)
        case ("GET", "token") where provider == .facebook:
            return await token(provider, received.query, headers: headers)
        case ("GET", "me") where provider == .facebook:
            return graphMe(received.query, headers: headers)
        case ("GET", _) where provider == .facebook && Self.isVersionedMe(segments.dropFirst()):
            return graphMe(received.query, headers: headers)
        default:
            return Self.notFound()
        }
    }

    /// `v19.0/me`: the Graph API takes a version before the path.
    private static func isVersionedMe(_ segments: ArraySlice<Substring>) -> Bool {
        segments.count == 2 && segments.first!.hasPrefix("v") && segments.last == "me"
    }

    // MARK: Discovery

    private struct DiscoveryDocument: Encodable {
        var issuer: String
        var authorizationEndpoint: String
        var tokenEndpoint: String
        var jwksURI: String
        var responseTypesSupported = ["code"]
        var subjectTypesSupported = ["public"]
        var idTokenSigningAlgValuesSupported = ["ES256"]
        var codeChallengeMethodsSupported: [String]?

        enum CodingKeys: String, CodingKey {
            case issuer
            case authorizationEndpoint = "authorization_endpoint"
            case tokenEndpoint = "token_endpoint"
            case jwksURI = "jwks_uri"
            case responseTypesSupported = "response_types_supported"
            case subjectTypesSupported = "subject_types_supported"
            case idTokenSigningAlgValuesSupported = "id_token_signing_alg_values_supported"
            case codeChallengeMethodsSupported = "code_challenge_methods_supported"
        }
    }

    private func discovery(_ provider: Provider) -> Response {
        let issuer = issuer(provider)
        let document = DiscoveryDocument(
            issuer: issuer,
            authorizationEndpoint: issuer + "/authorize",
            tokenEndpoint: issuer + "/token",
            jwksURI: issuer + "/jwks",
            // Apple's document names no PKCE method.
            codeChallengeMethodsSupported: provider == .google ? ["S256"] : nil
        )
        return Self.json(.ok, document)
    }

    // MARK: Authorization

    private func authorize(_ provider: Provider, _ query: [String: String]) -> Response {
        // A bad client or redirect URI gets an error page, never a redirect (RFC 6749 §4.1.2.1).
        guard query["client_id"] == configuration.clientID(for: provider) else {
            return refusedPage(provider, "client_id is missing or not a client of this provider")
        }
        guard let redirectURI = query["redirect_uri"], !redirectURI.isEmpty else {
            return refusedPage(provider, "redirect_uri is missing")
        }
        guard query["response_type"] == "code" else {
            return refusedPage(provider, "response_type must be code")
        }
        let formPost: Bool
        switch query["response_mode"] {
        case nil, "query": formPost = false
        case "form_post": formPost = true
        default: return refusedPage(provider, "response_mode must be query or form_post")
        }
        let stateField = query["state"].map { [(name: "state", value: $0)] } ?? []

        func answer(_ fields: [(name: String, value: String)]) -> Response {
            if formPost {
                return Response(
                    status: .ok,
                    headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
                    body: ResponseBody(
                        byteBuffer: ByteBuffer(string: FormPostPage.render(action: redirectURI, fields: fields))
                    )
                )
            }
            return Response(
                status: .found,
                headers: [.location: FormURLEncoding.appending(fields, to: redirectURI), .cacheControl: "no-store"]
            )
        }

        if query["login_hint"] == "deny" {
            logger.info("authorization denied (login_hint=deny)", metadata: [LogKey.provider: "\(provider.rawValue)"])
            if formPost && provider == .apple {
                return answer([(name: "error", value: "user_cancelled_authorize")] + stateField)
            }
            return answer(
                [
                    (name: "error", value: "access_denied"),
                    (name: "error_description", value: "The user denied the request"),
                ]
                    + stateField
            )
        }
        let challenge = query["code_challenge"]
        if challenge != nil, query["code_challenge_method"] != "S256" {
            logger.notice(
                "authorization refused: code_challenge_method is not S256",
                metadata: [LogKey.provider: "\(provider.rawValue)"]
            )
            return answer(
                [
                    (name: "error", value: "invalid_request"),
                    (name: "error_description", value: "code_challenge_method must be S256"),
                ]
                    + stateField
            )
        }

        let person = Self.person(loginHint: query["login_hint"])
        let code = Base64URL.encode(SecureRandom.bytes(count: 24))
        let now = ContinuousClock.now
        let pending = PendingCode(
            provider: provider,
            clientID: configuration.clientID(for: provider),
            redirectURI: redirectURI,
            nonce: query["nonce"],
            codeChallenge: challenge,
            codeChallengeMethod: challenge == nil ? nil : "S256",
            person: person,
            expiresAt: now + Self.codeLifetime
        )
        let firstConsent = state.withLock { state in
            state.insertCode(code, pending, now: now)
            return state.recordConsent(provider: provider, clientID: pending.clientID, subject: person.subject)
        }
        logger.info(
            "authorized",
            metadata: [LogKey.provider: "\(provider.rawValue)", LogKey.subject: "\(person.subject)"]
        )
        var fields = [(name: "code", value: code)] + stateField
        if formPost && firstConsent {
            fields.append((name: "user", value: Self.appleUserJSON(email: person.email)))
        }
        return answer(fields)
    }

    /// The person `login_hint` names when it is an email address, else the default person.
    static func person(loginHint: String?) -> DevPerson {
        let email = loginHint.flatMap { isEmailAddress($0) ? $0 : nil } ?? defaultEmail
        let digest = Hex.lowercase(SHA256.hash(email.lowercased()))
        return DevPerson(subject: "dev-" + digest.prefix(16), email: email)
    }

    private static func isEmailAddress(_ text: String) -> Bool {
        let parts = text.split(separator: "@", omittingEmptySubsequences: false)
        return parts.count == 2 && !parts[0].isEmpty && !parts[1].isEmpty
            && !text.unicodeScalars.contains { $0.properties.isWhitespace || $0.value < 0x20 }
    }

    /// The `user` Apple posts on a person's first consent: their name and email.
    private static func appleUserJSON(email: String) -> String {
        struct Name: Encodable {
            var firstName = "Dev"
            var lastName = "User"
        }
        struct User: Encodable {
            var name = Name()
            var email: String
        }
        return String(decoding: encode(User(email: email)), as: UTF8.self)
    }

    private func refusedPage(_ provider: Provider, _ problem: String) -> Response {
        logger.notice("authorization refused: \(problem)", metadata: [LogKey.provider: "\(provider.rawValue)"])
        return Response(
            status: .badRequest,
            headers: [.contentType: "text/plain; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: "Error 400: invalid_request\n\(problem)\n"))
        )
    }

    // MARK: Token

    private struct TokenResponse: Encodable {
        var accessToken: String
        var tokenType = "Bearer"
        var expiresIn = DevOAuthProvider.accessTokenLifetime
        var idToken: String?

        enum CodingKeys: String, CodingKey {
            case accessToken = "access_token"
            case tokenType = "token_type"
            case expiresIn = "expires_in"
            case idToken = "id_token"
        }
    }

    private struct OAuthError: Encodable {
        var error: String
        var errorDescription: String?

        enum CodingKeys: String, CodingKey {
            case error
            case errorDescription = "error_description"
        }
    }

    private func token(
        _ provider: Provider,
        _ parameters: [String: String],
        headers: [String: String]
    ) async -> Response {
        if let delay = state.withLock({ $0.tokenDelay }) {
            // Cancelled when the server stops; then answer at once.
            try? await Task.sleep(for: delay)
        }
        func refuse(_ status: HTTPResponse.Status, _ error: String, _ description: String?, log: String) -> Response {
            logger.notice("token request refused: \(log)", metadata: [LogKey.provider: "\(provider.rawValue)"])
            return Self.json(status, OAuthError(error: error, errorDescription: description), noStore: true)
        }

        let (clientID, secret) = Self.clientCredentials(provider, parameters, headers: headers)
        if let problem = clientProblem(provider, clientID: clientID, secret: secret) {
            return refuse(.unauthorized, "invalid_client", nil, log: problem)
        }
        guard parameters["grant_type"] == "authorization_code" else {
            return refuse(.badRequest, "unsupported_grant_type", nil, log: "grant_type is not authorization_code")
        }
        let now = ContinuousClock.now
        guard let code = parameters["code"], let pending = state.withLock({ $0.redeemCode(code, now: now) }) else {
            return refuse(.badRequest, "invalid_grant", nil, log: "the code is unknown, spent or expired")
        }
        guard pending.provider == provider, pending.clientID == clientID,
            pending.redirectURI == parameters["redirect_uri"]
        else {
            return refuse(
                .badRequest,
                "invalid_grant",
                nil,
                log: "the code was issued to another client or redirect_uri"
            )
        }
        if let challenge = pending.codeChallenge {
            guard let verifier = parameters["code_verifier"],
                PKCE.challenge(of: verifier) == challenge
            else {
                return refuse(.badRequest, "invalid_grant", "PKCE verification failed", log: "PKCE verification failed")
            }
        }

        let accessToken = Base64URL.encode(SecureRandom.bytes(count: 32))
        state.withLock { state in
            state.insertToken(
                accessToken,
                IssuedToken(
                    provider: provider,
                    person: pending.person,
                    expiresAt: now + .seconds(Self.accessTokenLifetime)
                ),
                now: now
            )
        }
        var response = TokenResponse(accessToken: accessToken)
        if provider != .facebook {
            do {
                response.idToken = try idToken(provider, pending)
            } catch {
                logger.error("cannot sign an ID token: \(error)")
                return Self.json(.internalServerError, OAuthError(error: "server_error"), noStore: true)
            }
        }
        logger.info(
            "tokens issued",
            metadata: [LogKey.provider: "\(provider.rawValue)", LogKey.subject: "\(pending.person.subject)"]
        )
        return Self.json(.ok, response, noStore: true)
    }

    /// The client ID and secret of a token request: form (or query) parameters, or for Google
    /// HTTP Basic (`client_secret_basic`) as well.
    private static func clientCredentials(
        _ provider: Provider,
        _ parameters: [String: String],
        headers: [String: String]
    ) -> (id: String?, secret: String?) {
        if provider == .google, parameters["client_id"] == nil, let authorization = headers["authorization"],
            authorization.lowercased().hasPrefix("basic "),
            let decoded = Base64.decode(trimmingSpaces(authorization.dropFirst(6))),
            let colon = decoded.firstIndex(of: UInt8(ascii: ":"))
        {
            // RFC 6749 §2.3.1: both halves are form-encoded before being joined.
            return (
                FormURLEncoding.decode(String(decoding: decoded[..<colon], as: UTF8.self)),
                FormURLEncoding.decode(String(decoding: decoded[(colon + 1)...], as: UTF8.self))
            )
        }
        return (parameters["client_id"], parameters["client_secret"])
    }

    /// Why the client is not authenticated; nil when it is.
    private func clientProblem(_ provider: Provider, clientID: String?, secret: String?) -> String? {
        guard let clientID, clientID == configuration.clientID(for: provider) else {
            return "client_id is missing or unknown"
        }
        guard let secret, !secret.isEmpty else { return "client_secret is missing" }
        switch provider {
        case .google, .facebook:
            let expected = provider == .google ? configuration.googleClientSecret : configuration.facebookClientSecret
            return ConstantTime.equals(Array(secret.utf8), Array(expected.utf8)) ? nil : "the client secret is wrong"
        case .apple:
            return AppleClientSecret.problem(
                with: secret,
                configuration: configuration,
                now: Date().timeIntervalSince1970
            )
        }
    }

    private struct IDTokenClaims: Encodable {
        enum Verified: Encodable {
            case bool
            case string

            func encode(to encoder: any Encoder) throws {
                var container = encoder.singleValueContainer()
                switch self {
                case .bool: try container.encode(true)
                case .string: try container.encode("true")
                }
            }
        }

        var iss: String
        var aud: String
        var sub: String
        var email: String
        var emailVerified: Verified
        var iat: Int64
        var exp: Int64
        var jti: String
        var nonce: String?
        var name: String?

        enum CodingKeys: String, CodingKey {
            case iss, aud, sub, email, iat, exp, jti, nonce, name
            case emailVerified = "email_verified"
        }
    }

    /// An ID token as a provider's native SDK hands it to an app (Sign in with Google or Apple
    /// on the device, no redirect): `email`'s person, audience `clientID`, `nonce` as given
    /// (the app's choice: raw, or hex SHA-256 of its raw nonce). Signed with the key of this
    /// provider's JWK Set.
    public func nativeIDToken(
        _ provider: Provider,
        email: String,
        clientID: String,
        nonce: String?
    ) throws(CryptoError) -> String {
        try idToken(
            provider,
            PendingCode(
                provider: provider,
                clientID: clientID,
                redirectURI: "",
                nonce: nonce,
                codeChallenge: nil,
                codeChallengeMethod: nil,
                person: Self.person(loginHint: email),
                expiresAt: .now
            )
        )
    }

    private func idToken(_ provider: Provider, _ pending: PendingCode) throws(CryptoError) -> String {
        let now = Int64(Date().timeIntervalSince1970)
        let claims = IDTokenClaims(
            iss: issuer(provider),
            aud: pending.clientID,
            sub: pending.person.subject,
            email: pending.person.email,
            // Apple writes the boolean as a string.
            emailVerified: provider == .apple ? .string : .bool,
            iat: now,
            exp: now + Int64(Self.idTokenLifetime),
            jti: Base64URL.encode(SecureRandom.bytes(count: 16)),
            nonce: pending.nonce,
            name: provider == .google ? "Dev User" : nil
        )
        return try JWS.signES256(payload: Self.encode(claims), key: signingKey, kid: signingKeyID, typ: "JWT")
    }

    // MARK: Facebook Graph

    private struct GraphError: Encodable {
        struct Body: Encodable {
            var message = "Invalid OAuth access token."
            var type = "OAuthException"
            var code = 190
        }
        var error = Body()
    }

    private func graphMe(_ query: [String: String], headers: [String: String]) -> Response {
        var token = query["access_token"]
        if token == nil, let authorization = headers["authorization"], authorization.lowercased().hasPrefix("bearer ") {
            token = Self.trimmingSpaces(authorization.dropFirst(7))
        }
        func refuse(_ problem: String) -> Response {
            logger.notice("Graph request refused: \(problem)", metadata: [LogKey.provider: "facebook"])
            return Self.json(.badRequest, GraphError())
        }
        guard let token, let issued = state.withLock({ $0.token(token, now: .now) }), issued.provider == .facebook
        else { return refuse("the access token is unknown or expired") }
        let expectedProof = Hex.lowercase(
            HMACSHA256.authenticationCode(for: Array(token.utf8), key: Array(configuration.facebookClientSecret.utf8))
        )
        guard let proof = query["appsecret_proof"], ConstantTime.equals(Array(proof.utf8), Array(expectedProof.utf8))
        else { return refuse("appsecret_proof is missing or wrong") }

        let fields = (query["fields"] ?? "id,name").split(separator: ",").map(Self.trimmingSpaces)
        var answer: [String: String] = [:]
        for field in fields {
            switch field {
            case "id": answer["id"] = issued.person.subject
            case "name": answer["name"] = "Dev User"
            case "email": answer["email"] = issued.person.email
            default: continue
            }
        }
        return Self.json(.ok, answer)
    }

    // MARK: Responses

    enum LogKey {
        static let provider = "dev_provider.provider"
        static let subject = "dev_provider.subject"
        static let url = "dev_provider.url"
    }

    static func encode(_ value: some Encodable) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Only this file's types are encoded: strings, numbers and arrays of them.
        return Array((try? encoder.encode(value)) ?? Data("{}".utf8))
    }

    private static func json(_ status: HTTPResponse.Status, _ value: some Encodable, noStore: Bool = false) -> Response
    {
        var headers: HTTPFields = [.contentType: "application/json"]
        if noStore { headers[.cacheControl] = "no-store" }
        return Response(
            status: status,
            headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: encode(value)))
        )
    }

    private static func trimmingSpaces(_ text: Substring) -> String {
        String(text.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }

    private static func notFound() -> Response {
        Response(
            status: .notFound,
            headers: [.contentType: "text/plain; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: "Not Found\n"))
        )
    }
}
