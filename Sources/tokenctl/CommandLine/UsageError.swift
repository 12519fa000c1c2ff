/// A command line that does not match the command table. tokenctl prints it with the usage
/// line and exits 64 (`EX_USAGE`).
///
/// Messages name options and positions but never echo a value or a positional argument:
/// a secret pasted in the wrong place must not end up in a terminal's scrollback or a log.
struct UsageError: Error, Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        /// The first positional argument is not a command; `suggestion` is a close command name.
        case unknownCommand(position: Int, suggestion: String?)
        /// `name` is the option as typed without any `=value`, e.g. `--acount`.
        case unknownOption(name: String, suggestion: String?)
        case missingValue(option: String)
        case missingOption(option: String)
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
        case .unknownCommand(let position, let suggestion):
            return "argument \(position) is not a command" + hint(suggestion)
        case .unknownOption(let name, let suggestion):
            return "unknown option '\(name)'" + hint(suggestion)
        case .missingValue(let option):
            return "missing value for '\(option)'"
        case .missingOption(let option):
            return "missing required option '\(option)'"
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

    private func hint(_ suggestion: String?) -> String {
        suggestion.map { " (did you mean '\($0)'?)" } ?? ""
    }
}

extension UsageError: CustomStringConvertible {
    var description: String { message }
}
