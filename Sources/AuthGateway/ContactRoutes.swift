import AuthProtobuf
import AuthText
import Hummingbird

/// Adding or changing the signed-in account's phone or email (issue 21 §2; docs/gateway.md):
/// a code of purpose `change_contact`, bound to the account, proves the new contact; the one it
/// replaces gets a notice without a code.
extension GatewayRoutes {
    // MARK: POST /v1/me/contact

    /// `{phone}` or `{email}` (+ `locale`): 409 `contact_taken` when another account has proved
    /// it (before any code is sent); otherwise a code to it, answered like `/v1/otp/send`.
    func startContactChange(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        let caller = try await signedIn(request, context)
        let body = try await JSONRequest.read(request, allowed: ["phone", "email", "locale"])
        let phone = try body.string("phone")
        let email = try body.string("email")
        guard (phone == nil) != (email == nil) else {
            throw APIError.invalidRequest("exactly one of `phone` and `email` is required.")
        }
        let locale = try body.string("locale") ?? ""
        guard locale.isEmpty || LanguageTag.isValid(locale) else {
            throw APIError.invalidRequest("`locale` must be a language tag such as en-IN.")
        }
        let holder = try await backends.call(.identity, context) { options in
            try await backends.identity.contactExists(
                Auth_Identity_V1_ContactExistsRequest(phone: phone ?? "", email: email ?? ""),
                options: options
            )
        }
        if holder.exists, holder.verified, holder.userID != caller.userID {
            throw APIError.contactTaken(phone: phone != nil)
        }
        let started = try await backends.call(.otpDispatch, context) { options in
            try await backends.otp.start(
                Auth_Otp_V1_StartRequest(
                    destination: phone ?? email ?? "",
                    purpose: .changeContact,
                    locale: locale,
                    clientIP: context.clientIP,
                    subject: caller.userID
                ),
                options: options
            )
        }
        return try JSONResponse.make(Self.verificationBody(started))
    }

    // MARK: POST /v1/me/contact/verify

    /// `{verification_id, code}`: the code of a change this account started (another
    /// account's, or a code of another purpose, is 404 `verification_not_found`); the contact is
    /// set, verified; the one it replaced, if it was verified, gets a notice (best effort: the
    /// change stands if otp-dispatch refuses it). 200 with the user.
    func verifyContactChange(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        let caller = try await signedIn(request, context)
        let body = try await JSONRequest.read(request, allowed: ["verification_id", "code"])
        let verificationID = try body.requiredString("verification_id")
        let code = try body.requiredString("code")
        let checked = try await checkCode(
            verificationID: verificationID,
            code: code,
            purposes: [.changeContact],
            context: context
        )
        guard checked.subject == caller.userID else {
            var notFound = APIError.verificationNotFound
            notFound.detail = "a contact change started by another account"
            throw notFound
        }
        let isPhone = checked.channel == .sms
        let changed = try await backends.call(.identity, context, rules: Self.signedInUserRules) { options in
            try await backends.identity.changeContact(
                Auth_Identity_V1_ChangeContactRequest(
                    userID: caller.userID,
                    phone: isPhone ? checked.destination : "",
                    email: isPhone ? "" : checked.destination,
                    clientIP: context.clientIP
                ),
                options: options
            )
        }
        guard let user = changed.user else { throw APIError.internalError }
        if changed.previousVerified, !changed.previous.isEmpty {
            do {
                _ = try await backends.call(.otpDispatch, context) { options in
                    try await backends.otp.sendNotice(
                        Auth_Otp_V1_SendNoticeRequest(
                            destination: changed.previous,
                            notice: .contactChanged,
                            clientIP: context.clientIP
                        ),
                        options: options
                    )
                }
            } catch {
                logger.warning(
                    "The notice to a replaced contact was not sent",
                    metadata: ["user.id": "\(caller.userID)", "error": "\(error)"]
                )
            }
        }
        return try JSONResponse.make(UserBody(user))
    }

    /// The signed-in user is gone: 401 `invalid_token`.
    static var signedInUserRules: ServiceErrorMapping.Rules {
        var rules = ServiceErrorMapping.Rules()
        rules.signedInUser = true
        return rules
    }
}
