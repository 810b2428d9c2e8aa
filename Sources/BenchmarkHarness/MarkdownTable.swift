/// Prints a Markdown table row by row as results arrive, so a long run shows its progress and
/// its output pastes into docs/benchmarks.md as is.
public struct MarkdownTable: Sendable {
    public struct Column: Sendable {
        public var title: String
        public var alignRight: Bool

        public static func left(_ title: String) -> Column { Column(title: title, alignRight: false) }
        public static func right(_ title: String) -> Column { Column(title: title, alignRight: true) }
    }

    public let columns: [Column]

    /// Prints the header and the alignment rule.
    public init(_ columns: [Column]) {
        self.columns = columns
        print("| " + columns.map(\.title).joined(separator: " | ") + " |")
        print("|" + columns.map { $0.alignRight ? "---:" : "---" }.joined(separator: "|") + "|")
    }

    /// Prints one row; it must have one cell per column.
    public func row(_ cells: [String]) {
        precondition(cells.count == columns.count, "a row needs \(columns.count) cells, got \(cells.count)")
        print("| " + cells.joined(separator: " | ") + " |")
    }
}
