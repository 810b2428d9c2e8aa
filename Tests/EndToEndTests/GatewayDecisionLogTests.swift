import AuthTestSupport
import Foundation
import Testing

// Issue 19, "Every authentication decision in the log": a failed password sign-in, a code sent,
// a wrong verification id and a bad token left no line in any log, so an operator could not
// follow a user's "I could not sign in at 10:32" from the X-Request-Id the app shows.
extension GatewayEndToEndTests {
    @Suite(.timeLimit(.minutes(1))) struct DecisionLog {
        /// The lines of `log` that contain every part.
        static func lines(_ log: String, _ parts: String...) -> [Substring] {
            log.split(separator: "\n").filter { line in parts.allSatisfy { line.contains($0) } }
        }

        @Test func everyDecisionIsOneLineWithTheRequestIDAndTheMaskedContact() async throws {
            let fixture = try fixture()
            let (gateway, base) = try await fixture.startGateway([:])
            let secret = "Not-The-Password-93"
            let email = GatewayFixture.newEmail("decision")
            let failed = try await fixture.send(
                .POST,
                "/v1/login",
                json: ["email": email, "password": secret],
                base: base
            )
            expectError(failed, 401, "invalid_credentials")
            let phone = GatewayFixture.newPhone()
            let signedIn = try await fixture.signInWithCode(phone: phone, base: base)
            let refused = try await fixture.get("/v1/me", token: "not-a-token", base: base)
            expectError(refused, 401, "invalid_token")
            let failedID = try #require(failed.header("X-Request-Id"))
            let signedInID = try #require(signedIn.header("X-Request-Id"))
            let refusedID = try #require(refused.header("X-Request-Id"))
            let maskedEmail = String(email.prefix(1)) + "***@example.com"
            let maskedPhone = "+1" + String(repeating: "*", count: phone.count - 6) + phone.suffix(4)

            // The refused request's access line is the last the gateway writes for these
            // requests (after its decision line): wait for it, not for an earlier one, as the
            // log reaches the test through a pipe a reader thread drains at its own pace.
            let found = await eventually {
                !Self.lines(gateway.log, "Request", "http.route=/v1/me", "request_id=\(refusedID)").isEmpty
            }
            #expect(found)
            let log = gateway.log
            // The failed sign-in: its reason, the masked email, the method; never the password.
            let failure = Self.lines(
                log,
                "Authentication decision",
                "request_id=\(failedID)",
                "auth.event=sign_in",
                "auth.outcome=failure",
                "auth.reason=invalid_credentials",
                "auth.contact=\(maskedEmail)",
                "auth.method=password",
                "traceparent=00-"
            )
            #expect(failure.count == 1, "\(log)")
            #expect(!log.contains(secret))
            #expect(!log.contains(email))
            // The code sent and the code sign-in, with the masked phone and the user.
            let user = try #require(signedIn.user["id"] as? String)
            #expect(
                Self.lines(
                    log,
                    "auth.event=code_sent",
                    "auth.outcome=success",
                    "auth.contact=\(maskedPhone)",
                    "auth.method=otp_sms"
                ).count == 1,
                "\(log)"
            )
            #expect(
                Self.lines(
                    log,
                    "request_id=\(signedInID)",
                    "auth.event=sign_in",
                    "auth.outcome=success",
                    "auth.contact=\(maskedPhone)",
                    "auth.user_id=\(user)"
                ).count == 1,
                "\(log)"
            )
            #expect(!log.contains(phone))
            // The refused token.
            #expect(
                Self.lines(log, "request_id=\(refusedID)", "auth.event=token_refused", "auth.reason=invalid_token")
                    .count == 1,
                "\(log)"
            )
            // The access log: one line per request with the route template and status.
            #expect(
                Self.lines(
                    log,
                    "Request",
                    "http.method=POST",
                    "http.route=/v1/login",
                    "http.status=401",
                    "request_id=\(failedID)"
                ).count == 1,
                "\(log)"
            )
            #expect(
                Self.lines(
                    log,
                    "Request",
                    "http.method=GET",
                    "http.route=/v1/me",
                    "http.status=401",
                    "request_id=\(refusedID)"
                ).count == 1,
                "\(log)"
            )
        }

        @Test func theAccessLogCanBeTurnedOff() async throws {
            let fixture = try fixture()
            let (gateway, base) = try await fixture.startGateway(["AUTH_GATEWAY_ACCESS_LOG": "false"])
            let refused = try await fixture.get("/v1/me", token: "not-a-token", base: base)
            let id = try #require(refused.header("X-Request-Id"))
            let found = await eventually { !Self.lines(gateway.log, "request_id=\(id)").isEmpty }
            #expect(found)
            // The decision is logged; no access line is.
            #expect(Self.lines(gateway.log, "auth.event=token_refused", "request_id=\(id)").count == 1)
            #expect(Self.lines(gateway.log, "http.route=").isEmpty, "\(gateway.log)")
        }

        /// Issue 19: `/metrics` was on the public listener; it moves to the admin port.
        @Test func metricsAreOnTheAdminPortNotThePublicOne() async throws {
            let fixture = try fixture()
            let (gateway, base) = try await fixture.startGateway([:])
            _ = try await fixture.get("/health/live", base: base)
            let publicMetrics = try await fixture.send(.GET, "/metrics", base: base)
            #expect(publicMetrics.status == 404, "\(publicMetrics)")
            let adminPort = try await gateway.waitForLog(#"admin\.port=(\d+)"#)
            let metrics = try await httpGet("http://127.0.0.1:\(adminPort)/metrics")
            #expect(metrics.status == 200)
            #expect(metrics.body.contains("http_requests_total"), "\(metrics.body.prefix(500))")
        }
    }
}
