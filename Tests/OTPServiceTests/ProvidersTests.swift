import AuthAPI
import AuthCrypto
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import AuthText
import Foundation
import Testing

@testable import OTPService

/// The HTTP providers against local servers: a Twilio imitation (429 and 5xx included) and a
/// webhook receiver that refuses.
@Suite struct ProvidersTests {
    static func form(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            }
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        return fields
    }

    @Test func twilioIsRetriedOn429And5xxThenSends() async throws {
        try await HTTPReceiver.with(respond: { _, index in
            switch index {
            case 0: (429, #"{"code":20429,"message":"Too Many Requests"}"#)
            case 1: (503, "{}")
            default: (201, #"{"sid":"SM0123456789abcdef","status":"queued"}"#)
            }
        }) { twilio in
            try await withOTPService(configure: {
                $0.smsProvider = .twilio
                $0.twilioBaseURL = "http://127.0.0.1:\(twilio.port)"
                $0.twilioAccountSID = "AC00000000000000000000000000000001"
                $0.twilioAuthToken = "token"
                $0.twilioFrom = "+15005550006"
                $0.twilioStatusCallbackURL = "https://auth.example.com/v1/hooks/twilio/status"
                $0.appName = "UrbanNest"
                $0.smsDomain = "urbannest.com"
            }) { otp in
                let factory = ProviderFactory(configuration: otp.configuration, logger: testLogger)
                let dispatcher = otp.service.makeDispatcher(providers: factory.providerSet())
                let started = try await otp.start("+919999912345")
                let code = try await otp.queuedCode(started.verificationID)
                #expect(try await dispatcher.deliverDue() == 1)
                otp.clock.advance(seconds: 2)
                #expect(try await dispatcher.deliverDue() == 1)
                otp.clock.advance(seconds: 4)
                #expect(try await dispatcher.deliverDue() == 1)
                await factory.shutdown()
                #expect(twilio.requests.count == 3)
                let request = try #require(twilio.requests.last)
                #expect(request.method == "POST")
                #expect(request.path == "/2010-04-01/Accounts/AC00000000000000000000000000000001/Messages.json")
                #expect(request.headers["content-type"] == "application/x-www-form-urlencoded")
                #expect(
                    request.headers["authorization"]
                        == "Basic " + Base64.encode(Array("AC00000000000000000000000000000001:token".utf8))
                )
                let fields = Self.form(request.bodyText)
                #expect(fields["To"] == "+919999912345")
                #expect(fields["From"] == "+15005550006")
                #expect(fields["Body"] == "\(code) is your UrbanNest verification code\n\n@urbannest.com #\(code)")
                #expect(fields["StatusCallback"] == "https://auth.example.com/v1/hooks/twilio/status")
                let status = try await otp.operatorClient.getDeliveryStatus(
                    .init(verificationID: started.verificationID)
                )
                #expect(status.state == .sent)
                #expect(status.provider == "twilio")
                #expect(status.attempts == 3)
                // Twilio's status callbacks, relayed by the gateway: signed with the auth token.
                let url = "https://auth.example.com/v1/hooks/twilio/status"
                func callback(_ status: String, signedWith token: String = "token") -> Auth_Otp_V1_TwilioStatusCallback
                {
                    let parameters = [
                        ("MessageStatus", status), ("MessageSid", "SM0123456789abcdef"),
                        ("AccountSid", "AC00000000000000000000000000000001"), ("To", "+919999912345"),
                    ]
                    return .init(
                        url: url,
                        parameters: parameters.map { .init(name: $0.0, value: $0.1) },
                        signature: TwilioProvider.signature(
                            url: url,
                            parameters: parameters.map { (name: $0.0, value: $0.1) },
                            authToken: token
                        )
                    )
                }
                await expectRPCError(.permissionDenied, "invalid_signature") {
                    try await otp.client.reportTwilioStatus(callback("delivered", signedWith: "another-token"))
                }
                var forged = callback("delivered")
                forged.url = "https://evil.example.com/v1/hooks/twilio/status"
                await expectRPCError(.permissionDenied, "invalid_signature") {
                    try await otp.client.reportTwilioStatus(forged)
                }
                // Only the gateway relays them.
                await expectRPCError(.permissionDenied, "caller_not_allowed") {
                    try await otp.operatorClient.reportTwilioStatus(callback("delivered"))
                }
                // An intermediate status changes nothing.
                #expect(try await otp.client.reportTwilioStatus(callback("sent")).found == false)
                #expect(
                    try await otp.operatorClient.getDeliveryStatus(.init(verificationID: started.verificationID)).state
                        == .sent
                )
                let report = try await otp.client.reportTwilioStatus(callback("delivered"))
                #expect(report.found)
                let delivered = try await otp.operatorClient.getDeliveryStatus(
                    .init(verificationID: started.verificationID)
                )
                #expect(delivered.state == .delivered)
            }
        }
    }

    /// Twilio's own published examples of `X-Twilio-Signature` (its signature-validation
    /// snippets: auth token 12345, two requests that differ in a phone number).
    @Test func theTwilioSignatureMatchesTwilioExamples() {
        let url = "https://mycompany.com/myapp.php?foo=1&bar=2"
        for (phone, expected) in [
            ("+14158675309", "RSOYDt4T1cUTdK1PDd93/VVr8B8="), ("+14158675310", "GvWf1cFY/Q7PnoempGyD5oXAezc="),
        ] {
            let parameters = [
                (name: "CallSid", value: "CA1234567890ABCDE"), (name: "Caller", value: phone),
                (name: "Digits", value: "1234"), (name: "From", value: phone), (name: "To", value: "+18005551212"),
            ]
            #expect(TwilioProvider.signature(url: url, parameters: parameters, authToken: "12345") == expected)
            // The order the parameters arrive in does not matter.
            #expect(
                TwilioProvider.signature(url: url, parameters: parameters.reversed(), authToken: "12345") == expected
            )
        }
    }

    @Test func aTwilioRefusalIsNotRetried() async throws {
        try await HTTPReceiver.with(respond: { _, _ in (400, #"{"code":21211,"message":"Invalid 'To' Phone Number"}"#) }
        ) {
            twilio in
            try await withOTPService(configure: {
                $0.smsProvider = .twilio
                $0.twilioBaseURL = "http://127.0.0.1:\(twilio.port)"
                $0.twilioAccountSID = "AC1"
                $0.twilioAuthToken = "token"
                $0.twilioFrom = "MG0000000000000000000000000000000a"
            }) { otp in
                let factory = ProviderFactory(configuration: otp.configuration, logger: testLogger)
                let dispatcher = otp.service.makeDispatcher(providers: factory.providerSet())
                let started = try await otp.start("+919999912346")
                #expect(try await dispatcher.deliverDue() == 1)
                await factory.shutdown()
                #expect(twilio.requests.count == 1)
                #expect(Self.form(try #require(twilio.requests.first).bodyText)["MessagingServiceSid"] != nil)
                let status = try await otp.operatorClient.getDeliveryStatus(
                    .init(verificationID: started.verificationID)
                )
                #expect(status.state == .failed)
                #expect(status.lastError == "twilio: HTTP 400")
            }
        }
    }

    @Test func aTimeoutIsRetryable() async throws {
        try await HTTPReceiver.with(respond: { _, _ in
            try? await Task.sleep(for: .seconds(2))
            return (200, "{}")
        }) { receiver in
            var configuration = testConfiguration()
            configuration.webhookURL = "http://127.0.0.1:\(receiver.port)/hook"
            configuration.webhookSecret = "s"
            configuration.httpTimeout = .milliseconds(200)
            let factory = ProviderFactory(configuration: configuration, logger: testLogger)
            let message = OutgoingMessage(
                id: UUID(),
                verificationID: UUID(),
                channel: .email,
                to: "a@example.com",
                code: "123456",
                purpose: "login",
                locale: "en",
                createdAt: Date(),
                expiresAt: Date() + 600,
                text: RenderedMessage(subject: "s", body: "b")
            )
            do {
                _ = try await factory.provider(.webhook).send(message)
                Issue.record("the send should have timed out")
            } catch let error as ProviderError {
                #expect(error.retryable)
            }
            await factory.shutdown()
        }
    }
}

@Suite struct TwilioFormEncodingTests {
    @Test func encodesEverythingButUnreservedASCII() {
        let form = TwilioProvider.formEncode([
            ("To", "+919876543210"), ("Body", "153982 is your Café code\n@auth.example #153982 ~a_b.c-d"),
        ])
        #expect(
            form
                == "To=%2B919876543210&Body=153982%20is%20your%20Caf%C3%A9%20code%0A%40auth.example%20%23153982%20~a_b.c-d"
        )
    }
}

/// The webhook body is written by hand; it must be the bytes `JSONEncoder` wrote before
/// (`.sortedKeys`, `.withoutEscapingSlashes`, absent optionals left out), which receivers may
/// already compare or log.
@Suite struct WebhookBodyTests {
    /// What otp-dispatch POSTed before issue 24: the old encoder, kept here as the oracle.
    struct EncodedByFoundation: Encodable {
        var id: String
        var channel: String
        var to: String
        var subject: String?
        var body: String
        var code: String
        var purpose: String
        var locale: String
        var created_at: String
        var expires_at: String
        var link: String?
    }

    static func oracle(_ message: OutgoingMessage) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(
            try encoder.encode(
                EncodedByFoundation(
                    id: message.id.uuidString.lowercased(),
                    channel: message.channel.rawValue,
                    to: message.to,
                    subject: message.text.subject,
                    body: message.text.body,
                    code: message.code,
                    purpose: message.purpose,
                    locale: message.locale,
                    created_at: RFC3339.string(message.createdAt),
                    expires_at: RFC3339.string(message.expiresAt),
                    link: message.link
                )
            )
        )
    }

    static func message(subject: String?, body: String, link: String?, to: String) -> OutgoingMessage {
        OutgoingMessage(
            id: UUID(),
            verificationID: UUID(),
            channel: subject == nil ? .sms : .email,
            to: to,
            code: "042917",
            purpose: "sign_in",
            locale: "pt-BR",
            createdAt: Date(timeIntervalSince1970: 1_764_000_000.123),
            expiresAt: Date(timeIntervalSince1970: 1_764_000_300),
            text: RenderedMessage(subject: subject, body: body),
            link: link
        )
    }

    @Test(arguments: [
        message(
            subject: nil,
            body: "042917 is your Laten verification code\n\n@laten.app #042917",
            link: nil,
            to: "+5511999990000"
        ),
        message(
            subject: "Seu código: 042917",
            body: "Olá \"Zoë\" \\ tab\there\r\n\u{01}\u{1F}\u{7F} ✓ 🙂 \u{2028} </script> https://a.example/x?y=1&z=2",
            link: "https://laten.app/auth/confirm?token=a/b+c%2F",
            to: "zoë+tag@example.com"
        ),
        message(subject: "", body: "", link: "", to: ""),
    ])
    func sameBytesAsJSONEncoder(message: OutgoingMessage) throws {
        let written = WebhookProvider.body(of: message)
        #expect(String(decoding: written, as: UTF8.self) == String(decoding: try Self.oracle(message), as: UTF8.self))
    }
}

/// The rows `markSent` hands PostgreSQL, written by hand: valid JSON holding each message.
@Suite struct SentMessageRowsTests {
    @Test func rowsAreAJSONArrayOfEveryMessage() throws {
        let sent = [
            OTPStore.SentMessage(id: UUID(), provider: "twilio", providerMessageID: "SM0123\"\\/\n✓"),
            OTPStore.SentMessage(id: UUID(), provider: "webhook", providerMessageID: nil),
        ]
        let rows = OTPStore.SentMessage.jsonRows(sent)
        let parsed = try #require(
            try JSONSerialization.jsonObject(with: Data(rows.utf8)) as? [[String: Any]]
        )
        #expect(parsed.count == 2)
        #expect(parsed[0]["id"] as? String == sent[0].id.uuidString)
        #expect(parsed[0]["provider"] as? String == "twilio")
        #expect(parsed[0]["provider_message_id"] as? String == "SM0123\"\\/\n✓")
        #expect(parsed[1]["provider"] as? String == "webhook")
        #expect(parsed[1]["provider_message_id"] is NSNull)
        #expect(OTPStore.SentMessage.jsonRows([]) == "[]")
    }
}
