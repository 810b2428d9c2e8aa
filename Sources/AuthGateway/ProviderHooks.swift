import AuthProtobuf
import AuthText
import HTTPTypes
import Hummingbird

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// Callbacks from the message providers (not called by apps).
extension GatewayRoutes {
    static let twilioSignature = HTTPField.Name("X-Twilio-Signature")!

    // MARK: POST /v1/hooks/twilio/status

    /// Twilio's status callback for an SMS: relayed to otp-dispatch, which holds the auth token,
    /// verifies `X-Twilio-Signature` over `AUTH_PUBLIC_URL` + this path (+ the query string) and
    /// the form, and records `delivered` or `failed`. 204 once verified (whatever the status);
    /// 403 `invalid_signature` when the signature is missing or wrong or `AUTH_PUBLIC_URL` is
    /// not set. Not rate limited: an unsigned request costs one HMAC in otp-dispatch.
    func twilioStatus(_ request: Request, context: GatewayRequestContext) async throws -> Response {
        guard let publicURL else { throw APIError.invalidSignature }
        // A base64 HMAC-SHA1 is 28 characters; anything else is refused without a call.
        guard let signature = request.headers[Self.twilioSignature], signature.utf8.count == 28 else {
            throw APIError.invalidSignature
        }
        let form = try await FormRequest.read(request)
        let query = request.uri.query.map { "?" + $0 } ?? ""
        _ = try await backends.call(.otpDispatch, context) { options in
            try await backends.otp.reportTwilioStatus(
                Auth_Otp_V1_TwilioStatusCallback(
                    url: publicURL + request.uri.path + query,
                    parameters: form.parameters.map { Auth_Otp_V1_FormParameter(name: $0.name, value: $0.value) },
                    signature: signature
                ),
                options: options
            )
        }
        return JSONResponse.noContent
    }
}

/// An `application/x-www-form-urlencoded` body (at most 16 KiB, 413; another type, 415): its
/// parameters in order, `+` read as a space and `%XX` decoded (a malformed escape or text that
/// is not UTF-8 is 400 `invalid_request`).
struct FormRequest: Sendable {
    var parameters: [(name: String, value: String)]

    static func read(_ request: Request) async throws -> FormRequest {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > JSONRequest.maxBodyBytes {
            throw APIError.payloadTooLarge
        }
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: JSONRequest.maxBodyBytes)
        } catch {
            throw APIError.payloadTooLarge
        }
        guard let contentType = request.headers[.contentType],
            (contentType.split(separator: ";", maxSplits: 1).first ?? "").trimmingWhitespace().lowercased()
                == "application/x-www-form-urlencoded"
        else {
            throw APIError.unsupportedMediaType
        }
        return try FormRequest(parsing: String(buffer: buffer))
    }

    init(parsing text: String) throws(APIError) {
        var parameters: [(name: String, value: String)] = []
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = FormURLEncoding.decodeStrictly(parts[0]),
                let value = FormURLEncoding.decodeStrictly(parts.count > 1 ? parts[1] : "")
            else {
                throw APIError.invalidRequest("the form is not validly encoded.")
            }
            parameters.append((name, value))
        }
        self.parameters = parameters
    }
}
