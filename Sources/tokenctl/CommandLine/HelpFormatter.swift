import FoundationEssentials

/// Renders help screens, usage lines and usage-error reports from the command table,
/// in swift-argument-parser's layout: `OVERVIEW:`, `USAGE:`, `ARGUMENTS:`, `OPTIONS:`,
/// `SUBCOMMANDS:` sections, labels indented by 2 and descriptions aligned at column 26,
/// wrapped at 80 columns. The width is fixed so that output does not depend on the terminal.
struct HelpFormatter: Sendable {
    let root: CommandSpec
    var screenWidth = 80

    private static let indent = 2
    private static let labelColumn = 26
    private static let helpOption = "-h, --help"

    init(root: CommandSpec) { self.root = root }

    // MARK: Help screens

    /// The help of the command called `name`, or of tokenctl itself when `name` is `nil`
    /// or not a command.
    func help(forCommandNamed name: String?) -> String {
        guard let name, let command = root.subcommand(named: name) else { return rootHelp() }
        return help(for: command)
    }

    /// The overview: global options and the list of commands.
    func rootHelp() -> String {
        var sections = [overview(root), "USAGE: " + wrappedUsage(rootUsageElements())]
        let options =
            root.options.map(optionRow)
            + [("--version", "Show the version."), (Self.helpOption, "Show help information.")]
        sections.append(section("OPTIONS", options))
        sections.append(section("SUBCOMMANDS", root.subcommands.map { ($0.name, $0.abstract) }))
        sections.append(
            String(repeating: " ", count: Self.indent)
                + "See '\(root.name) help <subcommand>' for detailed help.")
        return sections.joined(separator: "\n\n") + "\n"
    }

    /// The help of one command: its arguments, its options and the global options.
    func help(for command: CommandSpec) -> String {
        var sections = [overview(command), "USAGE: " + wrappedUsage(usageElements(command))]
        if !command.positionals.isEmpty {
            sections.append(section("ARGUMENTS", command.positionals.map { ("<\($0.name)>", $0.abstract) }))
        }
        sections.append(
            section("OPTIONS", command.options.map(optionRow) + [(Self.helpOption, "Show help information.")]))
        sections.append(section("GLOBAL OPTIONS", root.options.map(optionRow)))
        return sections.joined(separator: "\n\n") + "\n"
    }

    // MARK: Usage

    /// The one-line usage of a command (or of tokenctl when `name` is `nil`), without `USAGE:`.
    func usageLine(forCommandNamed name: String?) -> String {
        if name == InvocationParser.helpCommand.name {
            return usageElements(InvocationParser.helpCommand).joined(separator: " ")
        }
        guard let name, let command = root.subcommand(named: name) else {
            return rootUsageElements().joined(separator: " ")
        }
        return usageElements(command).joined(separator: " ")
    }

    /// What bare `tokenctl` prints on stderr: the usage line and where the help is.
    func shortUsage() -> String {
        "Usage: \(rootUsageElements().joined(separator: " "))\n"
            + "See '\(root.name) help' for the commands and options, '\(root.name) help <subcommand>' for one command.\n"
    }

    /// The three lines printed for a usage error (a `hint:` line after the error when it has one):
    /// ```
    /// tokenctl: error: missing required option '--account <account>'
    /// Usage: tokenctl get --account <account> --kind <kind> [--service <service>] [--reveal]
    /// See 'tokenctl help get'.
    /// ```
    func report(_ error: UsageError) -> String {
        let topic = error.commandName.flatMap { root.subcommand(named: $0)?.name }
        let see = topic.map { "\(root.name) help \($0)" } ?? "\(root.name) help"
        let hint = error.hint.map { "\(root.name): hint: \($0)\n" } ?? ""
        return """
            \(root.name): error: \(error.message)
            \(hint)Usage: \(usageLine(forCommandNamed: error.commandName))
            See '\(see)'.

            """
    }

    private func rootUsageElements() -> [String] {
        [root.name] + optionElements(root) + ["<subcommand>"]
    }

    private func usageElements(_ command: CommandSpec) -> [String] {
        let name = command.name == InvocationParser.helpCommand.name ? "\(root.name) help" : "\(root.name) \(command.name)"
        return [name] + optionElements(command) + command.positionals.map(\.synopsis)
    }

    /// Options in table order; an optional mutually exclusive group is shown once as `[--a <a> | --b <b>]`.
    private func optionElements(_ command: CommandSpec) -> [String] {
        var elements: [String] = []
        var shownGroups: Set<[String]> = []
        for option in command.options {
            if let group = command.mutuallyExclusive.first(where: { $0.contains(option.name) }) {
                if shownGroups.contains(group) { continue }
                shownGroups.insert(group)
                let members = group.compactMap { command.option(named: $0)?.synopsis }
                elements.append("[" + members.joined(separator: " | ") + "]")
                continue
            }
            var element = option.synopsis
            if option.isRepeatable { element += " ..." }
            elements.append(option.isRequired ? element : "[\(element)]")
        }
        return elements
    }

    /// Joins usage elements on lines no wider than the screen, continuing under the first option.
    private func wrappedUsage(_ elements: [String]) -> String {
        guard let first = elements.first else { return "" }
        let continuation = String(repeating: " ", count: "USAGE: ".count + first.count + 1)
        var lines = [first]
        for element in elements.dropFirst() {
            let candidate = lines[lines.count - 1] + " " + element
            let prefixWidth = lines.count == 1 ? "USAGE: ".count : 0
            if prefixWidth + candidate.count <= screenWidth || lines[lines.count - 1] == continuation {
                lines[lines.count - 1] = candidate
            } else {
                lines.append(continuation + element)
            }
        }
        return lines.joined(separator: "\n")
    }

    // MARK: Sections

    private func overview(_ command: CommandSpec) -> String {
        var text = wrap("OVERVIEW: " + command.abstract, indent: 0)
        if let discussion = command.discussion {
            let paragraphs = discussion.components(separatedBy: "\n\n").map { paragraph in
                // Indented paragraphs (example command lines) are kept as written.
                paragraph.hasPrefix("  ")
                    ? paragraph : wrap(paragraph.replacing("\n", with: " "), indent: 0)
            }
            text += "\n\n" + paragraphs.joined(separator: "\n\n")
        }
        return text
    }

    private func optionRow(_ option: OptionSpec) -> (label: String, abstract: String) {
        var label = option.synopsis
        if let short = option.shortName { label = "-\(short), " + label }
        if option.isRepeatable { label += " ..." }
        var notes: [String] = []
        if case .oneOf(let words) = option.rule { notes.append("(values: \(words.joined(separator: ", ")))") }
        if let variable = option.environmentVariable { notes.append("(env: \(variable))") }
        return (label, ([option.abstract] + notes).joined(separator: " "))
    }

    private func section(_ title: String, _ rows: [(label: String, abstract: String)]) -> String {
        let body = rows.map { row in
            let label = String(repeating: " ", count: Self.indent) + row.label
            let description = wrap(row.abstract, indent: Self.labelColumn)
            if label.count < Self.labelColumn {
                return label + description.dropFirst(label.count)
            }
            return label + "\n" + description
        }
        return "\(title):\n" + body.joined(separator: "\n")
    }

    /// Word-wraps `text` to the screen width, every line indented by `indent` spaces.
    private func wrap(_ text: String, indent: Int) -> String {
        let margin = String(repeating: " ", count: indent)
        let words = text.split(separator: " ", omittingEmptySubsequences: true)
        var lines: [String] = []
        var line = ""
        for word in words {
            if line.isEmpty {
                line = margin + word
            } else if line.count + 1 + word.count <= screenWidth {
                line += " " + word
            } else {
                lines.append(line)
                line = margin + word
            }
        }
        lines.append(line.isEmpty ? margin : line)
        return lines.joined(separator: "\n")
    }
}
