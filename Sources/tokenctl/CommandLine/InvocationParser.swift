/// Turns `CommandLine.arguments` into a `ParsedInvocation` according to a command table.
///
/// Conventions, after swift-argument-parser:
/// - `tokenctl [global options] <command> [options] [arguments]`; global options may also
///   follow the command name.
/// - Long options are kebab-case: `--client-id ID` or `--client-id=ID`. A value never starts
///   with `-` unless given with `=`; a bare `-` is a value.
/// - `--` ends the options: everything after it is a positional argument.
/// - `-h`/`--help` anywhere before `--` shows help, `--version` the version, and both win over
///   any other error on the line. `help [COMMAND]` is the same as `[COMMAND] --help`.
/// - An option with an `environment` variable takes its value from there when not given.
///
/// Example:
/// ```swift
/// let invocation = try InvocationParser(root: CommandTable.root)
///     .parse(["get", "--account=a", "--kind", "generic"], environment: [:])
/// ```
struct InvocationParser: Sendable {
    /// The table: global options in `root.options`, commands in `root.subcommands`.
    let root: CommandSpec

    /// The built-in `help [COMMAND]` command; not listed among the subcommands.
    static let helpCommand = CommandSpec(
        "help", abstract: "Show help for tokenctl or one of its commands.",
        positionals: [PositionalSpec("command", required: false, "The command to show help for.")])

    /// Parses `arguments` (without the program name).
    ///
    /// - Throws: `UsageError` for an unknown command or option, a missing or invalid value,
    ///   a missing required option or argument, an unexpected argument, a repeated option,
    ///   or options that cannot be combined.
    func parse(_ arguments: [String], environment: [String: String]) throws(UsageError) -> ParsedInvocation {
        var scan = ArgumentScan(root: root)
        scan.read(arguments)

        if scan.wantsHelp { return .help(command: scan.helpTopic) }
        if scan.wantsVersion { return .version }
        if let error = scan.firstError { throw error }
        guard let command = scan.command else { return .help(command: nil) }
        if command.name == Self.helpCommand.name { return try helpInvocation(scan.positionals) }

        var commandValues = scan.commandValues
        var rootValues = scan.rootValues
        let fail = { (kind: UsageError.Kind) in UsageError(kind: kind, commandName: command.name) }
        // Errors about a global option show tokenctl's own usage.
        let failGlobal = { (kind: UsageError.Kind) in UsageError(kind: kind, commandName: nil) }

        if scan.positionals.count > command.positionals.count {
            throw fail(.unexpectedArgument(position: scan.positionals[command.positionals.count].position))
        }
        for group in root.mutuallyExclusive {
            let given = group.filter { rootValues.contains($0) }
            if given.count > 1 { throw failGlobal(.mutuallyExclusive(options: given.map { "--\($0)" })) }
        }
        for group in command.mutuallyExclusive {
            let given = group.filter { commandValues.contains($0) }
            if given.count > 1 { throw fail(.mutuallyExclusive(options: given.map { "--\($0)" })) }
        }
        for missing in command.positionals.dropFirst(scan.positionals.count) where missing.isRequired {
            throw fail(.missingArgument(argument: "<\(missing.name)>"))
        }
        if let kind = rootValues.applyEnvironment(root.options, environment) { throw failGlobal(kind) }
        if let kind = commandValues.applyEnvironment(command.options, environment) { throw fail(kind) }
        for option in root.options where option.isRequired && !rootValues.contains(option.name) {
            throw failGlobal(.missingOption(option: option.synopsis, alternatives: option.environmentVariable.map { "or set \($0)" }))
        }
        for option in command.options where option.isRequired && !commandValues.contains(option.name) {
            throw fail(.missingOption(option: option.synopsis, alternatives: option.environmentVariable.map { "or set \($0)" }))
        }

        let parsed = ParsedCommand(
            spec: command, values: commandValues.values, flags: commandValues.flags,
            positionals: scan.positionals.map(\.value))
        let global = ParsedCommand(spec: root, values: rootValues.values, flags: rootValues.flags, positionals: [])
        return .command(CommandInvocation(command: parsed, global: GlobalOptions(global)))
    }

    /// `help`, `help COMMAND`; anything more is an error.
    private func helpInvocation(_ positionals: [(position: Int, value: String)]) throws(UsageError) -> ParsedInvocation {
        let helpName = Self.helpCommand.name
        if positionals.count > 1 {
            throw UsageError(kind: .unexpectedArgument(position: positionals[1].position), commandName: helpName)
        }
        guard let topic = positionals.first else { return .help(command: nil) }
        if topic.value == helpName { return .help(command: nil) }
        guard root.subcommand(named: topic.value) != nil else {
            let suggestion = closestMatch(to: topic.value, among: root.subcommands.map(\.name))
            throw UsageError(
                kind: .unknownCommand(
                    position: topic.position, name: UsageError.echoableCommandName(topic.value), suggestion: suggestion),
                commandName: helpName)
        }
        return .help(command: topic.value)
    }
}

/// The values and flags read for one command level (global or command).
private struct OptionValues {
    var values: [String: [String]] = [:]
    var flags: Set<String> = []

    func contains(_ name: String) -> Bool { values[name] != nil || flags.contains(name) }

    /// Fills options not given from their environment variables; returns the error kind for a bad value.
    mutating func applyEnvironment(_ options: [OptionSpec], _ environment: [String: String]) -> UsageError.Kind? {
        for option in options where option.takesValue && values[option.name] == nil {
            guard let variable = option.environmentVariable, let value = environment[variable], !value.isEmpty
            else { continue }
            guard option.rule.accepts(value) else {
                return .invalidValue(
                    option: option.synopsis, environmentVariable: variable, expectation: option.rule.expectation)
            }
            values[option.name] = [value]
        }
        // A flag's variable sets it with `1` (`TOKENCTL_DPOP=1`); another value is refused.
        for option in options where !option.takesValue && !flags.contains(option.name) {
            guard let variable = option.environmentVariable, let value = environment[variable], !value.isEmpty
            else { continue }
            guard value == "1" || value == "0" else {
                return .invalidValue(option: option.synopsis, environmentVariable: variable, expectation: "1 or 0")
            }
            if value == "1" { flags.insert(option.name) }
        }
        return nil
    }
}

/// One left-to-right pass over the arguments. Records the first error instead of throwing,
/// so that a later `--help` still wins.
private struct ArgumentScan {
    let root: CommandSpec
    var command: CommandSpec?
    var rootValues = OptionValues()
    var commandValues = OptionValues()
    var positionals: [(position: Int, value: String)] = []
    var wantsHelp = false
    var wantsVersion = false
    var firstError: UsageError?

    init(root: CommandSpec) { self.root = root }

    /// The command whose help `--help` asks for; `help COMMAND --help` means COMMAND.
    var helpTopic: String? {
        guard let command else { return nil }
        guard command.name == InvocationParser.helpCommand.name else { return command.name }
        return positionals.first.flatMap { root.subcommand(named: $0.value)?.name }
    }

    mutating func read(_ arguments: [String]) {
        var index = 0
        var endOfOptions = false
        while index < arguments.count {
            let argument = arguments[index]
            let position = index + 1
            index += 1
            if !endOfOptions {
                if argument == "--" {
                    endOfOptions = true
                    continue
                }
                if argument == "-h" || argument == "--help" {
                    wantsHelp = true
                    continue
                }
                if argument == "--version" {
                    wantsVersion = true
                    continue
                }
                if argument.hasPrefix("-") && argument != "-" {
                    readOption(argument, arguments, &index)
                    continue
                }
            }
            guard command != nil else {
                if !selectCommand(argument, position: position) { return }
                continue
            }
            positionals.append((position, argument))
        }
    }

    /// Makes `name` the command; records an error and returns `false` when there is no such command.
    private mutating func selectCommand(_ name: String, position: Int) -> Bool {
        if name == InvocationParser.helpCommand.name {
            command = InvocationParser.helpCommand
        } else if let spec = root.subcommand(named: name) {
            command = spec
        } else {
            let names = root.subcommands.map(\.name) + [InvocationParser.helpCommand.name]
            fail(
                .unknownCommand(
                    position: position, name: UsageError.echoableCommandName(name),
                    suggestion: closestMatch(to: name, among: names)))
            return false
        }
        return true
    }

    private mutating func readOption(_ argument: String, _ arguments: [String], _ index: inout Int) {
        let name: String
        var inlineValue: String?
        var spec: OptionSpec?
        var isGlobal = false
        if argument.hasPrefix("--") {
            if let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                inlineValue = String(argument[argument.index(after: equals)...])
            } else {
                name = argument
            }
            let longName = String(name.dropFirst(2))
            spec = command?.option(named: longName)
            if spec == nil, let global = root.option(named: longName) { (spec, isGlobal) = (global, true) }
        } else {
            name = argument
            if argument.count == 2, let letter = argument.last {
                spec = command?.option(short: letter)
                if spec == nil, let global = root.option(short: letter) { (spec, isGlobal) = (global, true) }
            }
        }
        if spec == nil, argument.hasPrefix("--"), let refused = command?.refusedOption(named: String(name.dropFirst(2))) {
            // Its value is swallowed, so that it is never taken for a command or an argument.
            if inlineValue == nil, index < arguments.count, !looksLikeOption(arguments[index]) { index += 1 }
            fail(.secretInArgument(refused))
            return
        }
        guard let spec else {
            let known = ((command?.options ?? []) + root.options).map(\.longSpelling) + ["--help", "--version"]
            fail(.unknownOption(name: name, suggestion: closestMatch(to: name, among: known)))
            return
        }

        let fail = { (scan: inout ArgumentScan, kind: UsageError.Kind) in scan.fail(kind, global: isGlobal) }
        guard spec.takesValue else {
            if inlineValue != nil { return fail(&self, .flagWithValue(option: spec.longSpelling)) }
            if isGlobal { rootValues.flags.insert(spec.name) } else { commandValues.flags.insert(spec.name) }
            return
        }
        // `--min-ttl -5`: a negative number after a numeric option is its value (refused by the
        // rule with the bound it breaks), not a missing value followed by an option; and an
        // opaque value (`--nonce -x1…`, a server's base64url) is taken whatever it begins with.
        if inlineValue == nil, index < arguments.count,
            !looksLikeOption(arguments[index]) || (spec.rule.isNumeric && isNegativeNumber(arguments[index]))
                || spec.rule == .opaque
        {
            inlineValue = arguments[index]
            index += 1
        }
        guard let value = inlineValue, !value.isEmpty else {
            return fail(&self, .missingValue(option: spec.synopsis))
        }
        guard spec.rule.accepts(value) else {
            return fail(
                &self,
                .invalidValue(option: spec.synopsis, environmentVariable: nil, expectation: spec.rule.expectation(for: value)))
        }
        let alreadyGiven = isGlobal ? rootValues.values[spec.name] != nil : commandValues.values[spec.name] != nil
        if alreadyGiven && !spec.isRepeatable { return fail(&self, .duplicateOption(option: spec.longSpelling)) }
        if isGlobal {
            rootValues.values[spec.name, default: []].append(value)
        } else {
            commandValues.values[spec.name, default: []].append(value)
        }
    }

    private func isNegativeNumber(_ argument: String) -> Bool {
        argument.count > 1 && argument.hasPrefix("-") && argument.dropFirst().allSatisfy { $0.isASCII && $0.isNumber }
    }

    private func looksLikeOption(_ argument: String) -> Bool {
        argument.hasPrefix("-") && argument != "-"
    }

    /// Records `kind` unless an earlier error was recorded; `global` errors show tokenctl's usage.
    private mutating func fail(_ kind: UsageError.Kind, global: Bool = false) {
        if firstError == nil { firstError = UsageError(kind: kind, commandName: global ? nil : command?.name) }
    }
}
