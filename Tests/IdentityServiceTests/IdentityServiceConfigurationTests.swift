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

    /// Browser sign-in (issue 21): each provider's redirect flow by its client id, secrets as
    /// values or files, and the redirect flow's client id an audience of ID-token sign-in only
    /// where that is enabled.
    @Test func redirectFlowsAreEnabledByTheirClientIDs() throws {
        let key = try ES256PrivateKey()
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("apple-\(UUID()).p8")
        try Data(try key.pemRepresentation.utf8).write(to: keyFile)
        defer { try? FileManager.default.removeItem(at: keyFile) }
        let configuration = try IdentityServiceConfiguration(environment: [
            "AUTH_PUBLIC_URL": "https://auth.example.com/",
            "AUTH_OAUTH_REDIRECT_URLS": "laten://auth/callback, https://app.example.com/done",
            "AUTH_OAUTH_GOOGLE_CLIENT_ID": "web.apps.googleusercontent.com",
            "AUTH_OAUTH_GOOGLE_CLIENT_SECRET": "google-secret",
            "AUTH_OIDC_GOOGLE_CLIENT_IDS": "ios.apps.googleusercontent.com",
            "AUTH_OAUTH_APPLE_CLIENT_ID": "com.laten.web",
            "AUTH_OAUTH_APPLE_TEAM_ID": "TEAM123456",
            "AUTH_OAUTH_APPLE_KEY_ID": "KEY1234567",
            "AUTH_OAUTH_APPLE_PRIVATE_KEY": keyFile.path,
            "AUTH_OIDC_APPLE_DISCOVERY_URL": "http://127.0.0.1:9400/apple/.well-known/openid-configuration",
            "AUTH_OAUTH_PROVIDER_TIMEOUT_MS": "2500",
        ])
        let oauth = configuration.oauth
        #expect(oauth.publicURL == "https://auth.example.com")
        #expect(oauth.callbackURL(.apple) == "https://auth.example.com/v1/oauth/apple/callback")
        #expect(oauth.providerTimeout == .milliseconds(2500))
        #expect(oauth.allows(redirectTo: "laten://auth/callback"))
        #expect(oauth.allows(redirectTo: "laten://auth/callback?screen=home"))
        #expect(!oauth.allows(redirectTo: "laten://auth/callback/more"))
        #expect(!oauth.allows(redirectTo: "https://evil.example/done"))
        #expect(!oauth.allows(redirectTo: "https://app.example.com/done#x"))
        let google = try #require(oauth.clients[.google])
        guard case .fixed("google-secret") = google.secret else {
            Issue.record("google's secret")
            return
        }
        guard case .discovery(let googleDiscovery) = google.endpoints else {
            Issue.record("google")
            return
        }
        #expect(googleDiscovery.absoluteString == "https://accounts.google.com/.well-known/openid-configuration")
        let apple = try #require(oauth.clients[.apple])
        guard case .apple("TEAM123456", "KEY1234567", let read) = apple.secret else {
            Issue.record("apple")
            return
        }
        #expect(try read.rawRepresentation == key.rawRepresentation)
        #expect(oauth.clients[.facebook] == nil)
        // ID-token sign-in accepts the web client for Google, where it is enabled, and stays
        // off for Apple, where only the redirect flow is.
        #expect(
            configuration.providers[.google]?.clientIDs == [
                "ios.apps.googleusercontent.com", "web.apps.googleusercontent.com",
            ]
        )
        #expect(configuration.providers[.apple] == nil)
    }

    @Test func aRedirectFlowNeedsItsSettings() {
        let base = [
            "AUTH_PUBLIC_URL": "https://auth.example.com", "AUTH_OAUTH_REDIRECT_URLS": "laten://auth/callback",
            "AUTH_OAUTH_FACEBOOK_CLIENT_ID": "123",
        ]
        let cases: [([String: String], String)] = [
            (base, "AUTH_OAUTH_FACEBOOK_CLIENT_SECRET: is required"),
            (
                ["AUTH_OAUTH_GOOGLE_CLIENT_SECRET": "s"],
                "AUTH_OAUTH_GOOGLE_CLIENT_SECRET: is set but AUTH_OAUTH_GOOGLE_CLIENT_ID is not"
            ),
            (base.merging(["AUTH_PUBLIC_URL": ""]) { $1 }, "AUTH_PUBLIC_URL: is required"),
            (base.merging(["AUTH_OAUTH_REDIRECT_URLS": "laten://*"]) { $1 }, "AUTH_OAUTH_REDIRECT_URLS: must be"),
            (
                base.merging(["AUTH_OAUTH_FACEBOOK_CLIENT_SECRET": "/nonexistent/secret"]) { $1 },
                "AUTH_OAUTH_FACEBOOK_CLIENT_SECRET: starts with / but is not a readable file"
            ),
            (
                base.merging([
                    "AUTH_OAUTH_FACEBOOK_CLIENT_SECRET": "s",
                    "AUTH_OAUTH_FACEBOOK_GRAPH_URL": "http://graph.example.com",
                ]) { $1 },
                "AUTH_OAUTH_FACEBOOK_GRAPH_URL: must be an https:// URL"
            ),
            (
                [
                    "AUTH_PUBLIC_URL": "https://a.example", "AUTH_OAUTH_REDIRECT_URLS": "laten://x",
                    "AUTH_OAUTH_APPLE_CLIENT_ID": "c", "AUTH_OAUTH_APPLE_TEAM_ID": "t", "AUTH_OAUTH_APPLE_KEY_ID": "k",
                    "AUTH_OAUTH_APPLE_PRIVATE_KEY": "not a key",
                ],
                "AUTH_OAUTH_APPLE_PRIVATE_KEY: must be the PEM text"
            ),
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
                "AUTH_OIDC_FACEBOOK_ISSUER: is set but neither AUTH_OIDC_FACEBOOK_CLIENT_IDS nor AUTH_OAUTH_FACEBOOK_CLIENT_ID is"
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
            #expect(OIDCProviderConfiguration.isAcceptableProviderURL(URL(string: good)!), "\(good)")
        }
        for bad in ["http://10.0.0.1/jwks", "ftp://x/y", "http://127.0.0.1.evil.com/jwks", "http://example.com/jwks"] {
            #expect(!OIDCProviderConfiguration.isAcceptableProviderURL(URL(string: bad)!), "\(bad)")
        }
    }
}
