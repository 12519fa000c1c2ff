/// The declaration of one command: its name, help texts, options and positional arguments.
///
/// The root command (`tokenctl` itself) uses `options` for the global options, which are
/// accepted before or after the subcommand's name, and lists the commands in `subcommands`.
struct CommandSpec: Sendable {
    let name: String
    /// One line shown after `OVERVIEW:` and in the parent's SUBCOMMANDS list.
    let abstract: String
    /// Paragraphs shown between the overview and the usage, separated by blank lines.
    let discussion: String?
    let options: [OptionSpec]
    let positionals: [PositionalSpec]
    /// Groups of option names of which at most one may be given, e.g. `["store", "app-id"]`.
    let mutuallyExclusive: [[String]]
    let subcommands: [CommandSpec]
    /// Options refused with a hint because their value would be a secret in the process list.
    let refusedOptions: [RefusedOption]

    init(
        _ name: String, abstract: String, discussion: String? = nil, options: [OptionSpec] = [],
        positionals: [PositionalSpec] = [], mutuallyExclusive: [[String]] = [],
        subcommands: [CommandSpec] = [], refusedOptions: [RefusedOption] = []
    ) {
        self.name = name
        self.abstract = abstract
        self.discussion = discussion
        self.options = options
        self.positionals = positionals
        self.mutuallyExclusive = mutuallyExclusive
        self.subcommands = subcommands
        self.refusedOptions = refusedOptions
    }

    /// The option called `--name`, or `-name` for a one-letter alias.
    func option(named name: String) -> OptionSpec? {
        options.first { $0.name == name }
    }

    func option(short: Character) -> OptionSpec? {
        options.first { $0.shortName == short }
    }

    /// The refused option called `--name`, or `nil`.
    func refusedOption(named name: String) -> RefusedOption? {
        refusedOptions.first { $0.name == name }
    }

    func subcommand(named name: String) -> CommandSpec? {
        subcommands.first { $0.name == name }
    }
}
