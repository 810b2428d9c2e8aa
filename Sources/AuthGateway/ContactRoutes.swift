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
        let started = try await startContactChange(
            of: caller.userID,
            phone: phone,
            email: email,
            locale: locale,
            context: context
        )
        return try JSONResponse.make(Self.verificationBody(started))
    }

    /// The code of a contact change for `userID` (both doors): 409 `contact_taken` when another
    /// account has proved the contact, before any code; otherwise otp-dispatch's Start of purpose
    /// `change_contact` bound to the account.
    func startContactChange(
        of userID: String,
        phone: String?,
        email: String?,
        locale: String = "",
        context: GatewayRequestContext
    ) async throws -> Auth_Otp_V1_StartResponse {
        let holder = try await backends.call(.identity, context) { options in
            try await backends.identity.contactExists(
                Auth_Identity_V1_ContactExistsRequest(phone: phone ?? "", email: email ?? ""),
                options: options
            )
        }
        if holder.exists, holder.verified, holder.userID != userID {
            throw APIError.contactTaken(phone: phone != nil)
        }
        return try await backends.call(.otpDispatch, context) { options in
            try await backends.otp.start(
                Auth_Otp_V1_StartRequest(
                    destination: phone ?? email ?? "",
                    purpose: .changeContact,
                    locale: locale,
                    clientIP: context.clientIP,
                    subject: userID
                ),
                options: options
            )
        }
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
        let user = try await changeContact(of: caller.userID, provedBy: checked, context: context)
        return try JSONResponse.make(UserBody(user))
    }

    /// Sets the contact a `change_contact` code proved on `userID`'s account (both doors): identity
    /// ChangeContact; the contact it replaced, if it was verified, gets a notice (best effort:
    /// the change stands if otp-dispatch refuses it). The user as changed.
    func changeContact(
        of userID: String,
        provedBy checked: Auth_Otp_V1_CheckResponse,
        context: GatewayRequestContext
    ) async throws -> Auth_Identity_V1_User {
        let isPhone = checked.channel == .sms
        let changed = try await backends.call(.identity, context, rules: Self.signedInUserRules) { options in
            try await backends.identity.changeContact(
                Auth_Identity_V1_ChangeContactRequest(
                    userID: userID,
                    phone: isPhone ? checked.destination : "",
                    email: isPhone ? "" : checked.destination,
                    clientIP: context.clientIP
                ),
                options: options
            )
        }
        guard let user = changed.user else { throw APIError.internalError }
        if changed.previousVerified, !changed.previous.isEmpty {
            await sendNotice(.contactChanged, to: changed.previous, context: context)
        }
        return user
    }

    /// The signed-in user is gone: 401 `invalid_token`.
    static var signedInUserRules: ServiceErrorMapping.Rules {
        var rules = ServiceErrorMapping.Rules()
        rules.signedInUser = true
        return rules
    }
}
