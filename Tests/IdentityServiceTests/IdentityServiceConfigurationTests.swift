import AuthCrypto
import Foundation
import Testing

@testable import IdentityService

@Suite struct IdentityServiceConfigurationTests {
    @Test func defaults() throws {
        let configuration = try IdentityServiceConfiguration(environment: [:])
        #expect(configuration.passwordPolicyMode == .composition)
        #expect(configuration.scryptParameters == .init(logN: 17, r: 8, p: 1))
        #expect(configuration.hashConcurrency == ProcessInfo.processInfo.activeProcessorCount)
        #expect(configuration.maxSignInFailures == 10)
        #expect(configuration.signInFailureWindow == .seconds(900))
        #expect(configuration.providers.isEmpty)
    }

    @Test func providersAreEnabledByTheirClientIDs() throws {
        let configuration = try IdentityServiceConfiguration(environment: [
            "AUTH_OIDC_APPLE_CLIENT_IDS": "com.laten.app, com.laten.app.dev",
            "AUTH_OIDC_GOOGLE_CLIENT_IDS": "123.apps.googleusercontent.com",
            "AUTH_OIDC_GOOGLE_ISSUER": "https://issuer.test",
            "AUTH_OIDC_GOOGLE_JWKS_URL": "http://127.0.0.1:8081/jwks",
        ])
        let apple = try #require(configuration.providers[.apple])
        #expect(apple.clientIDs == ["com.laten.app", "com.laten.app.dev"])
        #expect(apple.issuers == ["https://appleid.apple.com"])
        #expect(apple.jwksURL.absoluteString == "https://appleid.apple.com/auth/keys")
        let google = try #require(configuration.providers[.google])
        #expect(google.issuers == ["https://issuer.test"])
        #expect(google.jwksURL.absoluteString == "http://127.0.0.1:8081/jwks")
        #expect(configuration.providers[.facebook] == nil)
    }

    @Test func badValuesNameTheVariable() {
        let cases: [([String: String], String)] = [
            (["AUTH_IDENTITY_PASSWORD_POLICY": "strict"], "AUTH_IDENTITY_PASSWORD_POLICY: must be composition or nist"),
            (["AUTH_IDENTITY_SCRYPT_LOG_N": "21"], "AUTH_IDENTITY_SCRYPT_LOG_N: must be a whole number in 10...20"),
            (["AUTH_IDENTITY_SCRYPT_LOG_N": "20", "AUTH_IDENTITY_SCRYPT_R": "16"], "AUTH_IDENTITY_SCRYPT_LOG_N: with"),
            (
                ["AUTH_IDENTITY_SIGNIN_WINDOW_SECONDS": "10"],
                "AUTH_IDENTITY_SIGNIN_WINDOW_SECONDS: must be a whole number of seconds in 60...86400"
            ),
            (
                ["AUTH_OIDC_APPLE_CLIENT_IDS": "a", "AUTH_OIDC_APPLE_JWKS_URL": "http://example.com/keys"],
                "AUTH_OIDC_APPLE_JWKS_URL: must be an https:// URL (http:// only to a loopback address)"
            ),
            (
                ["AUTH_OIDC_FACEBOOK_ISSUER": "https://www.facebook.com"],
                "AUTH_OIDC_FACEBOOK_ISSUER: is set but AUTH_OIDC_FACEBOOK_CLIENT_IDS is not"
            ),
            (["AUTH_OIDC_GOOGLE_CLIENT_IDS": "a b"], "AUTH_OIDC_GOOGLE_CLIENT_IDS: must be a comma-separated list"),
        ]
        for (environment, expected) in cases {
            do {
                _ = try IdentityServiceConfiguration(environment: environment)
                Issue.record("accepted \(environment)")
            } catch {
                #expect("\(error)".hasPrefix(expected), "\(error)")
            }
        }
    }

    @Test func jwksURLsMustBeHTTPSExceptLoopback() {
        for good in [
            "https://appleid.apple.com/auth/keys", "http://127.0.0.1:9/jwks", "http://localhost/jwks",
            "http://[::1]:80/k",
        ] {
            #expect(OIDCProviderConfiguration.isAcceptableJWKSURL(URL(string: good)!), "\(good)")
        }
        for bad in ["http://10.0.0.1/jwks", "ftp://x/y", "http://127.0.0.1.evil.com/jwks", "http://example.com/jwks"] {
            #expect(!OIDCProviderConfiguration.isAcceptableJWKSURL(URL(string: bad)!), "\(bad)")
        }
    }
}
