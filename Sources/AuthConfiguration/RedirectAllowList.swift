#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `AUTH_OAUTH_REDIRECT_URLS`: where apps may be sent back after a browser step (identity's
/// browser sign-in; the gateway's confirmation links). One rule for both.
public struct RedirectAllowList: Sendable, Equatable {
    /// Absolute URLs without query, fragment or wildcard.
    public var urls: [String]

    public init(urls: [String] = []) {
        self.urls = urls
    }

    /// Reads `AUTH_OAUTH_REDIRECT_URLS` (comma-separated); unset: empty.
    public init(reader: EnvironmentReader) throws {
        self.init()
        guard let text = reader.string("AUTH_OAUTH_REDIRECT_URLS") else { return }
        let items = text.split(separator: ",").map { String($0.trimmingWhitespace()) }.filter { !$0.isEmpty }
        for item in items {
            guard let url = URL(string: item), let scheme = url.scheme, !scheme.isEmpty, url.query == nil,
                url.fragment == nil, !item.contains("*"),
                item.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F })
            else {
                throw ConfigurationError(
                    variable: "AUTH_OAUTH_REDIRECT_URLS",
                    problem:
                        "must be a comma-separated list of absolute URLs without query, fragment or wildcard (\(item))"
                )
            }
        }
        urls = items
    }

    /// Whether `redirectTo` is on the list: equal to an entry once its query is removed (the
    /// query is the app's own and is kept). No fragment; no user info.
    public func allows(_ redirectTo: String) -> Bool {
        guard !redirectTo.isEmpty, redirectTo.utf8.count <= 2048, !redirectTo.contains("#"),
            redirectTo.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F })
        else { return false }
        let withoutQuery = redirectTo.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
        return urls.contains(String(withoutQuery))
    }
}
