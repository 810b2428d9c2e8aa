/// A configuration value that is missing or malformed. Start-up stops with this message.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public let variable: String
    public let problem: String

    public init(variable: String, problem: String) {
        self.variable = variable
        self.problem = problem
    }

    public var description: String { "\(variable): \(problem)" }
}
