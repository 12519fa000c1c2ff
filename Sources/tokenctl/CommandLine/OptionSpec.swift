/// One named option of a command: a flag (`--reveal`) or an option taking a value (`--account <account>`).
///
/// Long names are kebab-case and written without the leading dashes. A command declares each
/// option once, as a constant built with the `flag(...)` or `value(...)` factory, lists it in
/// its spec and reads its value through the same constant (`parsed.value(Self.label)`).
struct OptionSpec: Sendable {
    /// Whether the option stands alone or takes a value.
    enum Arity: Sendable, Equatable {
        case flag
        /// An option taking one value; `valueName` is shown as `<valueName>` in help and usage.
        case value(valueName: String)
    }

    /// The long name without dashes, e.g. `client-id`.
    let name: String
    /// A one-letter alias without the dash, e.g. `h`.
    let shortName: Character?
    let arity: Arity
    /// One sentence shown in the help's OPTIONS section.
    let abstract: String
    let isRequired: Bool
    /// Whether the option may be given more than once (`--scope a --scope b`).
    let isRepeatable: Bool
    /// The environment variable that supplies the value when the option is not given.
    let environmentVariable: String?
    /// What a value must look like; checked by the parser.
    let rule: ValueRule

    /// A flag such as `--reveal`; a required flag (`--yes`) is a confirmation the user must type.
    /// With `environment`, the variable set to `1` sets the flag when it is not given.
    static func flag(
        _ name: String, short shortName: Character? = nil, required: Bool = false, environment: String? = nil,
        _ abstract: String
    ) -> OptionSpec {
        OptionSpec(
            name: name, shortName: shortName, arity: .flag, abstract: abstract, isRequired: required,
            isRepeatable: false, environmentVariable: environment, rule: .any)
    }

    /// An option taking a value, such as `--account <account>`.
    static func value(
        _ name: String, _ valueName: String, required: Bool = false, repeatable: Bool = false,
        environment: String? = nil, rule: ValueRule = .any, _ abstract: String
    ) -> OptionSpec {
        OptionSpec(
            name: name, shortName: nil, arity: .value(valueName: valueName), abstract: abstract,
            isRequired: required, isRepeatable: repeatable, environmentVariable: environment, rule: rule)
    }

    /// `--name`, the spelling used in error messages about the option.
    var longSpelling: String { "--\(name)" }

    /// `--name <value>` or `--name`, the spelling used in usage lines and missing-option errors.
    var synopsis: String {
        switch arity {
        case .flag: return longSpelling
        case .value(let valueName): return "\(longSpelling) <\(valueName)>"
        }
    }

    var takesValue: Bool { arity != .flag }
}
