/// Which authenticated callers may call a method. Declared with the method's registration
/// (generated `AllowedCallersByMethod`), checked by the router before the handler runs.
public struct AllowedCallers: Sendable, Hashable, CustomStringConvertible {
    /// `nil` means every authenticated caller.
    public let names: Set<String>?

    private init(names: Set<String>?) {
        self.names = names
    }

    /// Any caller that authenticated (Health, for example).
    public static let anyAuthenticated = AllowedCallers(names: nil)

    /// Only these service names (as proven by the caller's certificate or Hello).
    public static func only(_ names: Set<String>) -> AllowedCallers {
        AllowedCallers(names: names)
    }

    public func allows(_ caller: String) -> Bool {
        guard !caller.isEmpty else { return false }
        return names?.contains(caller) ?? true
    }

    public var description: String {
        names.map { $0.sorted().joined(separator: ",") } ?? "any authenticated caller"
    }
}
