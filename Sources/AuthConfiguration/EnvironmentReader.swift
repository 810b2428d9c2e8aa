import AuthText

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Reads and validates environment variables; unknown values name the variable in the error.
public struct EnvironmentReader: Sendable {
    public let variables: [String: String]

    public init(variables: [String: String]) {
        self.variables = variables
    }

    public func string(_ name: String) -> String? {
        guard let value = variables[name]?.trimmingWhitespace(), !value.isEmpty else { return nil }
        return value
    }

    /// The parsed value of `name`, `fallback` when unset; a value `parse` refuses stops start-up
    /// with "must be \(expected)".
    public func value<T>(_ name: String, default fallback: T, expected: String, parse: (String) -> T?) throws -> T {
        guard let text = string(name) else { return fallback }
        guard let value = parse(text) else {
            throw ConfigurationError(variable: name, problem: "must be \(expected)")
        }
        return value
    }

    /// A whole number in `range`; the refusal names the range.
    public func integer(
        _ name: String,
        default fallback: Int,
        in range: ClosedRange<Int>,
        unit: String = "",
        note: String = ""
    ) throws -> Int {
        try value(
            name,
            default: fallback,
            expected: "a whole number\(unit) in \(range.lowerBound)...\(range.upperBound)\(note)"
        ) {
            Int($0).flatMap { range.contains($0) ? $0 : nil }
        }
    }

    /// A whole number of seconds in `range` as a duration.
    public func seconds(_ name: String, default fallback: Duration, in range: ClosedRange<Int>) throws -> Duration {
        .seconds(try integer(name, default: Int(fallback.components.seconds), in: range, unit: " of seconds"))
    }

    /// A whole number of milliseconds in `range` as a duration.
    public func milliseconds(_ name: String, default fallback: Duration, in range: ClosedRange<Int>) throws -> Duration
    {
        let (seconds, attoseconds) = fallback.components
        let milliseconds = Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
        return .milliseconds(try integer(name, default: milliseconds, in: range, unit: " of milliseconds"))
    }

    /// `true` or `false`.
    public func bool(_ name: String, default fallback: Bool) throws -> Bool {
        try value(name, default: fallback, expected: "`true` or `false`") { ["true": true, "false": false][$0] }
    }

    /// `AUTH_PUBLIC_URL`: the gateway's public base URL as clients and providers reach it
    /// (`https://auth.example.com`; http(s), no query or fragment), without a trailing slash.
    public func publicURL() throws -> String? {
        try value(
            "AUTH_PUBLIC_URL",
            default: nil,
            expected: "an http(s) URL without a query, such as https://auth.example.com"
        ) { value -> String?? in
            guard let url = URL(string: value), ["http", "https"].contains(url.scheme ?? ""), url.host != nil,
                url.query == nil, url.fragment == nil
            else { return nil }
            return .some(value.hasSuffix("/") ? String(value.dropLast()) : value)
        }
    }

    /// A secret setting: the value itself, or, when it starts with `/`, the path of a file
    /// holding it (as a Kubernetes Secret mounts it; one trailing line end is dropped).
    public func secret(_ name: String) throws -> String? {
        guard let value = string(name) else { return nil }
        guard value.hasPrefix("/") else { return value }
        guard let data = FileManager.default.contents(atPath: value) else {
            throw ConfigurationError(variable: name, problem: "starts with / but is not a readable file: \(value)")
        }
        var text = String(decoding: data, as: UTF8.self)
        if text.hasSuffix("\r\n") { text.removeLast(2) } else if text.hasSuffix("\n") { text.removeLast() }
        guard !text.isEmpty else { throw ConfigurationError(variable: name, problem: "names an empty file: \(value)") }
        return text
    }

    /// `AUTH_ENVIRONMENT`: where the process runs, which decides the secure defaults.
    public func environment() throws -> DeploymentEnvironment {
        try value("AUTH_ENVIRONMENT", default: .development, expected: "`development` or `production`") {
            DeploymentEnvironment(rawValue: $0)
        }
    }
}

/// `AUTH_ENVIRONMENT`: `production` turns on the secure defaults and refuses development
/// settings (docs/security.md); `development` (the default) allows the local conveniences.
public enum DeploymentEnvironment: String, Sendable {
    case development
    case production
}
