import Testing

@testable import OTPService

@Suite struct MessageTemplatesTests {
    /// A contact-change notice carries no code and says what changed, in the locale's language.
    @Test func theContactChangedNoticeHasNoCode() {
        for locale in ["en", "es-ES", "hi-IN", "fr"] {
            for channel in [Channel.sms, .email] {
                let text = MessageTemplates.renderContactChanged(channel: channel, locale: locale, appName: "Laten")
                #expect(text.body.allSatisfy { !$0.isNumber }, "\(locale) \(channel): \(text.body)")
                #expect(text.body.contains("Laten"))
                #expect((text.subject != nil) == (channel == .email))
            }
        }
        #expect(
            MessageTemplates.renderContactChanged(channel: .email, locale: "fr", appName: "Laten").subject
                == "Your Laten email was changed"
        )
    }
}
