import AuthProtobuf
import AuthText
import HTTPTypes
import Hummingbird

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The Supabase door's password recovery and user update (docs/supabase.md): `POST
/// /auth/v1/recover`, `verify` of type `recovery`, `PUT /auth/v1/user`.
extension GatewayRoutes {
    /// How long a recovery session may set a new password without the old one: a code's lifetime.
    static let recoveryWindowSeconds: Int64 = 600

    // MARK: POST /auth/v1/recover

    /// `resetPasswordForEmail`: a recovery code to the email, the same answer whether or not an
    /// account has it (a decoy verification otherwise, as `/v1/password/reset`).
    func supabaseRecover(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        await supabase(request, context) {
            try limit(context, as: "/v1/password/reset")
            let body = try await SupabaseRequest.read(request)
            guard body.string("phone") == nil else {
                throw SupabaseError(.badRequest, "validation_failed", "Password recovery is by email")
            }
            let destination = try Self.supabaseContact(body)
            AuthDecisionNote.record(contact: destination.text)
            let exists = try await contactExists(destination, context: context).exists
            try await supabaseStart(destination, purpose: .passwordReset, decoy: !exists, context: context)
            return try JSONResponse.make([String: String]())
        }
    }

    /// `verifyOtp` of type `recovery`: the code proves the email, every session of the account
    /// ends (as `/v1/password/reset/confirm`), and a new one starts with `amr`
    /// `otp_email` + `recovery`, which may set a new password without the old one
    /// (``supabaseUpdateUser(_:context:)``) for ``recoveryWindowSeconds``.
    func supabaseRecoverySession(
        _ checked: Auth_Otp_V1_CheckResponse,
        _ request: Request,
        _ context: GatewayRequestContext
    ) async throws -> Response {
        let owner: Auth_Identity_V1_User
        do {
            let found = try await backends.call(.identity, context) { options in
                try await backends.identity.getUserByEmail(
                    Auth_Identity_V1_GetUserByEmailRequest(email: checked.destination),
                    options: options
                )
            }
            guard let user = found.user else { throw APIError.internalError }
            owner = user
        } catch let error as APIError where error.reason == "user_not_found" {
            // Deleted since the code was sent.
            throw SupabaseError(.forbidden, "otp_expired", "Token has expired or is invalid")
        }
        try await backends.revokeAllSessions(userID: owner.id, reason: "password_reset", context)
        return try await supabaseSignIn(owner, amr: "otp_email", also: ["recovery"], request, context)
    }

    // MARK: PUT /auth/v1/user

    /// `updateUser`: `data` (`display_name`, `avatar_url`: the profile; other members are not
    /// kept) and `password` (with `current_password`, or without it in a recovery session's
    /// first ``recoveryWindowSeconds``; every other session of the account ends). Changing the
    /// email or phone is not served here yet: `POST /v1/me/contact`.
    func supabaseUpdateUser(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        await supabase(request, context) {
            let caller = try await supabaseSignedIn(request, context)
            let body = try await SupabaseRequest.read(request)
            let newEmail = body.string("email").flatMap { $0.isEmpty ? nil : $0 }
            let newPhone = body.string("phone").flatMap { $0.isEmpty ? nil : $0 }
            if newEmail != nil || newPhone != nil {
                try await startContactChange(email: newEmail, phone: newPhone, caller: caller, context: context)
            }
            let metadata = body.object("data")
            if !metadata.isEmpty {
                try await updateProfile(metadata, caller: caller, context: context)
            }
            if let password = body.string("password") {
                try await setPassword(
                    password,
                    current: body.string("current_password"),
                    caller: caller,
                    context: context
                )
            }
            return try JSONResponse.make(try await supabaseUser(caller.userID, context: context))
        }
    }

    /// A new email or phone: a code to it (verified with `verify` of type `email_change` or
    /// `phone_change`), as `POST /v1/me/contact`; the account keeps its contact until then.
    /// Another account's proved contact is 422 `email_exists` / `phone_exists`.
    private func startContactChange(
        email: String?,
        phone: String?,
        caller: AccessTokenAuthenticator.SignedIn,
        context: GatewayRequestContext
    ) async throws {
        guard email == nil || phone == nil else {
            throw SupabaseError(.badRequest, "validation_failed", "Change the email or the phone, one at a time")
        }
        let members: [String: JSONValue] = email.map { ["email": .string($0)] } ?? ["phone": .string(phone ?? "")]
        let contact = try Self.supabaseContact(SupabaseRequest(members: members))
        do {
            _ = try await startContactChange(
                of: caller.userID,
                phone: contact.isPhone ? contact.text : nil,
                email: contact.isPhone ? nil : contact.text,
                context: context
            )
        } catch let error as APIError where error.reason == "contact_taken" {
            throw SupabaseError(
                .unprocessableContent,
                contact.isPhone ? "phone_exists" : "email_exists",
                contact.isPhone
                    ? "A user with this phone number has already been registered"
                    : "A user with this email address has already been registered"
            )
        } catch let error as APIError where Self.isSendLimit(error) {
            throw Self.sendLimitError(error, phone: contact.isPhone)
        }
    }

    private func updateProfile(
        _ metadata: [String: JSONValue],
        caller: AccessTokenAuthenticator.SignedIn,
        context: GatewayRequestContext
    ) async throws {
        var update = Auth_Identity_V1_UpdateProfileRequest()
        update.userID = caller.userID
        update.clientIP = context.clientIP
        if let name = metadata["display_name"]?.stringValue ?? metadata["full_name"]?.stringValue {
            update.displayName = Auth_Identity_V1_StringValue(value: name)
        }
        if let avatar = metadata["avatar_url"] {
            update.photoURL = Auth_Identity_V1_StringValue(value: avatar.stringValue ?? "")
        }
        guard update.displayName != nil || update.photoURL != nil else { return }
        var rules = Self.signedInUserRules
        rules.validationFields = ["display_name": "display_name", "photo_url": "avatar_url"]
        do {
            _ = try await backends.call(.identity, context, rules: rules) { options in
                try await backends.identity.updateProfile(update, options: options)
            }
        } catch let error as APIError where error.reason == "validation_failed" {
            throw Self.supabaseValidation(error)
        }
    }

    /// A new password: identity's ChangePassword with `current` (a wrong one is 400
    /// `current_password_mismatch`); without it, only a young recovery session may, through
    /// ResetPassword (400 `current_password_required` otherwise). Every other session ends.
    private func setPassword(
        _ password: String,
        current: String?,
        caller: AccessTokenAuthenticator.SignedIn,
        context: GatewayRequestContext
    ) async throws {
        var rules = Self.signedInUserRules
        rules.validationFields = ["new_password": "password", "password": "password"]
        do {
            if let current {
                _ = try await backends.call(.identity, context, rules: rules) { options in
                    try await backends.identity.changePassword(
                        Auth_Identity_V1_ChangePasswordRequest(
                            userID: caller.userID,
                            oldPassword: current,
                            newPassword: password,
                            clientIP: context.clientIP
                        ),
                        options: options
                    )
                }
            } else {
                let age = Int64(Date().timeIntervalSince1970) - caller.sessionCreatedAt
                guard caller.claims.amr.contains("recovery"), age <= Self.recoveryWindowSeconds else {
                    throw SupabaseError(
                        .badRequest,
                        "current_password_required",
                        "Password update requires the current password (current_password)"
                    )
                }
                let owner = try await getUser(caller.userID, context: context)
                _ = try await backends.call(.identity, context, rules: rules) { options in
                    try await backends.identity.resetPassword(
                        Auth_Identity_V1_ResetPasswordRequest(
                            email: owner.email,
                            newPassword: password,
                            clientIP: context.clientIP
                        ),
                        options: options
                    )
                }
            }
        } catch let error as APIError where error.reason == "validation_failed" {
            throw Self.supabaseValidation(error)
        } catch let error as APIError where error.reason == "invalid_credentials" {
            throw SupabaseError(
                .badRequest,
                "current_password_mismatch",
                "Current password required when setting new password"
            )
        }
        try await backends.revokeAllSessions(
            userID: caller.userID,
            except: caller.sessionID,
            reason: "password_changed",
            context
        )
    }
}
