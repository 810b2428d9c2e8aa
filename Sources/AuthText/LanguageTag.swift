/// The one rule for a locale the apps send (`en`, `hi-IN`, `zh-Hant-TW`): a BCP 47-like tag of
/// subtags of 1–8 ASCII letters or digits joined by `-`, at most 35 bytes. The gateway checks
/// `POST /v1/otp/send`'s `locale` with it, otp-dispatch its Start's.
public enum LanguageTag {
    public static let maxBytes = 35

    /// Whether `text` is such a tag (empty is not).
    public static func isValid(_ text: some StringProtocol) -> Bool {
        guard (1...maxBytes).contains(text.utf8.count) else { return false }
        return text.utf8.split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false).allSatisfy { part in
            (1...8).contains(part.count)
                && part.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) }
        }
    }
}
