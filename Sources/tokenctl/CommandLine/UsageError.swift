/// A command line that does not match the command table. tokenctl prints it with the usage
/// line and exits 64 (`EX_USAGE`).
///
/// Messages name options and positions but never echo a value or a positional argument:
/// a secret pasted in the wrong place must not end up in a terminal's scrollback or a log.
/// The one exception is a mistyped command name made only of lower-case letters and dashes.
struct UsageError: Error, Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        /// The first positional argument is not a command; `name` is the word typed when it
        /// looks like a mistyped command (``UsageError/echoableCommandName(_:)``), `suggestion`
        /// a close command name.
        case unknownCommand(position: Int, name: String?, suggestion: String?)
        /// `name` is the option as typed without any `=value`, e.g. `--acount`.
        case unknownOption(name: String, suggestion: String?)
        case missingValue(option: String)
        /// `alternatives`: what else supplies it (an environment variable, another option), said after it.
        case missingOption(option: String, alternatives: String? = nil)
        /// No store named: neither `--store`, `--app-id` nor the store variable (`variable`).
        case noStoreNamed(variable: String)
        case missingArgument(argument: String)
        case unexpectedArgument(position: Int)
        case invalidValue(option: String, environmentVariable: String?, expectation: String)
        case duplicateOption(option: String)
        case flagWithValue(option: String)
        case mutuallyExclusive(options: [String])
        /// `option` needs `required` too, e.g. `--timeout` only means something with `--browser`.
        case requiresOption(option: String, required: String)
        /// An option whose value would be a secret in the process list (see `RefusedOption`).
        case secretInArgument(RefusedOption)
    }

    let kind: Kind
    /// The command whose usage applies, or `nil` for tokenctl itself.
    let commandName: String?

    static func ~= (kind: Kind, error: UsageError) -> Bool { kind == error.kind }

    /// The message printed after `tokenctl: error: `.
    var message: String {
        switch kind {
        case .unknownCommand(let position, let name, let suggestion):
            guard let name else { return "argument \(position) is not a command" + hint(suggestion) }
            return "unknown command '\(name)'" + hint(suggestion)
        case .unknownOption(let name, let suggestion):
            return "unknown option '\(name)'" + hint(suggestion)
        case .missingValue(let option):
            return "missing value for '\(option)'"
        case .missingOption(let option, let alternatives):
            return "missing required option '\(option)'" + (alternatives.map { " (\($0))" } ?? "")
        case .noStoreNamed(let variable):
            return "no store named: give '--store <path>' or '--app-id <id>', or set \(variable)"
        case .missingArgument(let argument):
            return "missing required argument '\(argument)'"
        case .unexpectedArgument(let position):
            return "unexpected argument at position \(position)"
        case .invalidValue(let option, let variable, let expectation):
            let source = variable.map { " (from \($0))" } ?? ""
            return "invalid value for '\(option)'\(source): \(expectation)"
        case .duplicateOption(let option):
            return "option '\(option)' may be given only once"
        case .flagWithValue(let option):
            return "option '\(option)' takes no value"
        case .mutuallyExclusive(let options):
            return options.map { "'\($0)'" }.joined(separator: " and ") + " cannot be used together"
        case .requiresOption(let option, let required):
            return "'\(option)' can only be used with '\(required)'"
        case .secretInArgument(let option):
            return "'\(option.longSpelling)' is refused: \(option.secret) would be readable by every local user "
                + "in the process list (/proc/PID/cmdline)"
        }
    }

    /// One line telling the way forward, printed after the usage, or `nil`.
    var hint: String? {
        switch kind {
        case .secretInArgument(let option): return option.hint
        default: return nil
        }
    }

    /// `word` when it may be echoed as a command name: 1–20 lower-case letters and dashes, as
    /// every command is. Anything else (a token or a secret typed in the wrong place: digits,
    /// capitals, long random text) is named only by its position.
    static func echoableCommandName(_ word: String) -> String? {
        guard (1...20).contains(word.count), word.allSatisfy({ ("a"..."z").contains($0) || $0 == "-" }) else { return nil }
        return word
    }

    private func hint(_ suggestion: String?) -> String {
        suggestion.map { " (did you mean '\($0)'?)" } ?? ""
    }
}

extension UsageError: CustomStringConvertible {
    var description: String { message }
}
