import Testing

@testable import AuthDevProvider

@Suite struct ProviderStateTests {
    let start = ContinuousClock.now
    let person = DevOAuthProvider.person(loginHint: nil)

    func pending(expiresAt: ContinuousClock.Instant) -> PendingCode {
        PendingCode(
            provider: .google,
            clientID: "client",
            redirectURI: "http://127.0.0.1/cb",
            person: person,
            expiresAt: expiresAt
        )
    }

    @Test func aCodeIsRedeemedOnceAndNotAfterItExpires() {
        var state = ProviderState()
        state.insertCode("once", pending(expiresAt: start + .seconds(60)), now: start)
        let first = state.redeemCode("once", now: start + .seconds(59))
        let second = state.redeemCode("once", now: start + .seconds(59))
        #expect(first?.clientID == "client")
        #expect(second == nil)

        state.insertCode("late", pending(expiresAt: start + .seconds(60)), now: start)
        let late = state.redeemCode("late", now: start + .seconds(60))
        #expect(late == nil)
        #expect(state.codes.isEmpty)
    }

    @Test func codesAreBoundedAndExpiredOnesDropped() {
        var state = ProviderState()
        for index in 0..<ProviderState.capacity {
            state.insertCode("c\(index)", pending(expiresAt: start + .seconds(60) + .milliseconds(index)), now: start)
        }
        #expect(state.codes.count == ProviderState.capacity)
        state.insertCode("new", pending(expiresAt: start + .seconds(120)), now: start)
        #expect(state.codes.count == ProviderState.capacity)
        #expect(state.codes["c0"] == nil)
        #expect(state.codes["new"] != nil)

        state.insertCode("later", pending(expiresAt: start + .seconds(200)), now: start + .seconds(90))
        #expect(Set(state.codes.keys) == ["new", "later"])
    }

    @Test func tokensExpire() {
        var state = ProviderState()
        state.insertToken(
            "t",
            IssuedToken(provider: .facebook, person: person, expiresAt: start + .seconds(3600)),
            now: start
        )
        #expect(state.token("t", now: start + .seconds(3599))?.person == person)
        #expect(state.token("t", now: start + .seconds(3600)) == nil)
        #expect(state.token("other", now: start) == nil)
    }

    @Test func consentIsFirstOncePerProviderClientAndSubject() {
        var state = ProviderState()
        let firsts = [
            state.recordConsent(provider: .apple, clientID: "a", subject: "s"),
            state.recordConsent(provider: .apple, clientID: "a", subject: "s"),
            state.recordConsent(provider: .apple, clientID: "b", subject: "s"),
            state.recordConsent(provider: .google, clientID: "a", subject: "s"),
        ]
        #expect(firsts == [true, false, true, true])
    }

    @Test func recordedRequestsAreBounded() {
        var state = ProviderState()
        for index in 0...ProviderState.capacity {
            state.record(.init(method: "GET", path: "/\(index)", query: [:], form: [:], headers: [:]))
        }
        #expect(state.requests.count == ProviderState.capacity)
        #expect(state.requests.first?.path == "/1")
    }

    @Test func anEmailHintNamesThePersonOtherHintsTheDefaultOne() {
        let ada = DevOAuthProvider.person(loginHint: "Ada@Example.COM")
        #expect(ada.email == "Ada@Example.COM")
        #expect(ada.subject == DevOAuthProvider.person(loginHint: "ada@example.com").subject)
        #expect(ada.subject.hasPrefix("dev-") && ada.subject.count == 20)
        #expect(DevOAuthProvider.person(loginHint: "someone").email == "dev.user@example.com")
        #expect(DevOAuthProvider.person(loginHint: "a b@example.com").email == "dev.user@example.com")
    }
}
