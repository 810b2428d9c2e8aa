import AuthAPI
import AuthCrypto
import AuthProtobuf
import AuthRPC
import AuthTestSupport
import Foundation
import Synchronization
import Testing

@testable import OTPService

@Suite struct OTPDispatcherTests {
    @Test func aSentMessageLosesItsCode() async throws {
        try await withOTPService { otp in
            let provider = ScriptedProvider(name: "log")
            let dispatcher = otp.service.makeDispatcher(providers: ProviderSet(sms: [provider], email: [provider]))
            let started = try await otp.start("+919999900010")
            let code = try await otp.queuedCode(started.verificationID)
            let queued = try await otp.operatorClient.getDeliveryStatus(.init(verificationID: started.verificationID))
            #expect(queued.state == .queued)
            #expect(try await dispatcher.deliverDue() == 1)
            #expect(provider.sent.count == 1)
            #expect(provider.sent.first?.code == code)
            #expect(provider.sent.first?.text.body == "\(code) is your Auth verification code")
            let rows = try await otp.query("SELECT state, code IS NULL, provider_message_id FROM @messages")
            #expect(try rows[0][0].string == "sent")
            #expect(try rows[0][1].bool)
            let status = try await otp.operatorClient.getDeliveryStatus(.init(verificationID: started.verificationID))
            #expect(status.state == .sent)
            #expect(status.provider == "log")
            #expect(status.attempts == 1)
            #expect(status.maskedDestination == "+91******0010")
            // A delivery report from the provider.
            let report = try await otp.operatorClient.reportDelivery(
                .init(providerMessageID: try rows[0][2].string, delivered: true, error: "")
            )
            #expect(report.found)
            let delivered = try await otp.operatorClient.getDeliveryStatus(
                .init(verificationID: started.verificationID)
            )
            #expect(delivered.state == .delivered)
            // The code still works: sending does not consume it.
            _ = try await otp.check(started.verificationID, code)
        }
    }

    @Test func retriesWithBackoffThenDeadLetters() async throws {
        try await withOTPService(configure: {
            $0.deliveryAttempts = 3
            $0.retryBackoff = .seconds(2)
            $0.retryBackoffLimit = .seconds(60)
        }) { otp in
            let provider = ScriptedProvider(name: "webhook") { _ in ProviderError(retryable: true, "webhook: HTTP 503")
            }
            let dispatcher = otp.service.makeDispatcher(providers: ProviderSet(sms: [provider], email: [provider]))
            let started = try await otp.start("asha@example.com")
            #expect(try await dispatcher.deliverDue() == 1)
            // Backoff 2 s × jitter 0.5–1.5 after the first failure: not due yet at +0.9 s, due at +3 s.
            otp.clock.advance(seconds: 0.9)
            #expect(try await dispatcher.deliverDue() == 0)
            otp.clock.advance(seconds: 2.1)
            #expect(try await dispatcher.deliverDue() == 1)
            // Second backoff 4 s × 0.5–1.5.
            otp.clock.advance(seconds: 1.9)
            #expect(try await dispatcher.deliverDue() == 0)
            otp.clock.advance(seconds: 4.2)
            #expect(try await dispatcher.deliverDue() == 1)
            #expect(provider.sent.count == 3)
            let rows = try await otp.query("SELECT state, code IS NULL, last_error, total_attempts FROM @messages")
            #expect(try rows[0][0].string == "failed")
            #expect(try rows[0][1].bool)
            #expect(try rows[0][2].string == "webhook: HTTP 503")
            #expect(try rows[0][3].int == 3)
            let status = try await otp.operatorClient.getDeliveryStatus(.init(verificationID: started.verificationID))
            #expect(status.state == .failed)
            #expect(status.lastError == "webhook: HTTP 503")
            otp.clock.advance(seconds: 3_600)
            #expect(try await dispatcher.deliverDue() == 0)
        }
    }

    /// Mark-sent, one message (by its key) and a batch (by the list of ids): each records the
    /// provider and its id (or none), wipes the code, and leaves a message that is no longer
    /// queued or sending (here superseded by a resend) as it is.
    @Test(arguments: [1, 3])
    func markSentRecordsOnlyMessagesStillOut(count: Int) async throws {
        try await withOTPService { otp in
            for n in 0..<count + 1 { _ = try await otp.start("mark\(n)@example.com") }
            let ids = try await otp.query("SELECT id FROM @messages ORDER BY id").map { try $0[0].uuid }
            let superseded = ids[count]
            _ = try await otp.query(
                "UPDATE @messages SET state = 'superseded', code = NULL WHERE id = $1",
                [.uuid(superseded)]
            )
            let sent = ids.enumerated().map { index, id in
                OTPStore.SentMessage(id: id, provider: "webhook", providerMessageID: index == 0 ? nil : "p-\(index)")
            }
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            // The superseded message is in the batch's list, or alone after the single one.
            if count == 1 {
                try await otp.service.store.markSent([sent[0]], now: now)
                try await otp.service.store.markSent([sent[1]], now: now)
            } else {
                try await otp.service.store.markSent(sent, now: now)
            }
            let rows = try await otp.query(
                "SELECT id, state, code IS NULL, provider, provider_message_id, sent_at FROM @messages ORDER BY id"
            )
            #expect(rows.count == count + 1)
            for (index, row) in rows.enumerated() {
                #expect(try row[0].uuid == ids[index])
                if try row[0].uuid == superseded {
                    #expect(try row[1].string == "superseded")
                    #expect(try row[3].string == "")
                    #expect(try row[5].decode(Date?.self) == nil)
                } else {
                    #expect(try row[1].string == "sent")
                    #expect(try row[2].bool)
                    #expect(try row[3].string == "webhook")
                    #expect(try row[4].decode(String?.self) == (index == 0 ? nil : "p-\(index)"))
                    #expect(try row[5].date == now)
                }
            }
        }
    }

    /// A claimed batch: sent together, the sent ones recorded in one statement with each
    /// provider's id, a failed one retried alone.
    @Test func aBatchIsSentAtOnceAndEachOutcomeIsRecorded() async throws {
        try await withOTPService { otp in
            // The third send fails (retryable); the others are accepted.
            let provider = ScriptedProvider(name: "webhook") { index in
                index == 2 ? ProviderError(retryable: true, "webhook: HTTP 503") : nil
            }
            let dispatcher = otp.service.makeDispatcher(providers: ProviderSet(sms: [provider], email: [provider]))
            var started: [String] = []
            for n in 0..<5 { started.append(try await otp.start("batch\(n)@example.com").verificationID) }
            #expect(try await dispatcher.deliverBatch(worker: "test#0", limit: 16) == 5)
            #expect(provider.sent.count == 5)
            let failedID = provider.sent[2].id
            let rows = try await otp.query(
                "SELECT id, state, code IS NULL, provider_message_id, claimed_by FROM @messages ORDER BY created_at"
            )
            #expect(rows.count == 5)
            for row in rows {
                let id = try row[0].uuid
                if id == failedID {
                    #expect(try row[1].string == "queued")
                    #expect(try !row[2].bool)
                } else {
                    #expect(try row[1].string == "sent")
                    #expect(try row[2].bool)
                    #expect(try row[3].string == "webhook-\(id)")
                    #expect(try row[4].decode(String?.self) == nil)
                }
            }
            // The failed one comes due after its backoff and is sent alone.
            otp.clock.advance(seconds: 2)
            #expect(try await dispatcher.deliverDue() == 1)
            #expect(provider.sent.last?.id == failedID)
        }
    }

    /// AUTH_OTP_PROVIDER_CONCURRENCY: a batch's sends wait for permits beyond the limit.
    @Test func aProviderNeverGetsMoreRequestsAtOnceThanItsLimit() async throws {
        final class Concurrent: MessageProvider {
            let name = "webhook"
            let running = Atomic<Int>(0)
            let highest = Atomic<Int>(0)
            let sent = Atomic<Int>(0)
            func send(_ message: OutgoingMessage) async throws -> ProviderReceipt {
                highest.max(running.add(1, ordering: .relaxed).newValue, ordering: .relaxed)
                for _ in 0..<20 { await Task.yield() }
                running.subtract(1, ordering: .relaxed)
                sent.add(1, ordering: .relaxed)
                return ProviderReceipt(providerMessageID: nil)
            }
        }
        try await withOTPService(configure: { $0.providerConcurrency = 2 }) { otp in
            let provider = Concurrent()
            let dispatcher = otp.service.makeDispatcher(providers: ProviderSet(sms: [provider], email: [provider]))
            for n in 0..<10 { _ = try await otp.start("limit\(n)@example.com") }
            #expect(try await dispatcher.deliverBatch(worker: "test#0", limit: 16) == 10)
            #expect(provider.sent.load(ordering: .relaxed) == 10)
            #expect((1...2).contains(provider.highest.load(ordering: .relaxed)))
            let sent = try await otp.query("SELECT count(*) FROM @messages WHERE state = 'sent'")
            #expect(try sent[0][0].int == 10)
        }
    }

    @Test func failoverHandsTheSameCodeToTheSecondary() async throws {
        try await withOTPService(configure: { $0.deliveryAttempts = 2 }) { otp in
            let primary = ScriptedProvider(name: "twilio") { _ in ProviderError(retryable: false, "twilio: HTTP 400") }
            let secondary = ScriptedProvider(name: "webhook")
            let dispatcher = otp.service.makeDispatcher(
                providers: ProviderSet(sms: [primary, secondary], email: [secondary])
            )
            let started = try await otp.start("+447700900111")
            let code = try await otp.queuedCode(started.verificationID)
            // A refusal (not retryable) fails over at once; the secondary is due immediately.
            #expect(try await dispatcher.deliverDue() == 2)
            #expect(primary.sent.count == 1)
            #expect(secondary.sent.map(\.code) == [code])
            #expect(secondary.sent.first?.id == primary.sent.first?.id)
            let status = try await otp.operatorClient.getDeliveryStatus(.init(verificationID: started.verificationID))
            #expect(status.state == .sent)
            #expect(status.provider == "webhook")
        }
    }

    @Test func aClaimOfADeadWorkerExpiresAndTheMessageIsSentAgain() async throws {
        try await withOTPService { otp in
            let provider = ScriptedProvider(name: "log")
            let dispatcher = otp.service.makeDispatcher(providers: ProviderSet(sms: [provider], email: [provider]))
            _ = try await otp.start("asha@example.com")
            // A worker claims the message and dies before sending it.
            let now = otp.clock.now()
            let claimed = try await otp.service.store.claim(
                now: now,
                leaseUntil: now.addingTimeInterval(30),
                worker: "dead#0",
                limit: 10
            )
            #expect(claimed.count == 1)
            #expect(try await dispatcher.deliverDue() == 0)
            otp.clock.advance(seconds: 29)
            #expect(try await dispatcher.deliverDue() == 0)
            otp.clock.advance(seconds: 1)
            #expect(try await dispatcher.deliverDue() == 1)
            #expect(provider.sent.count == 1)
            let rows = try await otp.query("SELECT state, total_attempts FROM @messages")
            #expect(try rows[0][0].string == "sent")
            #expect(try rows[0][1].int == 2)
        }
    }

    @Test func aClaimTakesExpiredClaimsFirstThenTheOldestDueUpToItsLimit() async throws {
        try await withOTPService { otp in
            for index in 1...7 {
                _ = try await otp.start("m\(index)@example.com", clientIP: "")
                otp.clock.advance(seconds: 1)
            }
            let store = otp.service.store
            func claim(_ limit: Int, leaseSeconds: Double, worker: String) async throws -> Set<String> {
                let claimed = try await store.claim(
                    now: otp.clock.now(),
                    leaseUntil: otp.clock.now().addingTimeInterval(leaseSeconds),
                    worker: worker,
                    limit: limit
                )
                return Set(claimed.map(\.destination))
            }
            // The oldest due first, never more than the limit.
            #expect(try await claim(2, leaseSeconds: 10, worker: "dead#0") == ["m1@example.com", "m2@example.com"])
            #expect(try await claim(2, leaseSeconds: 60, worker: "busy#0") == ["m3@example.com", "m4@example.com"])
            otp.clock.advance(seconds: 11)
            // The dead worker's claims have expired, the busy one's have not. The expired ones
            // and the due ones share the limit: two expired leave room for one of the three due.
            #expect(
                try await claim(3, leaseSeconds: 30, worker: "live#0")
                    == ["m1@example.com", "m2@example.com", "m5@example.com"]
            )
            #expect(try await claim(10, leaseSeconds: 30, worker: "live#1") == ["m6@example.com", "m7@example.com"])
            #expect(try await claim(10, leaseSeconds: 30, worker: "live#2").isEmpty)
            let rows = try await otp.query(
                "SELECT destination, claimed_by, total_attempts FROM @messages ORDER BY destination"
            )
            let claims = try rows.map { "\(try $0[0].string) \(try $0[1].string) \(try $0[2].int)" }
            #expect(
                claims == [
                    "m1@example.com live#0 2", "m2@example.com live#0 2", "m3@example.com busy#0 1",
                    "m4@example.com busy#0 1", "m5@example.com live#0 1", "m6@example.com live#1 1",
                    "m7@example.com live#1 1",
                ]
            )
        }
    }

    @Test func twoDispatchersNeverClaimTheSameMessage() async throws {
        try await withOTPService(maxConnections: 12) { otp in
            let first = ScriptedProvider(name: "log")
            let second = ScriptedProvider(name: "log")
            let a = otp.service.makeDispatcher(providers: ProviderSet(sms: [first], email: [first]), workerName: "a")
            let b = otp.service.makeDispatcher(providers: ProviderSet(sms: [second], email: [second]), workerName: "b")
            for index in 0..<60 { _ = try await otp.start("user\(index)@example.com", clientIP: "") }
            async let x = a.deliverDue(limit: 3)
            async let y = b.deliverDue(limit: 3)
            let (sentA, sentB) = try await (x, y)
            #expect(sentA + sentB == 60)
            let ids = (first.sent + second.sent).map(\.id)
            #expect(Set(ids).count == 60)
            #expect(ids.count == 60)
        }
    }

    @Test func webhookPostsTheSignedJSON() async throws {
        try await HTTPReceiver.with { receiver in
            try await withOTPService(configure: {
                $0.emailProvider = .webhook
                $0.webhookURL = "http://127.0.0.1:\(receiver.port)/otp"
                $0.webhookSecret = "shared webhook secret ✓"
                $0.appName = "Laten"
            }) { otp in
                let factory = ProviderFactory(configuration: otp.configuration, logger: testLogger)
                let dispatcher = otp.service.makeDispatcher(providers: factory.providerSet())
                let started = try await otp.start("asha@example.com", purpose: .passwordReset, locale: "es-MX")
                let code = try await otp.queuedCode(started.verificationID)
                #expect(try await dispatcher.deliverDue() == 1)
                await factory.shutdown()
                let request = try #require(receiver.requests.first)
                #expect(request.method == "POST")
                #expect(request.path == "/otp")
                #expect(request.headers["content-type"] == "application/json")
                let expected =
                    "sha256="
                    + HMACSHA256.authenticationCode(for: request.body, key: Array("shared webhook secret ✓".utf8))
                    .map { String(format: "%02x", $0) }.joined()
                #expect(request.headers["x-auth-signature"] == expected)
                let json = try #require(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
                #expect(json["channel"] as? String == "email")
                #expect(json["to"] as? String == "asha@example.com")
                #expect(json["code"] as? String == code)
                #expect(json["purpose"] as? String == "password_reset")
                #expect(json["locale"] as? String == "es-MX")
                #expect(json["subject"] as? String == "Tu código de verificación de Laten")
                #expect((json["body"] as? String)?.contains(code) == true)
                #expect((json["id"] as? String).flatMap(UUID.init(uuidString:)) != nil)
                #expect(json["created_at"] as? String == "2026-06-01T00:00:00Z")
                #expect(json["expires_at"] as? String == "2026-06-01T00:10:00Z")
                let status = try await otp.operatorClient.getDeliveryStatus(
                    .init(verificationID: started.verificationID)
                )
                #expect(status.state == .sent)
                #expect(status.provider == "webhook")
            }
        }
    }

    @Test func smsTextCarriesTheAutofillLineWhenADomainIsSet() {
        let sms = MessageTemplates.render(
            channel: .sms,
            code: "532917",
            locale: "en-IN",
            appName: "UrbanNest",
            smsDomain: "urbannest.com",
            codeLifetimeMinutes: 10
        )
        #expect(sms.body == "532917 is your UrbanNest verification code\n\n@urbannest.com #532917")
        #expect(sms.subject == nil)
        let plain = MessageTemplates.render(
            channel: .sms,
            code: "532917",
            locale: "xx",
            appName: "UrbanNest",
            smsDomain: nil,
            codeLifetimeMinutes: 10
        )
        #expect(plain.body == "532917 is your UrbanNest verification code")
        let email = MessageTemplates.render(
            channel: .email,
            code: "000123",
            locale: "",
            appName: "Laten",
            smsDomain: "x.com",
            codeLifetimeMinutes: 10
        )
        #expect(email.subject == "Your Laten verification code")
        #expect(email.body.hasPrefix("Your Laten verification code is 000123."))
        #expect(email.body.contains("10 minutes"))
    }
}
