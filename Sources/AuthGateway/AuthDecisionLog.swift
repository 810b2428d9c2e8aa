import AuthText
import HTTPTypes
import Hummingbird
import Logging
import Synchronization

/// What a route tells the decision log about the request it serves: whose contact (masked),
/// which method, which user. Set by the routes through ``record(contact:masked:method:userID:)``
/// while ``AuthDecisionMiddleware`` serves them; never a password, code or token.
final class AuthDecisionNote: Sendable {
    struct Facts: Sendable {
        var contact: String?
        var method: String?
        var userID: String?
    }

    let facts = Mutex(Facts())

    @TaskLocal static var current: AuthDecisionNote?

    /// Adds what is given to the current request's note (nothing outside a request).
    /// - Parameters:
    ///   - contact: a phone number or an email address in clear: it is masked here.
    ///   - masked: one already masked (as otp-dispatch answers it).
    static func record(contact: String? = nil, masked: String? = nil, method: String? = nil, userID: String? = nil) {
        guard let note = current else { return }
        note.facts.withLock { facts in
            if let contact { facts.contact = ContactMask.masked(contact) }
            if let masked { facts.contact = masked }
            if let method { facts.method = method }
            if let userID, !userID.isEmpty { facts.userID = userID }
        }
    }
}

/// Writes one structured line at `info` per authentication decision (issue 19: an operator
/// follows a user's "I could not sign in at 10:32" from the `X-Request-Id` the app shows):
/// sign-ins and sign-ups, codes sent, password resets and changes, refreshes, revocations and
/// deletions, with their outcome and, on failure, the reason the API answered; and every access
/// token refused on the other routes. Each line carries `request_id` (from the logger's metadata
/// provider), `traceparent`, the contact masked as the API masks it, the method and the user id
/// when known. Sits inside ``ErrorResponseMiddleware``, so it sees the ``APIError`` itself.
struct AuthDecisionMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext
    let logger: Logger

    /// The decision each route makes, by method and route template (as `openapi.yaml` writes it).
    static let events: [String: String] = [
        "POST /v1/otp/send": "code_sent",
        "POST /v1/otp/resend": "code_sent",
        "POST /v1/otp/verify": "sign_in",
        "POST /v1/signup": "sign_up",
        "POST /v1/login": "sign_in",
        "POST /api/auth/login": "sign_in",
        "POST /v1/idtoken": "sign_in",
        "POST /v1/password/reset": "password_reset_requested",
        "POST /v1/password/reset/confirm": "password_reset",
        "POST /v1/me/password": "password_changed",
        "POST /v1/token/refresh": "token_refreshed",
        "POST /v1/logout": "session_revoked",
        "DELETE /v1/sessions/{id}": "session_revoked",
        "DELETE /v1/me": "account_deleted",
        // The Supabase door (docs/supabase.md): its token route grants by password, refresh token
        // or ID token, told apart by `auth.method`.
        "POST /auth/v1/signup": "sign_up",
        "POST /auth/v1/otp": "code_sent",
        "POST /auth/v1/resend": "code_sent",
        "POST /auth/v1/verify": "sign_in",
        "POST /auth/v1/token": "token_grant",
        "POST /auth/v1/logout": "session_revoked",
        "POST /auth/v1/recover": "password_reset_requested",
        "PUT /auth/v1/user": "user_updated",
    ]

    func handle(
        _ request: Request,
        context: GatewayRequestContext,
        next: (Request, GatewayRequestContext) async throws -> Response
    ) async throws -> Response {
        // Nothing to do when `info` is off (benchmarks run at `warning`): no note, no task-local.
        guard logger.logLevel <= .info else { return try await next(request, context) }
        let event = Self.events["\(request.method) \(context.endpointPath ?? "")"]
        let note = AuthDecisionNote()
        do {
            let response = try await AuthDecisionNote.$current.withValue(note) { try await next(request, context) }
            if let event { log(event, outcome: "success", reason: nil, note, context) }
            return response
        } catch {
            let apiError = error as? APIError
            if let event {
                log(event, outcome: "failure", reason: apiError?.reason ?? "internal", note, context)
            } else if let apiError, apiError.status == .unauthorized {
                // Any other route refused its access token.
                log("token_refused", outcome: "failure", reason: apiError.reason, note, context)
            }
            throw error
        }
    }

    private func log(
        _ event: String,
        outcome: String,
        reason: String?,
        _ note: AuthDecisionNote,
        _ context: GatewayRequestContext
    ) {
        let facts = note.facts.withLock { $0 }
        var metadata: Logger.Metadata = [
            "auth.event": "\(event)",
            "auth.outcome": "\(outcome)",
            "traceparent": "\(context.traceparent)",
        ]
        if let reason { metadata["auth.reason"] = "\(reason)" }
        if let contact = facts.contact { metadata["auth.contact"] = "\(contact)" }
        if let method = facts.method { metadata["auth.method"] = "\(method)" }
        if let userID = facts.userID { metadata["auth.user_id"] = "\(userID)" }
        logger.info("Authentication decision", metadata: metadata)
    }
}
