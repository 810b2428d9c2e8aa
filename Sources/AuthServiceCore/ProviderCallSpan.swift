import Tracing

/// The trace span of a call to an outside provider (an SMS or email provider, an OIDC
/// provider's keys or token endpoint): a `client` span named `<provider> <method>`, with the
/// provider, the HTTP method, the server's host and the answer's status, and never the URL's
/// path or query (a webhook URL may carry a credential there).
///
/// The services' HTTP clients are made without async-http-client's own tracing, which records
/// the full URL and sends the trace context to the provider.
public enum ProviderCallSpan {
    public static func run<Result>(
        provider: String,
        method: String,
        host: String?,
        _ call: () async throws -> (Result, status: Int)
    ) async throws -> Result {
        try await withSpan("\(provider) \(method)", ofKind: .client) { span in
            span.attributes["auth.provider"] = provider
            span.attributes["http.request.method"] = method
            span.attributes["server.address"] = host
            let (result, status) = try await call()
            span.attributes["http.response.status_code"] = status
            if status >= 500 { span.setStatus(SpanStatus(code: .error)) }
            return result
        }
    }
}
