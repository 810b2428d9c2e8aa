/// Who signs in at the provider.
struct DevPerson: Sendable, Equatable {
    /// `dev-` and the first 16 hex digits of SHA-256 of the lower-cased email: stable per email.
    var subject: String
    var email: String
}

/// What an authorization code stands for until it is redeemed.
struct PendingCode: Sendable {
    var provider: DevOAuthProvider.Provider
    var clientID: String
    var redirectURI: String
    var nonce: String?
    var codeChallenge: String?
    var codeChallengeMethod: String?
    var person: DevPerson
    var expiresAt: ContinuousClock.Instant
}

/// What an access token stands for (Facebook's Graph reads it back).
struct IssuedToken: Sendable {
    var provider: DevOAuthProvider.Provider
    var person: DevPerson
    var expiresAt: ContinuousClock.Instant
}

/// Everything the provider remembers, behind its one `Mutex`. Pure: the time is passed in, so
/// expiry and bounds are tested without a server or sleeping.
struct ProviderState: Sendable {
    /// At most this many codes, tokens, consents and recorded requests are kept.
    static let capacity = 10_000

    private(set) var codes: [String: PendingCode] = [:]
    private(set) var tokens: [String: IssuedToken] = [:]
    private var consents: Set<String> = []
    private var lastCodePurge: ContinuousClock.Instant?
    private var lastTokenPurge: ContinuousClock.Instant?
    /// The most recent requests, oldest first.
    private(set) var requests: [DevOAuthProvider.Received] = []
    var tokenDelay: Duration?

    mutating func record(_ request: DevOAuthProvider.Received) {
        if requests.count >= Self.capacity { requests.removeFirst(requests.count - Self.capacity + 1) }
        requests.append(request)
    }

    /// Keeps `pending` under `code`. Expired codes are dropped (at most once a second, as that
    /// walks them all, and whenever the map is full); when `capacity` live codes remain, the one
    /// closest to expiring goes (its sign-in fails as if it had expired).
    mutating func insertCode(_ code: String, _ pending: PendingCode, now: ContinuousClock.Instant) {
        Self.makeRoom(in: &codes, lastPurge: &lastCodePurge, now: now) { $0.expiresAt }
        codes[code] = pending
    }

    /// The code's meaning, which it loses: a code is spent on its first presentation, whatever
    /// the checks after this one decide. nil when unknown, spent or expired.
    mutating func redeemCode(_ code: String, now: ContinuousClock.Instant) -> PendingCode? {
        guard let pending = codes.removeValue(forKey: code), pending.expiresAt > now else { return nil }
        return pending
    }

    /// Keeps `issued` under `token`, bounded as codes are.
    mutating func insertToken(_ token: String, _ issued: IssuedToken, now: ContinuousClock.Instant) {
        Self.makeRoom(in: &tokens, lastPurge: &lastTokenPurge, now: now) { $0.expiresAt }
        tokens[token] = issued
    }

    private static func makeRoom<Value>(
        in map: inout [String: Value],
        lastPurge: inout ContinuousClock.Instant?,
        now: ContinuousClock.Instant,
        expiresAt: (Value) -> ContinuousClock.Instant
    ) {
        if map.count >= capacity || lastPurge.map({ now - $0 >= .seconds(1) }) ?? true {
            map = map.filter { expiresAt($0.value) > now }
            lastPurge = now
        }
        if map.count >= capacity, let soonest = map.min(by: { expiresAt($0.value) < expiresAt($1.value) }) {
            map[soonest.key] = nil
        }
    }

    /// The live token's meaning; nil when unknown or expired.
    func token(_ token: String, now: ContinuousClock.Instant) -> IssuedToken? {
        guard let issued = tokens[token], issued.expiresAt > now else { return nil }
        return issued
    }

    /// Records that `subject` consented to `clientID` at `provider`; true the first time (Apple
    /// sends the person's name only then).
    mutating func recordConsent(provider: DevOAuthProvider.Provider, clientID: String, subject: String) -> Bool {
        let key = "\(provider.rawValue) \(clientID) \(subject)"
        if consents.contains(key) { return false }
        // A development server that has seen this many people may forget them all: they are
        // then asked for their name again, as after revoking the app at Apple.
        if consents.count >= Self.capacity { consents.removeAll() }
        consents.insert(key)
        return true
    }
}
