/// Aligned text columns for people: one row per line, columns separated by two spaces,
/// no trailing spaces.
///
/// ```swift
/// var table = TextTable(header: ["ACCOUNT", "KIND", "UPDATED"])
/// table.append(["alice", "refresh-token", "2025-01-02T10:00:00Z"])
/// console.write(table.rendered())
/// ```
/// For `status`-style key/value output, use `TextTable(header: nil)` with two columns.
/// Cells are escaped for the terminal (``TerminalEscaping``): names and labels come from the store.
struct TextTable: Sendable {
    enum Alignment: Sendable { case left, right }

    let header: [String]?
    /// Per-column alignment; columns not listed are left-aligned. Use `.right` for counts.
    var alignments: [Alignment] = []
    private(set) var rows: [[String]] = []

    init(header: [String]?, alignments: [Alignment] = []) {
        self.header = header
        self.alignments = alignments
    }

    mutating func append(_ row: [String]) { rows.append(row.map(TerminalEscaping.escaped)) }

    /// The table as text, each line ending with a newline; empty when there are no rows and no header.
    func rendered() -> String {
        let all = (header.map { [$0] } ?? []) + rows
        let columnCount = all.map(\.count).max() ?? 0
        guard columnCount > 0 else { return "" }
        let widths = (0..<columnCount).map { column in
            all.map { column < $0.count ? $0[column].count : 0 }.max() ?? 0
        }
        return all.map { row in
            var cells: [String] = []
            for column in 0..<columnCount {
                let cell = column < row.count ? row[column] : ""
                let pad = String(repeating: " ", count: widths[column] - cell.count)
                let alignment = column < alignments.count ? alignments[column] : .left
                cells.append(alignment == .right ? pad + cell : cell + pad)
            }
            return String(cells.joined(separator: "  ").trimmingTrailingSpaces()) + "\n"
        }.joined()
    }
}

extension String {
    fileprivate func trimmingTrailingSpaces() -> Substring {
        var end = endIndex
        while end > startIndex, self[index(before: end)] == " " { end = index(before: end) }
        return self[..<end]
    }
}
