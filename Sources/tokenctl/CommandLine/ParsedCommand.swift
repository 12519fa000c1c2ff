/// The arguments given to one command after parsing and validation.
///
/// Option values are keyed by long name without dashes (`"account"`), with environment
/// defaults already applied. Values may be identifiers or secrets typed by mistake, so
/// `description` names the options given but never shows a value.
struct ParsedCommand: Sendable, Equatable {
    /// The command's name as in the table, e.g. `"get"`.
    let name: String
    /// Every value given per option, in command-line order.
    let values: [String: [String]]
    /// The flags given, by long name.
    let flags: Set<String>
    /// Positional arguments in order.
    let positionals: [String]

    /// The value of a non-repeatable option, or `nil` when it was not given.
    ///
    /// Example: `parsed.value("account")`.
    func value(_ option: String) -> String? { values[option]?.last }

    /// All values of a repeatable option, in the order given; empty when none.
    func allValues(_ option: String) -> [String] { values[option] ?? [] }

    /// Whether a flag such as `"reveal"` was given.
    func hasFlag(_ flag: String) -> Bool { flags.contains(flag) }

    /// The positional argument at `index`, or `nil` when absent.
    func positional(_ index: Int) -> String? {
        positionals.indices.contains(index) ? positionals[index] : nil
    }
}

extension ParsedCommand: CustomStringConvertible, CustomDebugStringConvertible {
    /// The command and the names of the options given; values are never shown.
    var description: String {
        let options = (values.keys.map { "--\($0)=<redacted>" } + flags.map { "--\($0)" }).sorted()
        let arguments = Array(repeating: "<redacted>", count: positionals.count)
        return ([name] + options + arguments).joined(separator: " ")
    }

    var debugDescription: String { "ParsedCommand(\(description))" }
}
