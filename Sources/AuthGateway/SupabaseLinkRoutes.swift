import AuthConfiguration
import AuthCrypto
import AuthProtobuf
import AuthText
import HTTPTypes
import Hummingbird

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The Supabase door's confirmation link (docs/supabase.md, "The confirmation link"): a
/// sign-up's email carries, besides its code, `GET /auth/v1/verify?type=signup&redirect_to=…&token=…`
/// when `AUTH_PUBLIC_URL` is set and the sign-up's `redirect_to` is on
/// `AUTH_OAUTH_REDIRECT_URLS`. Following it proves what typing the code proves, and sends the
/// browser back to the app: with the session in the fragment (implicit flow), or with a `code`
/// for the `pkce` grant when the sign-up sent a PKCE challenge.
extension GatewayRoutes {
    /// What a sign-up (or its resend) asks otp-dispatch to put in the email.
    struct ConfirmationLink: Sendable, Equatable {
        /// StartRequest.link_base ("" for no link).
        var base = ""
        /// StartRequest.subject: the PKCE challenge the link's sign-in is bound to ("" for none).
        var subject = ""
    }

    /// The subject of a verification whose link signs in with PKCE: this and the challenge.
    static let pkceSubjectPrefix = "pkce_s256:"
    /// The longest link base otp-dispatch takes.
    static let maxLinkBaseBytes = 1024

    /// The link of a sign-up's email: from the request's `redirect_to` query parameter (the
    /// clients' `emailRedirectTo`) and its body's `code_challenge` (`s256`). No link without
    /// `AUTH_PUBLIC_URL`, without `redirect_to`, or with one not on the allow-list (the email
    /// then carries the code only); a malformed challenge is 400 `validation_failed`.
    func confirmationLink(_ request: Request, _ body: SupabaseRequest) throws -> ConfirmationLink {
        var link = ConfirmationLink()
        if let challenge = body.string("code_challenge"), !challenge.isEmpty {
            guard (body.string("code_challenge_method") ?? "").lowercased() == "s256" else {
                throw SupabaseError(.badRequest, "validation_failed", "code_challenge_method must be s256")
            }
            guard PKCE.isChallenge(challenge) else {
                throw SupabaseError(
                    .badRequest,
                    "validation_failed",
                    "code_challenge must be the base64url SHA-256 of the verifier (43 characters)"
                )
            }
            link.subject = Self.pkceSubjectPrefix + challenge
        }
        let query = try OAuthQuery(query: request)
        guard let publicURL, let redirectTo = query["redirect_to"], !redirectTo.isEmpty else { return link }
        guard redirectAllowList.allows(redirectTo) else {
            logger.info(
                "Supabase sign-up: redirect_to is not on AUTH_OAUTH_REDIRECT_URLS; the email carries the code only",
                metadata: ["redirect_to": "\(redirectTo.prefix(128))"]
            )
            return link
        }
        let base =
            publicURL + "/auth/v1/verify?"
            + FormURLEncoding.encode([(name: "type", value: "signup"), (name: "redirect_to", value: redirectTo)])
            + "&token="
        if base.utf8.count <= Self.maxLinkBaseBytes { link.base = base }
        return link
    }

    // MARK: GET /auth/v1/verify

    /// The link a browser opens (no `apikey`). `redirect_to` must be on the allow-list (400
    /// otherwise: never a redirect elsewhere). A link whose code is wrong, used or expired sends
    /// the browser back with `#error=access_denied&error_code=otp_expired&error_description=…`;
    /// a good one confirms the email, then sends it back with `?code=` (PKCE) or the session in
    /// the fragment.
    func supabaseFollowLink(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        await supabase(request, context, anonKey: false) {
            try limit(context, as: "/v1/otp/verify")
            let query = try OAuthQuery(query: request)
            guard query["type"] == "signup" else {
                throw SupabaseError(.badRequest, "validation_failed", "Only signup links are served")
            }
            guard let redirectTo = query["redirect_to"], redirectAllowList.allows(redirectTo) else {
                throw SupabaseError(
                    .badRequest,
                    "validation_failed",
                    "redirect_to is missing or not on the allow-list"
                )
            }
            let checked: Auth_Otp_V1_CheckResponse
            do {
                checked = try await checkCode(
                    linkToken: query["token"] ?? "",
                    code: "",
                    purposes: [.verify],
                    context: context
                )
            } catch let error as APIError where Self.isSpentCode(error) {
                return Self.seeOther(
                    redirectTo + "#"
                        + FormURLEncoding.encode([
                            (name: "error", value: "access_denied"),
                            (name: "error_code", value: "otp_expired"),
                            (name: "error_description", value: "Email link is invalid or has expired"),
                        ])
                )
            }
            let (user, _) = try await account(provedBy: checked, context: context)
            if checked.subject.hasPrefix(Self.pkceSubjectPrefix) {
                let challenge = String(checked.subject.dropFirst(Self.pkceSubjectPrefix.count))
                let issued = try await backends.call(.identity, context) { options in
                    try await backends.identity.issueSignInCode(
                        Auth_Identity_V1_IssueSignInCodeRequest(userID: user.id, codeChallenge: challenge),
                        options: options
                    )
                }
                return Self.seeOther(FormURLEncoding.appending([(name: "code", value: issued.code)], to: redirectTo))
            }
            let tokens = try await issueSession(
                format: .supabase,
                user,
                amr: "otp_email",
                device: try device(request, JSONRequest(members: [:])),
                context: context
            )
            let fragment = SupabaseSessionBody.fragment(tokens, now: Date(), type: "signup")
            return Self.seeOther(redirectTo + "#" + FormURLEncoding.encode(fragment))
        }
    }

    /// otp-dispatch's answers for a code that does not prove anything (Supabase's `otp_expired`).
    static func isSpentCode(_ error: APIError) -> Bool {
        ["verification_not_found", "invalid_code", "code_expired", "invalid_request"].contains(error.reason)
    }

    /// 303 to `location`, not cached: where a followed link sends the browser.
    static func seeOther(_ location: String) -> Response {
        Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store"])
    }
}
