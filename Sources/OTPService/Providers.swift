import AsyncHTTPClient
import AuthCrypto
import AuthProtobuf
import AuthServiceCore
import AuthText
import AuthTime
import Logging
import NIOCore
import NIOHTTP1

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `log`: writes the message to the service log instead of sending it (local runs; the code
/// is in the line, so never use it in production).
public struct LogProvider: MessageProvider {
    public let name = "log"
    let logger: Logger

    public init(logger: Logger) {
        self.logger = logger
    }

    public func send(_ message: OutgoingMessage) async throws -> ProviderReceipt {
        var metadata: Logger.Metadata = [
            "otp.message_id": "\(message.id)", "otp.channel": "\(message.channel.rawValue)", "otp.to": "\(message.to)",
            "otp.body": "\(message.text.body)",
        ]
        if let subject = message.text.subject { metadata["otp.subject"] = "\(subject)" }
        logger.notice("OTP message (log provider: not sent)", metadata: metadata)
        return ProviderReceipt()
    }
}

/// Sends an HTTP request with a timeout and classifies the outcome: 2xx is success; 408, 429
/// and 5xx, timeouts and connection errors are retryable; any other status is not.
struct ProviderHTTP: Sendable {
    let client: HTTPClient
    let timeout: Duration

    func send(_ request: HTTPClientRequest, provider: String) async throws -> (HTTPResponseStatus, ByteBuffer) {
        try await ProviderCallSpan.run(
            provider: provider,
            method: request.method.rawValue,
            host: URL(string: request.url)?.host
        ) {
            let answer = try await sendUntraced(request, provider: provider)
            return (answer, Int(answer.0.code))
        }
    }

    private func sendUntraced(
        _ request: HTTPClientRequest,
        provider: String
    ) async throws -> (HTTPResponseStatus, ByteBuffer) {
        let response: HTTPClientResponse
        do {
            response = try await client.execute(request, timeout: .nanoseconds(Int64(timeout.timeInterval * 1e9)))
        } catch {
            throw ProviderError(retryable: true, "\(provider): request failed: \(Self.describe(error))")
        }
        let body: ByteBuffer
        do {
            body = try await response.body.collect(upTo: 64 * 1024)
        } catch {
            throw ProviderError(retryable: true, "\(provider): reading the response failed: \(Self.describe(error))")
        }
        let code = response.status.code
        if (200..<300).contains(code) { return (response.status, body) }
        let retryable = code == 408 || code == 429 || code >= 500
        throw ProviderError(retryable: retryable, "\(provider): HTTP \(code)")
    }

    static func describe(_ error: any Error) -> String {
        String("\(error)".prefix(200))
    }
}

/// `webhook`: POSTs the message as JSON to `AUTH_OTP_WEBHOOK_URL`, signed with HMAC-SHA256
/// over the exact request body in `X-Auth-Signature: sha256=<hex>`, the key being the UTF-8
/// bytes of `AUTH_OTP_WEBHOOK_SECRET`. Any 2xx answer is delivered (docs/otp.md has the
/// payload and a verification example for receivers).
public struct WebhookProvider: MessageProvider {
    public let name = "webhook"
    let url: String
    let signer: HMACSHA256
    let http: ProviderHTTP

    init(url: String, secret: String, http: ProviderHTTP) {
        self.url = url
        self.signer = HMACSHA256(key: Array(secret.utf8))
        self.http = http
    }

    /// The exact bytes POSTed: a JSON object, members sorted by name, no insignificant
    /// whitespace, `subject` and `link` left out when absent, strings escaped as `JSONEncoder`
    /// escapes them with `.withoutEscapingSlashes` (written by hand: `JSONEncoder` was 3 % of
    /// otp-dispatch's CPU per sign-in, issue 24). docs/otp.md lists the members.
    static func body(of message: OutgoingMessage) -> [UInt8] {
        var json = "{"
        func member(_ name: String, _ value: String?) {
            guard let value else { return }
            if json.utf8.count > 1 { json += "," }
            JSONText.appendString(name, to: &json)
            json += ":"
            JSONText.appendString(value, to: &json)
        }
        member("body", message.text.body)
        member("channel", message.channel.rawValue)
        member("code", message.code)
        member("created_at", RFC3339.string(message.createdAt))
        member("expires_at", RFC3339.string(message.expiresAt))
        member("id", message.id.uuidString.lowercased())
        member("link", message.link)
        member("locale", message.locale)
        member("purpose", message.purpose)
        member("subject", message.text.subject)
        member("to", message.to)
        json += "}"
        return Array(json.utf8)
    }

    public func send(_ message: OutgoingMessage) async throws -> ProviderReceipt {
        let body = Self.body(of: message)
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "auth-otp-dispatch/1")
        request.headers.add(name: WebhookSignature.headerName, value: WebhookSignature.value(for: body, signer: signer))
        request.body = .bytes(ByteBuffer(bytes: body))
        _ = try await http.send(request, provider: name)
        return ProviderReceipt(providerMessageID: message.id.uuidString.lowercased())
    }
}

/// `twilio`: Twilio Programmable Messaging, `POST {base}/2010-04-01/Accounts/{sid}/Messages.json`
/// with a form body (`To`, `From` or `MessagingServiceSid`, `Body`) and HTTP basic auth
/// (account SID, auth token). 201 with the message's `sid` is success; 429 and 5xx are retried.
public struct TwilioProvider: MessageProvider {
    public let name = "twilio"
    let baseURL: String
    let accountSID: String
    let authToken: String
    let from: String
    /// Sent as `StatusCallback` when set.
    let statusCallbackURL: String?
    let http: ProviderHTTP

    init(
        baseURL: String,
        accountSID: String,
        authToken: String,
        from: String,
        statusCallbackURL: String? = nil,
        http: ProviderHTTP
    ) {
        self.baseURL = baseURL
        self.accountSID = accountSID
        self.authToken = authToken
        self.from = from
        self.statusCallbackURL = statusCallbackURL
        self.http = http
    }

    /// The `X-Twilio-Signature` of a request Twilio made to `url` with the form `parameters`:
    /// base64 of HMAC-SHA1 under the auth token of `url` followed by each parameter's name and
    /// value, sorted by name (then value).
    static func signature(url: String, parameters: [(name: String, value: String)], authToken: String) -> String {
        let sorted = parameters.sorted { $0.name != $1.name ? $0.name < $1.name : $0.value < $1.value }
        let data = url + sorted.map { $0.name + $0.value }.joined()
        return Base64.encode(HMACSHA1.authenticationCode(for: Array(data.utf8), key: Array(authToken.utf8)))
    }

    /// `application/x-www-form-urlencoded` body: every byte of the UTF-8 text but RFC 3986's
    /// unreserved ASCII (`A–Z a–z 0–9 - . _ ~`) is percent-encoded.
    static func formEncode(_ fields: [(String, String)]) -> String {
        FormURLEncoding.encode(fields.map { (name: $0.0, value: $0.1) })
    }

    public func send(_ message: OutgoingMessage) async throws -> ProviderReceipt {
        guard message.channel == .sms else {
            throw ProviderError(retryable: false, "twilio: sends SMS only")
        }
        let sender = from.hasPrefix("MG") ? ("MessagingServiceSid", from) : ("From", from)
        var fields = [("To", message.to), sender, ("Body", message.text.body)]
        if let statusCallbackURL { fields.append(("StatusCallback", statusCallbackURL)) }
        let form = Self.formEncode(fields)
        var request = HTTPClientRequest(url: "\(baseURL)/2010-04-01/Accounts/\(accountSID)/Messages.json")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "Accept", value: "application/json")
        request.headers.add(
            name: "Authorization",
            value: "Basic " + Base64.encode(Array("\(accountSID):\(authToken)".utf8))
        )
        request.body = .bytes(ByteBuffer(string: form))
        let (_, body) = try await http.send(request, provider: name)
        guard case .object(let json)? = try? JSONValue.parse(Array(body.readableBytesView)) else {
            return ProviderReceipt(providerMessageID: nil)
        }
        return ProviderReceipt(providerMessageID: json["sid"]?.stringValue)
    }
}

/// Builds the providers the configuration names, sharing one HTTP client (call
/// ``shutdown()`` when done).
public final class ProviderFactory: Sendable {
    public let httpClient: HTTPClient
    let configuration: OTPServiceConfiguration
    let logger: Logger

    public init(configuration: OTPServiceConfiguration, logger: Logger) {
        var httpConfiguration = HTTPClient.Configuration()
        // Traced by ProviderCallSpan, without the URL.
        httpConfiguration.tracing.tracer = nil
        let timeout = TimeAmount.nanoseconds(Int64(configuration.httpTimeout.timeInterval * 1e9))
        httpConfiguration.timeout = HTTPClient.Configuration.Timeout(connect: timeout, read: timeout)
        httpConfiguration.redirectConfiguration = .disallow
        // As many kept-alive connections per provider host as sends may run at once: past the
        // pool's soft limit (8 by default) async-http-client opens a connection per request and
        // closes it after the answer, a TCP (and, to a real provider, TLS) handshake per message.
        httpConfiguration.connectionPool = .init(
            idleTimeout: .seconds(60),
            concurrentHTTP1ConnectionsPerHostSoftLimit: configuration.providerConcurrency
        )
        self.httpClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: httpConfiguration)
        self.configuration = configuration
        self.logger = logger
    }

    public func provider(_ kind: ProviderKind) -> any MessageProvider {
        let http = ProviderHTTP(client: httpClient, timeout: configuration.httpTimeout)
        switch kind {
        case .log:
            return LogProvider(logger: logger)
        case .webhook:
            return WebhookProvider(
                url: configuration.webhookURL ?? "",
                secret: configuration.webhookSecret ?? "",
                http: http
            )
        case .twilio:
            return TwilioProvider(
                baseURL: configuration.twilioBaseURL,
                accountSID: configuration.twilioAccountSID ?? "",
                authToken: configuration.twilioAuthToken ?? "",
                from: configuration.twilioFrom ?? "",
                statusCallbackURL: configuration.twilioStatusCallbackURL,
                http: http
            )
        }
    }

    /// The configured providers of both channels.
    public func providerSet() -> ProviderSet {
        ProviderSet(
            sms: configuration.providers(for: .sms).map(provider),
            email: configuration.providers(for: .email).map(provider)
        )
    }

    public func shutdown() async {
        try? await httpClient.shutdown()
    }
}
