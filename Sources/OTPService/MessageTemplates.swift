/// The text of a code's message: for SMS a body, for email a subject and a plain-text body.
public struct RenderedMessage: Sendable, Hashable {
    public var subject: String?
    public var body: String
}

/// Message templates per language; English is the default for any locale without its own.
///
/// SMS follows the seed's format (001 "SMS Format"): `<code> is your <app> verification code`,
/// and when a domain is configured a last line `@<domain> #<code>`, which iOS and Android use
/// to offer the code for autofill only in the app of that domain.
public enum MessageTemplates {
    struct Template: Sendable {
        var sms: @Sendable (_ code: String, _ app: String) -> String
        var subject: @Sendable (_ app: String) -> String
        var email: @Sendable (_ code: String, _ app: String, _ minutes: Int) -> String
    }

    static let templates: [String: Template] = [
        "en": Template(
            sms: { code, app in "\(code) is your \(app) verification code" },
            subject: { app in "Your \(app) verification code" },
            email: { code, app, minutes in
                "Your \(app) verification code is \(code).\n\nIt expires in \(minutes) minutes. "
                    + "If you did not ask for it, you can ignore this email."
            }
        ),
        "es": Template(
            sms: { code, app in "\(code) es tu código de verificación de \(app)" },
            subject: { app in "Tu código de verificación de \(app)" },
            email: { code, app, minutes in
                "Tu código de verificación de \(app) es \(code).\n\nCaduca en \(minutes) minutos. "
                    + "Si no lo pediste, puedes ignorar este correo."
            }
        ),
        "hi": Template(
            sms: { code, app in "\(code) आपका \(app) सत्यापन कोड है" },
            subject: { app in "आपका \(app) सत्यापन कोड" },
            email: { code, app, minutes in
                "आपका \(app) सत्यापन कोड \(code) है।\n\nयह \(minutes) मिनट में समाप्त हो जाएगा। "
                    + "यदि आपने इसका अनुरोध नहीं किया है, तो इस ईमेल को अनदेखा करें।"
            }
        ),
    ]

    /// The languages with a template of their own.
    public static var languages: [String] { templates.keys.sorted() }

    /// Renders the message for `channel` in `locale`'s language (its part before `-`), English
    /// when there is no template for it.
    public static func render(
        channel: Channel,
        code: String,
        locale: String,
        appName: String,
        smsDomain: String?,
        codeLifetimeMinutes: Int
    ) -> RenderedMessage {
        let language = String(locale.split(separator: "-").first ?? "en").lowercased()
        let template = templates[language] ?? templates["en"]!
        switch channel {
        case .sms:
            var body = template.sms(code, appName)
            if let smsDomain { body += "\n\n@\(smsDomain) #\(code)" }
            return RenderedMessage(subject: nil, body: body)
        case .email:
            return RenderedMessage(
                subject: template.subject(appName),
                body: template.email(code, appName, codeLifetimeMinutes)
            )
        }
    }
}
