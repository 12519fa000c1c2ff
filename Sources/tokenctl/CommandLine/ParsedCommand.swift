/// The arguments given to one command after parsing and validation.
///
/// A command reads them through the declarations of its own spec, so that an option's name
/// is written once, in its `OptionSpec`:
/// ```swift
/// static let account = OptionSpec.value("account", "account", required: true, "The account.")
/// let account = try parsed.requiredValue(Self.account)
/// ```
/// Environment defaults are already applied. Values may be identifiers or secrets typed by
/// mistake, so `description` names the options given but never shows a value.
struct ParsedCommand: Sendable, Equatable {
    /// The command's name as in the table, e.g. `"get"`.
    let name: String
    /// Every value given per option, keyed by long name without dashes, in command-line order.
    private let valuesByOption: [String: [String]]
    /// The flags given, by long name.
    private let flagsGiven: Set<String>
    /// The positional arguments given, keyed by their name in the spec.
    private let argumentsByName: [String: String]
    /// The names of the options and arguments the command's spec declares.
    private let declared: Set<String>

    init(spec: CommandSpec, values: [String: [String]], flags: Set<String>, positionals: [String]) {
        self.name = spec.name
        self.valuesByOption = values
        self.flagsGiven = flags
        self.argumentsByName = Dictionary(uniqueKeysWithValues: zip(spec.positionals.map(\.name), positionals))
        self.declared = Set(spec.options.map(\.name) + spec.positionals.map(\.name))
    }

    /// The value of a non-repeatable option, or `nil` when it was not given.
    func value(_ option: OptionSpec) -> String? { valuesByOption[declaredName(option.name)]?.last }

    /// The value of an option the spec marks required (the parser has checked it is there).
    /// - Throws: `UsageError` naming the option when it is missing after all.
    func requiredValue(_ option: OptionSpec) throws(UsageError) -> String {
        guard let value = value(option) else {
            throw UsageError(kind: .missingOption(option: option.synopsis), commandName: name)
        }
        return value
    }

    /// All values of a repeatable option, in the order given; empty when none.
    func values(_ option: OptionSpec) -> [String] { valuesByOption[declaredName(option.name)] ?? [] }

    /// Whether the flag was given.
    func isSet(_ flag: OptionSpec) -> Bool { flagsGiven.contains(declaredName(flag.name)) }

    /// Checks a flag the spec marks required, such as the `--yes` of a destructive command.
    /// - Throws: `UsageError` naming the flag when it was not given.
    func requireFlag(_ flag: OptionSpec) throws(UsageError) {
        guard isSet(flag) else { throw UsageError(kind: .missingOption(option: flag.synopsis), commandName: name) }
    }

    /// The value of a positional argument, or `nil` when it was not given.
    func argument(_ argument: PositionalSpec) -> String? { argumentsByName[declaredName(argument.name)] }

    /// The value of a positional argument the spec marks required.
    /// - Throws: `UsageError` naming the argument when it is missing after all.
    func requiredArgument(_ argument: PositionalSpec) throws(UsageError) -> String {
        guard let value = self.argument(argument) else {
            throw UsageError(kind: .missingArgument(argument: "<\(argument.name)>"), commandName: name)
        }
        return value
    }

    /// `name`, checked in debug builds to be declared by this command: reading an option of
    /// another command is a programming error, not a missing value.
    private func declaredName(_ name: String) -> String {
        assert(declared.contains(name), "'\(self.name)' does not declare '\(name)'")
        return name
    }
}

extension ParsedCommand: CustomStringConvertible, CustomDebugStringConvertible {
    /// The command and the names of the options given; values are never shown.
    var description: String {
        let options = (valuesByOption.keys.map { "--\($0)=<redacted>" } + flagsGiven.map { "--\($0)" }).sorted()
        let arguments = Array(repeating: "<redacted>", count: argumentsByName.count)
        return ([name] + options + arguments).joined(separator: " ")
    }

    var debugDescription: String { "ParsedCommand(\(description))" }
}
