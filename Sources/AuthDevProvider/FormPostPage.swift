/// The page an authorization answers with in `response_mode=form_post` (OAuth 2.0 Form Post
/// Response Mode): a form of hidden inputs that the browser posts to the redirect URI at once,
/// as Apple's page does. Also reads such a page back, for tests that play the browser.
enum FormPostPage {
    /// The page posting `fields` to `action`. Every value is HTML-escaped.
    static func render(action: String, fields: [(name: String, value: String)]) -> String {
        var lines = [
            "<!DOCTYPE html>",
            "<html>",
            "<head><meta charset=\"utf-8\"><title>Signing in</title></head>",
            "<body onload=\"document.forms[0].submit()\">",
            "<form method=\"post\" action=\"\(escape(action))\">",
        ]
        for field in fields {
            lines.append("<input type=\"hidden\" name=\"\(escape(field.name))\" value=\"\(escape(field.value))\">")
        }
        lines += [
            "<noscript><button type=\"submit\">Continue</button></noscript>",
            "</form>",
            "</body>",
            "</html>",
        ]
        return lines.joined(separator: "\n") + "\n"
    }

    /// `text` safe inside an element or a quoted attribute value.
    static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// `text` with the character references this page (and HTML in general) writes replaced:
    /// `&amp;`, `&lt;`, `&gt;`, `&quot;`, `&apos;`, `&#N;` and `&#xH;`. Others stay as written.
    static func unescape(_ text: some StringProtocol) -> String {
        let named: [Substring: Unicode.Scalar] = ["amp": "&", "lt": "<", "gt": ">", "quot": "\"", "apos": "'"]
        var result = ""
        var rest = Substring(text)
        while let ampersand = rest.firstIndex(of: "&") {
            result += rest[..<ampersand]
            let afterAmpersand = rest.index(after: ampersand)
            guard let semicolon = rest[afterAmpersand...].prefix(10).firstIndex(of: ";") else {
                result += "&"
                rest = rest[afterAmpersand...]
                continue
            }
            let name = rest[afterAmpersand..<semicolon]
            var scalar = named[name]
            if scalar == nil, name.hasPrefix("#") {
                let number = name.dropFirst()
                let value =
                    number.hasPrefix("x") || number.hasPrefix("X")
                    ? UInt32(number.dropFirst(), radix: 16) : UInt32(number, radix: 10)
                scalar = value.flatMap(Unicode.Scalar.init)
            }
            if let scalar {
                result.unicodeScalars.append(scalar)
                rest = rest[rest.index(after: semicolon)...]
            } else {
                result += "&"
                rest = rest[afterAmpersand...]
            }
        }
        result += rest
        return result
    }

    /// The attributes (names lower-cased, values unescaped) of every `<tag …>` in `html`, in
    /// order. A small scanner, not an HTML parser: enough for forms such pages hold.
    static func attributes(ofTagsNamed tag: String, in html: String) -> [[String: String]] {
        let scalars = Array(html.unicodeScalars)
        let tagName = Array(tag.lowercased().unicodeScalars)
        var found: [[String: String]] = []
        var index = 0
        while index < scalars.count {
            guard scalars[index] == "<" else {
                index += 1
                continue
            }
            index += 1
            let nameEnd = index + tagName.count
            guard nameEnd <= scalars.count,
                zip(scalars[index..<nameEnd], tagName).allSatisfy({ lowercased($0) == $1 }),
                nameEnd == scalars.count || isSpace(scalars[nameEnd]) || scalars[nameEnd] == ">"
                    || scalars[nameEnd] == "/"
            else { continue }
            index = nameEnd
            var attributes: [String: String] = [:]
            while index < scalars.count, scalars[index] != ">" {
                if isSpace(scalars[index]) || scalars[index] == "/" {
                    index += 1
                    continue
                }
                var name = String.UnicodeScalarView()
                while index < scalars.count, !isSpace(scalars[index]), !"=>/".unicodeScalars.contains(scalars[index]) {
                    name.append(lowercased(scalars[index]))
                    index += 1
                }
                while index < scalars.count, isSpace(scalars[index]) { index += 1 }
                var value = String.UnicodeScalarView()
                if index < scalars.count, scalars[index] == "=" {
                    index += 1
                    while index < scalars.count, isSpace(scalars[index]) { index += 1 }
                    if index < scalars.count, scalars[index] == "\"" || scalars[index] == "'" {
                        let quote = scalars[index]
                        index += 1
                        while index < scalars.count, scalars[index] != quote {
                            value.append(scalars[index])
                            index += 1
                        }
                        index += 1
                    } else {
                        while index < scalars.count, !isSpace(scalars[index]), scalars[index] != ">" {
                            value.append(scalars[index])
                            index += 1
                        }
                    }
                }
                if !name.isEmpty, attributes[String(name)] == nil {
                    attributes[String(name)] = unescape(String(value))
                }
            }
            found.append(attributes)
        }
        return found
    }

    private static func isSpace(_ scalar: Unicode.Scalar) -> Bool {
        scalar == " " || scalar == "\t" || scalar == "\n" || scalar == "\r" || scalar == "\u{0C}"
    }

    private static func lowercased(_ scalar: Unicode.Scalar) -> Unicode.Scalar {
        ("A"..."Z").contains(scalar) ? Unicode.Scalar(scalar.value + 32)! : scalar
    }
}

extension DevOAuthProvider {
    /// The hidden inputs of a form-post page (what ``DevOAuthProvider`` answers an authorization
    /// with in `response_mode=form_post`), name to value, unescaped: what a browser would post.
    public static func formFields(inPage html: String) -> [String: String] {
        var fields: [String: String] = [:]
        for input in FormPostPage.attributes(ofTagsNamed: "input", in: html)
        where input["type"]?.lowercased() == "hidden" {
            guard let name = input["name"] else { continue }
            fields[name] = input["value"] ?? ""
        }
        return fields
    }

    /// Where a form-post page posts its form (the first form's `action`, unescaped): the
    /// redirect URI. nil when the page has no form with an action.
    public static func formAction(inPage html: String) -> String? {
        FormPostPage.attributes(ofTagsNamed: "form", in: html).lazy.compactMap { $0["action"] }.first
    }
}
