import AuthConfiguration
import AuthCrypto
import Foundation
import Testing

@testable import OTPService

@Suite struct OTPServiceConfigurationTests {
    let secret = Data(repeating: 7, count: 32).base64EncodedString()

    func problem(_ variables: [String: String]) -> String? {
        do {
            _ = try OTPServiceConfiguration(environment: variables)
            return nil
        } catch let error as ConfigurationError {
            return error.description
        } catch {
            return "\(error)"
        }
    }

    @Test func defaultsAreTheSeedsNumbers() throws {
        let configuration = try OTPServiceConfiguration(environment: ["AUTH_OTP_SECRET": secret])
        #expect(configuration.codeLifetime == .seconds(600))
        #expect(configuration.maxWrongCodes == 5)
        #expect(configuration.lockout == .seconds(900))
        #expect(configuration.firstResendDelay == .seconds(60))
        #expect(configuration.resendInterval == .seconds(120))
        #expect(configuration.maxResends == 3)
        #expect(configuration.resendWindow == .seconds(900))
        #expect(configuration.startsPerDestinationPerHour == 10)
        #expect(configuration.startsPerIPPerHour == 100)
        #expect(configuration.pumpingMinimumSent == 100)
        #expect(configuration.pumpingMinimumVerifiedPercent == 20)
        #expect(configuration.smsProvider == .log && configuration.emailProvider == .log)
        #expect(configuration.secret == Array(repeating: 7, count: 32))
    }

    @Test func theSecretIsRequiredAndStrict() {
        #expect(problem([:])?.hasPrefix("AUTH_OTP_SECRET: is required") == true)
        let short = Data(repeating: 1, count: 31).base64EncodedString()
        #expect(
            problem(["AUTH_OTP_SECRET": short])
                == "AUTH_OTP_SECRET: must be standard base64 (with = padding) of at least 32 bytes"
        )
        // Unpadded, URL-safe alphabet: refused.
        let unpadded = String(Data(repeating: 0xFB, count: 32).base64EncodedString().dropLast())
        #expect(problem(["AUTH_OTP_SECRET": unpadded]) != nil)
        #expect(problem(["AUTH_OTP_SECRET": unpadded.replacingOccurrences(of: "+", with: "-")]) != nil)
    }

    @Test func numbersAreCheckedAgainstTheirRanges() {
        #expect(
            problem(["AUTH_OTP_SECRET": secret, "AUTH_OTP_CODE_TTL_SECONDS": "59"])
                == "AUTH_OTP_CODE_TTL_SECONDS: must be a whole number of seconds in 60...86400"
        )
        #expect(
            problem(["AUTH_OTP_SECRET": secret, "AUTH_OTP_PUMPING_MIN_VERIFIED_PERCENT": "101"])
                == "AUTH_OTP_PUMPING_MIN_VERIFIED_PERCENT: must be a whole number in 0...100"
        )
        #expect(
            problem(["AUTH_OTP_SECRET": secret, "AUTH_OTP_SMS_DENIED_CALLING_CODES": "+7, 0"])?
                .hasPrefix("AUTH_OTP_SMS_DENIED_CALLING_CODES") == true
        )
        #expect(
            problem([
                "AUTH_OTP_SECRET": secret, "AUTH_OTP_CLAIM_LEASE_SECONDS": "5", "AUTH_OTP_HTTP_TIMEOUT_MS": "5000",
            ])?
            .hasPrefix("AUTH_OTP_CLAIM_LEASE_SECONDS") == true
        )
        // 8 workers × 16 per claim ÷ 16 per provider: a batch may wait 8 timeouts of 5 s.
        let rounds = problem([
            "AUTH_OTP_SECRET": secret, "AUTH_OTP_CLAIM_LEASE_SECONDS": "30", "AUTH_OTP_HTTP_TIMEOUT_MS": "5000",
            "AUTH_OTP_PROVIDER_CONCURRENCY": "16",
        ])
        #expect(rounds?.contains("rounded up: 8") == true, "\(rounds ?? "accepted")")
        #expect(
            problem([
                "AUTH_OTP_SECRET": secret, "AUTH_OTP_CLAIM_LEASE_SECONDS": "41", "AUTH_OTP_HTTP_TIMEOUT_MS": "5000",
                "AUTH_OTP_PROVIDER_CONCURRENCY": "16",
            ]) == nil
        )
    }

    @Test func providersNeedTheirSettings() throws {
        #expect(
            problem(["AUTH_OTP_SECRET": secret, "AUTH_OTP_SMS_PROVIDER": "carrier-pigeon"])
                == "AUTH_OTP_SMS_PROVIDER: must be one of log, webhook, twilio"
        )
        #expect(
            problem(["AUTH_OTP_SECRET": secret, "AUTH_OTP_EMAIL_PROVIDER": "webhook"])?.hasPrefix(
                "AUTH_OTP_WEBHOOK_URL"
            ) == true
        )
        #expect(
            problem([
                "AUTH_OTP_SECRET": secret, "AUTH_OTP_EMAIL_PROVIDER": "webhook",
                "AUTH_OTP_WEBHOOK_URL": "http://hook.example/otp",
            ])?
            .hasPrefix("AUTH_OTP_WEBHOOK_SECRET") == true
        )
        #expect(
            problem(["AUTH_OTP_SECRET": secret, "AUTH_OTP_EMAIL_PROVIDER": "twilio"])?.hasPrefix(
                "AUTH_OTP_EMAIL_PROVIDER"
            ) == true
        )
        #expect(
            problem(["AUTH_OTP_SECRET": secret, "AUTH_OTP_SMS_PROVIDER": "twilio"])?.hasPrefix(
                "AUTH_OTP_TWILIO_ACCOUNT_SID"
            ) == true
        )
        let configuration = try OTPServiceConfiguration(environment: [
            "AUTH_OTP_SECRET": secret, "AUTH_OTP_SMS_PROVIDER": "webhook", "AUTH_OTP_SMS_FALLBACK_PROVIDER": "log",
            "AUTH_OTP_WEBHOOK_URL": "https://sms.example/otp", "AUTH_OTP_WEBHOOK_SECRET": " any string ",
        ])
        #expect(configuration.providers(for: .sms) == [.webhook, .log])
        #expect(configuration.providers(for: .email) == [.log])
        // The webhook key is the string's exact UTF-8 bytes, spaces included.
        #expect(configuration.webhookSecret == " any string ")
    }
}
