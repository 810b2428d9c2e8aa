#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The token a message's link ends with (StartRequest.link_base, CheckRequest.link_token): the
/// verification's id and its code, `<verification id>.<code>`. Following the link proves what
/// typing the code proves, no more: the same verification, checked by the same limits.
public struct LinkToken: Sendable, Equatable {
    public var verificationID: UUID
    public var code: String

    public init(verificationID: UUID, code: String) {
        self.verificationID = verificationID
        self.code = code
    }

    /// Parses a token; nil when it is not `<uuid>.<digits>` (at most 64 bytes).
    public init?(_ text: String) {
        guard text.utf8.count <= 64 else { return nil }
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, let id = UUID(uuidString: String(parts[0])), !parts[1].isEmpty,
            parts[1].utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return nil }
        self.init(verificationID: id, code: String(parts[1]))
    }

    /// The token as the link carries it (URL-safe as is).
    public var text: String { "\(verificationID.uuidString.lowercased()).\(code)" }

    /// The link of a message: its base (the verification's `link_base`) and the token.
    public static func link(base: String, verificationID: UUID, code: String) -> String? {
        base.isEmpty || code.isEmpty ? nil : base + LinkToken(verificationID: verificationID, code: code).text
    }

    /// Whether `base` may start a link: an absolute http or https URL of printable ASCII (no
    /// space), at most 1024 bytes.
    static func isAcceptableBase(_ base: String) -> Bool {
        base.utf8.count <= 1024 && (base.hasPrefix("https://") || base.hasPrefix("http://"))
            && base.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7F }
    }
}
