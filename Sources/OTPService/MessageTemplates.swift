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
        /// The line that offers the link (after the code's paragraph).
        var link: @Sendable (_ link: String) -> String
    }

    static let templates: [String: Template] = [
        "en": Template(
            sms: { code, app in "\(code) is your \(app) verification code" },
            subject: { app in "Your \(app) verification code" },
            email: { code, app, minutes in
                "Your \(app) verification code is \(code).\n\nIt expires in \(minutes) minutes. "
                    + "If you did not ask for it, you can ignore this email."
            },
            link: { link in "Or confirm by opening this link: \(link)" }
        ),
        "es": Template(
            sms: { code, app in "\(code) es tu código de verificación de \(app)" },
            subject: { app in "Tu código de verificación de \(app)" },
            email: { code, app, minutes in
                "Tu código de verificación de \(app) es \(code).\n\nCaduca en \(minutes) minutos. "
                    + "Si no lo pediste, puedes ignorar este correo."
            },
            link: { link in "O confirma abriendo este enlace: \(link)" }
        ),
        "hi": Template(
            sms: { code, app in "\(code) आपका \(app) सत्यापन कोड है" },
            subject: { app in "आपका \(app) सत्यापन कोड" },
            email: { code, app, minutes in
                "आपका \(app) सत्यापन कोड \(code) है।\n\nयह \(minutes) मिनट में समाप्त हो जाएगा। "
                    + "यदि आपने इसका अनुरोध नहीं किया है, तो इस ईमेल को अनदेखा करें।"
            },
            link: { link in "या इस लिंक को खोलकर पुष्टि करें: \(link)" }
        ),
    ]

    /// A notice's text (no code): that the account's phone number or email was changed.
    public static func renderContactChanged(channel: Channel, locale: String, appName: String) -> RenderedMessage {
        let language = String(locale.split(separator: "-").first ?? "en").lowercased()
        let what = channel == .sms ? "phone number" : "email address"
        switch language {
        case "es":
            let queCosa = channel == .sms ? "número de teléfono" : "correo electrónico"
            return RenderedMessage(
                subject: channel == .email ? "Tu correo de \(appName) cambió" : nil,
                body: "Este \(queCosa) ya no está en tu cuenta de \(appName). Si no fuiste tú, contacta con soporte."
            )
        case "hi":
            let kya = channel == .sms ? "फ़ोन नंबर" : "ईमेल पता"
            return RenderedMessage(
                subject: channel == .email ? "आपका \(appName) ईमेल बदल गया" : nil,
                body: "यह \(kya) अब आपके \(appName) खाते पर नहीं है। यदि यह आपने नहीं किया, तो सहायता से संपर्क करें।"
            )
        default:
            return RenderedMessage(
                subject: channel == .email ? "Your \(appName) email was changed" : nil,
                body:
                    "This \(what) is no longer on your \(appName) account: it was changed. "
                    + "If this wasn't you, contact support."
            )
        }
    }

    /// A notice's text (no code): that someone tried to sign up with this phone number or email,
    /// which an account already has.
    public static func renderSignupAttempted(channel: Channel, locale: String, appName: String) -> RenderedMessage {
        let language = String(locale.split(separator: "-").first ?? "en").lowercased()
        switch language {
        case "es":
            let queCosa = channel == .sms ? "este número de teléfono" : "este correo"
            return RenderedMessage(
                subject: channel == .email ? "Intento de registro en \(appName)" : nil,
                body: "Alguien intentó registrarse en \(appName) con \(queCosa), que ya tiene una cuenta. "
                    + "Si fuiste tú, inicia sesión o restablece tu contraseña; si no, ignora este mensaje."
            )
        case "hi":
            let kya = channel == .sms ? "इस फ़ोन नंबर" : "इस ईमेल"
            return RenderedMessage(
                subject: channel == .email ? "\(appName) पर साइन-अप का प्रयास" : nil,
                body: "किसी ने \(kya) से \(appName) पर साइन अप करने का प्रयास किया, जिसका खाता पहले से है। "
                    + "यदि यह आप थे, तो साइन इन करें या पासवर्ड रीसेट करें; अन्यथा इस संदेश को अनदेखा करें।"
            )
        default:
            let what = channel == .sms ? "phone number" : "email address"
            return RenderedMessage(
                subject: channel == .email ? "Someone tried to sign up to \(appName)" : nil,
                body:
                    "Someone tried to sign up to \(appName) with this \(what), which already has an account. "
                    + "If it was you, sign in or reset your password; if not, you can ignore this message."
            )
        }
    }

    /// The text of a notice (a message without a code) of `purpose`, nil for a code's purpose.
    public static func renderNotice(
        _ purpose: String,
        channel: Channel,
        locale: String,
        appName: String
    ) -> RenderedMessage? {
        switch purpose {
        case Purpose.contactChanged.rawValue:
            renderContactChanged(channel: channel, locale: locale, appName: appName)
        case Purpose.signupAttempted.rawValue:
            renderSignupAttempted(channel: channel, locale: locale, appName: appName)
        default: nil
        }
    }

    /// The languages with a template of their own.
    public static var languages: [String] { templates.keys.sorted() }

    /// Renders the message for `channel` in `locale`'s language (its part before `-`), English
    /// when there is no template for it. An email's `link` (a sign-up's confirmation link) is a
    /// last paragraph.
    public static func render(
        channel: Channel,
        code: String,
        locale: String,
        appName: String,
        smsDomain: String?,
        codeLifetimeMinutes: Int,
        link: String? = nil
    ) -> RenderedMessage {
        let language = String(locale.split(separator: "-").first ?? "en").lowercased()
        let template = templates[language] ?? templates["en"]!
        switch channel {
        case .sms:
            var body = template.sms(code, appName)
            if let smsDomain { body += "\n\n@\(smsDomain) #\(code)" }
            return RenderedMessage(subject: nil, body: body)
        case .email:
            var body = template.email(code, appName, codeLifetimeMinutes)
            if let link { body += "\n\n" + template.link(link) }
            return RenderedMessage(subject: template.subject(appName), body: body)
        }
    }
}
