#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Whether the standard streams are terminals, which decides progress lines and the
/// `--reveal` warning.
///
/// tokenctl prints no colour and no escape sequences at all, so `NO_COLOR` is honoured
/// trivially; `prefersNoColour` exists for any future colour to check first.
enum Terminal {
    /// Whether stdout is a terminal (a person is probably reading it).
    static var standardOutputIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }

    /// Whether stdin is a terminal.
    static var standardInputIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }

    /// Whether stderr is a terminal.
    static var standardErrorIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }

    /// `true` when `NO_COLOR` is set to a non-empty value (https://no-color.org).
    static func prefersNoColour(_ environment: [String: String]) -> Bool {
        environment["NO_COLOR"].map { !$0.isEmpty } ?? false
    }
}
