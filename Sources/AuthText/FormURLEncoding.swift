/// `application/x-www-form-urlencoded` (the WHATWG URL standard's form encoding): what OAuth
/// sends in query strings and token request bodies, and what Twilio posts. The one codec of the
/// system: the gateway reads forms and browser queries with ``decodeStrictly(_:)`` (Hummingbird's
/// query parser leaves `+` and the names undecoded), identity writes the provider's and the
/// app's URLs with ``encode(_:)-(_)``, the stand-in provider reads and writes both.
public enum FormURLEncoding {
    /// The pairs of `text` (a query without its `?`, or a form body) decoded, in order. A pair
    /// without `=` has an empty value; `+` is a space; a malformed `%` escape stays as written.
    public static func decodePairs(_ text: some StringProtocol) -> [(name: String, value: String)] {
        text.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            if let equals = pair.firstIndex(of: "=") {
                return (decode(pair[..<equals]), decode(pair[pair.index(after: equals)...]))
            }
            return (decode(pair), "")
        }
    }

    /// The pairs of `text` as a dictionary; a name given twice keeps its last value.
    public static func decode(form text: some StringProtocol) -> [String: String] {
        var fields: [String: String] = [:]
        for (name, value) in decodePairs(text) { fields[name] = value }
        return fields
    }

    /// One name or value decoded: `+` is a space, `%XX` a byte; the bytes read as UTF-8.
    public static func decode(_ component: some StringProtocol) -> String {
        let bytes = Array(component.utf8)
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "+") {
                decoded.append(UInt8(ascii: " "))
            } else if byte == UInt8(ascii: "%"), index + 2 < bytes.count,
                let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2])
            {
                decoded.append(high << 4 | low)
                index += 2
            } else {
                decoded.append(byte)
            }
            index += 1
        }
        return String(decoding: decoded, as: UTF8.self)
    }

    /// One name or value decoded as the gateway reads what it is sent: `+` is a space, `%XX` a
    /// byte; nil for a malformed escape or bytes that are not UTF-8.
    public static func decodeStrictly(_ component: some StringProtocol) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(component.utf8).makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"): bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue)
                else { return nil }
                bytes.append(high << 4 | low)
            default: bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// `pairs` encoded as a query or form body: `name=value` joined by `&`.
    public static func encode(_ pairs: [(name: String, value: String)]) -> String {
        pairs.map { encode($0.name) + "=" + encode($0.value) }.joined(separator: "&")
    }

    /// One name or value encoded: unreserved characters (RFC 3986) as they are, every other
    /// byte of its UTF-8 as `%XX` (a space too: `%20` reads back as a space in a form decoder
    /// and in a URL parser such as Foundation's `URLComponents`, which leaves `+` as it is).
    public static func encode(_ component: String) -> String {
        var encoded: [UInt8] = []
        encoded.reserveCapacity(component.utf8.count)
        let hexDigits = Array("0123456789ABCDEF".utf8)
        for byte in component.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                encoded.append(byte)
            default:
                encoded += [UInt8(ascii: "%"), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: encoded, as: UTF8.self)
    }

    /// `url` with `pairs` added to its query: after `?`, or after `&` when it has a query
    /// already. A redirect URI has no fragment (RFC 6749 §3.1.2), so none is looked for.
    public static func appending(_ pairs: [(name: String, value: String)], to url: String) -> String {
        guard !pairs.isEmpty else { return url }
        let query = encode(pairs)
        if !url.contains("?") { return url + "?" + query }
        if url.hasSuffix("?") || url.hasSuffix("&") { return url + query }
        return url + "&" + query
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
