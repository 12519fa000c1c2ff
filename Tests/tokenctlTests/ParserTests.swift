import Foundation
import TestTraits
import Testing
import TestSupport

/// The command-line layer seen from outside: exit codes and the exact stderr of usage errors.
/// A line that parses reaches its command, which here fails for want of a store (the
/// environment names one that does not exist): a command error, never the usage report
/// and status 64 of a rejected line.
@Suite(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) struct ParserTests {
    /// Asserts the three-line usage error and status 64.
    private func expectUsageError(
        _ arguments: [String], environment: [String: String] = [:],
        message: String, usage: String, see: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let result = try TokenctlBinary.run(arguments, environment: environment)
        #expect(result.exitCode == 64, sourceLocation: sourceLocation)
        #expect(result.standardOutput == "", sourceLocation: sourceLocation)
        #expect(
            result.standardError == "tokenctl: error: \(message)\nUsage: \(usage)\nSee '\(see)'.\n",
            sourceLocation: sourceLocation)
    }

    /// Asserts that the line parsed and reached the command: it failed as a command (no
    /// store at the path `TOKENCTL_STORE` names, no Secret Service in the minimal
    /// environment), not as a usage error.
    private func expectParsed(
        _ arguments: [String], command: String, environment: [String: String] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let directory = try TemporaryDirectory(prefix: "tokenctl-parse")
        var environment = environment
        environment["TOKENCTL_STORE"] = directory.appending("absent/tokens.sqlite").path
        let result = try TokenctlBinary.run(arguments, environment: environment)
        #expect(result.exitCode != 64 && result.exitCode != 0, "\(command): \(result.exitCode)", sourceLocation: sourceLocation)
        #expect(result.standardError.contains("tokenctl: error: "), sourceLocation: sourceLocation)
        #expect(!result.standardError.contains("Usage:"), "\(command): \(result.standardError)", sourceLocation: sourceLocation)
        #expect(result.standardOutput == "", sourceLocation: sourceLocation)
    }

    private let getUsage = "tokenctl get --account <account> [--kind <kind>] [--service <service>] [--reveal] [--raw]"
    private let rootUsage =
        "tokenctl [--store <path> | --app-id <id>] [--json] [--quiet] [--verbose] [--passphrase-fd <fd> | --recovery-key-fd <fd> | --pin-fd <fd>] [--key-provider <name>] <subcommand>"

    // MARK: Accepted forms

    @Test func optionValueWithEqualsOrSeparate() throws {
        try expectParsed(["get", "--account=alice", "--kind", "generic"], command: "get")
        try expectParsed(["get", "--account", "alice", "--kind=refresh-token", "--service=s"], command: "get")
    }

    /// A server's DPoP-Nonce is base64url: one in 64 begins with `-` (the test server's random
    /// nonce did, and `proof --nonce` was refused as a missing value).
    @Test func aNonceBeginningWithADashIsItsValue() throws {
        let proof = ["proof", "--domain", "http://127.0.0.1:9", "--client-id", "c", "--account", "a", "--method", "GET",
                     "--url", "http://127.0.0.1:9/api"]
        try expectParsed(proof + ["--nonce", "-Ab_c9"], command: "proof")
        try expectParsed(proof + ["--nonce", "--x"], command: "proof")
        try expectParsed(proof + ["--nonce=-Ab_c9"], command: "proof")
    }

    @Test func everyKindIsAccepted() throws {
        for kind in ["refresh-token", "apple-user-id", "access-token", "generic"] {
            try expectParsed(["delete", "--account", "a", "--kind", kind], command: "delete")
        }
    }

    @Test func globalOptionsBeforeOrAfterTheCommand() throws {
        try expectParsed(["--store", "/tmp/s.db", "--json", "list"], command: "list")
        try expectParsed(["list", "--app-id=com.example.app", "--quiet", "--passphrase-fd", "3"], command: "list")
    }

    @Test func doubleDashEndsOptions() throws {
        try expectParsed(["state", "--", "--looks-like-an-option"], command: "state")
        try expectUsageError(
            ["state", "--looks-like-an-option"], message: "unknown option '--looks-like-an-option'",
            usage: "tokenctl state <user-id>", see: "tokenctl help state")
    }

    @Test func valueStartingWithDashNeedsEquals() throws {
        try expectParsed(["get", "--account=-dash", "--kind", "generic"], command: "get")
        try expectUsageError(
            ["get", "--account", "-dash", "--kind", "generic"], message: "missing value for '--account <account>'",
            usage: getUsage, see: "tokenctl help get")
    }

    @Test func repeatedOptionMayBeRepeated() throws {
        try expectParsed(
            ["token", "--domain", "https://auth.example", "--client-id", "c", "--account", "a",
             "--scope", "openid", "--scope=offline_access"], command: "token")
    }

    private static let tokenUsage =
        "tokenctl token [--domain <url>] [--issuer <url>] --client-id <id> --account <account> [--audience <api>] [--scope <scope> ...] "
        + "[--require-scope <scope> ...] [--min-ttl <seconds> | --force] [--reveal]"

    @Test func tokenOptions() throws {
        let server = ["--domain", "https://auth.example", "--client-id", "c", "--account", "a"]
        try expectParsed(
            ["token"] + server + ["--audience", "https://api.example/", "--min-ttl", "0", "--require-scope", "read:items",
             "--require-scope=write:items"], command: "token")
        try expectParsed(["token"] + server + ["--force", "--reveal"], command: "token")
        try expectUsageError(
            ["token"] + server + ["--min-ttl", "120", "--force"],
            message: "'--min-ttl' and '--force' cannot be used together", usage: Self.tokenUsage,
            see: "tokenctl help token")
        try expectUsageError(
            // Since issue 24 a negative number is the option's (refused) value, not a missing one.
            ["token"] + server + ["--min-ttl", "-1"], message: "invalid value for '--min-ttl <seconds>': must be ≥ 0",
            usage: Self.tokenUsage, see: "tokenctl help token")
        try expectUsageError(
            ["token"] + server + ["--min-ttl=1m"],
            message: "invalid value for '--min-ttl <seconds>': expected a non-negative integer",
            usage: Self.tokenUsage, see: "tokenctl help token")
    }

    @Test func requiredFlagsConfirmDestructiveCommands() throws {
        try expectParsed(["reset", "--yes"], command: "reset")
        try expectParsed(["destroy", "--yes"], command: "destroy")
        try expectUsageError(
            ["destroy"], message: "missing required option '--yes'", usage: "tokenctl destroy --yes",
            see: "tokenctl help destroy")
        try expectParsed(["clear", "--account", "a", "--yes"], command: "clear")
        try expectUsageError(
            ["clear", "--account", "a"], message: "missing required option '--yes'",
            usage: "tokenctl clear --account <account> [--service <service>] --yes", see: "tokenctl help clear")
    }

    @Test func commandsWithoutOptionsParse() throws {
        for command in ["status", "list", "pending", "verify", "rotate-key", "unlock"] {
            try expectParsed([command], command: command)
        }
        try expectParsed(["migrate", "--dry-run"], command: "migrate")
        try expectParsed(["history", "user-1"], command: "history")
    }

    // MARK: Environment defaults

    @Test func domainAndClientIDFromEnvironment() throws {
        let environment = ["TOKENCTL_DOMAIN": "https://auth.example", "TOKENCTL_CLIENT_ID": "client"]
        try expectParsed(["resume"], command: "resume", environment: environment)
        try expectParsed(["resume", "--all"], command: "resume", environment: environment)
        try expectParsed(["logout", "--account", "a"], command: "logout", environment: environment)
        // --domain is optional in the spec now (--issuer is the other choice): with the client id
        // given, the missing server is named as --domain.
        try expectUsageError(
            ["resume"], environment: ["TOKENCTL_CLIENT_ID": "client"],
            message: "missing required option '--domain <url>' (or set TOKENCTL_DOMAIN; for another OpenID Connect provider "
                + "give '--issuer <url>' or set TOKENCTL_ISSUER)",
            usage: "tokenctl resume [--domain <url>] [--issuer <url>] --client-id <id> [--all] [--include-failed]", see: "tokenctl help resume")
    }

    @Test func commandLineWinsOverEnvironment() throws {
        try expectParsed(
            ["resume", "--domain", "https://auth.example"], command: "resume",
            environment: ["TOKENCTL_DOMAIN": "not a url", "TOKENCTL_CLIENT_ID": "client"])
    }

    @Test func invalidEnvironmentValueNamesTheVariable() throws {
        try expectUsageError(
            ["resume", "--client-id", "c"], environment: ["TOKENCTL_DOMAIN": "ftp://auth.example"],
            message: "invalid value for '--domain <url>' (from TOKENCTL_DOMAIN): expected an http or https URL",
            usage: "tokenctl resume [--domain <url>] [--issuer <url>] --client-id <id> [--all] [--include-failed]", see: "tokenctl help resume")
    }

    @Test func emptyEnvironmentVariableCountsAsUnset() throws {
        try expectUsageError(
            ["resume", "--domain", "https://auth.example"], environment: ["TOKENCTL_CLIENT_ID": ""],
            message: "missing required option '--client-id <id>' (or set TOKENCTL_CLIENT_ID)",
            usage: "tokenctl resume [--domain <url>] [--issuer <url>] --client-id <id> [--all] [--include-failed]", see: "tokenctl help resume")
    }

    // MARK: Usage errors

    @Test func unknownOptionSuggestsTheClosestName() throws {
        try expectUsageError(
            ["get", "--acount", "a", "--kind", "generic"], message: "unknown option '--acount' (did you mean '--account'?)",
            usage: getUsage, see: "tokenctl help get")
    }

    @Test func unknownOptionWithValueShowsOnlyTheName() throws {
        let result = try TokenctlBinary.run(["get", "--secret=hunter2", "--account", "a", "--kind", "generic"])
        #expect(result.exitCode == 64)
        #expect(result.standardError.hasPrefix("tokenctl: error: unknown option '--secret'\n"))
        #expect(!result.standardError.contains("hunter2"))
    }

    @Test func unknownCommandIsNamedUnlessItCouldBeASecret() throws {
        // Since issue 24 a command-like word (lower-case letters and dashes) is named.
        try expectUsageError(
            ["lsit"], message: "unknown command 'lsit' (did you mean 'list'?)", usage: rootUsage,
            see: "tokenctl help")
        let result = try TokenctlBinary.run(["--json", "s3cr3t-refresh-token-value"])
        #expect(result.exitCode == 64)
        #expect(result.standardError.hasPrefix("tokenctl: error: argument 2 is not a command\n"))
        #expect(!result.standardError.contains("s3cr3t"))
    }

    @Test func missingValue() throws {
        try expectUsageError(
            ["get", "--kind", "generic", "--account"], message: "missing value for '--account <account>'",
            usage: getUsage, see: "tokenctl help get")
        try expectUsageError(
            ["get", "--kind", "generic", "--account="], message: "missing value for '--account <account>'",
            usage: getUsage, see: "tokenctl help get")
    }

    @Test func missingRequiredOption() throws {
        try expectUsageError(
            ["get", "--kind", "generic"], message: "missing required option '--account <account>'", usage: getUsage,
            see: "tokenctl help get")
        // Since trial 2 --kind defaults to generic (secret-tool needs no kind): these parse.
        for command in ["get", "put", "delete"] { try expectParsed([command, "--account", "a"], command: command) }
    }

    @Test func missingRequiredArgument() throws {
        try expectUsageError(
            ["history"], message: "missing required argument '<user-id>'", usage: "tokenctl history <user-id>",
            see: "tokenctl help history")
    }

    @Test func unexpectedArgumentShowsItsPositionNotItsText() throws {
        try expectUsageError(
            ["state", "user-1", "eyJhbGciOi.secret"], message: "unexpected argument at position 3",
            usage: "tokenctl state <user-id>", see: "tokenctl help state")
        try expectUsageError(
            ["put", "--account", "a", "--kind", "generic", "my-secret"], message: "unexpected argument at position 6",
            usage: "tokenctl put --account <account> [--kind <kind>] [--service <service>] [--label <label>] [--access-policy <name>]",
            see: "tokenctl help put")
    }

    @Test func invalidKind() throws {
        try expectUsageError(
            ["get", "--account", "a", "--kind", "password"],
            message: "invalid value for '--kind <kind>': expected one of refresh-token, apple-user-id, access-token, "
                + "generic, id-token, profile",
            usage: getUsage, see: "tokenctl help get")
    }

    @Test func invalidPassphraseFileDescriptorShowsTheGlobalUsage() throws {
        try expectUsageError(
            ["list", "--passphrase-fd", "three"],
            message: "invalid value for '--passphrase-fd <fd>': expected a non-negative integer", usage: rootUsage,
            see: "tokenctl help")
    }

    @Test func storeAndAppIDAreMutuallyExclusive() throws {
        try expectUsageError(
            ["--store", "/tmp/s.db", "list", "--app-id", "com.example"],
            message: "'--store' and '--app-id' cannot be used together", usage: rootUsage, see: "tokenctl help")
    }

    @Test func optionGivenTwice() throws {
        try expectUsageError(
            ["get", "--account", "a", "--account", "b", "--kind", "generic"],
            message: "option '--account' may be given only once", usage: getUsage, see: "tokenctl help get")
    }

    @Test func flagWithValue() throws {
        try expectUsageError(
            ["get", "--account", "a", "--kind", "generic", "--reveal=yes"], message: "option '--reveal' takes no value",
            usage: getUsage, see: "tokenctl help get")
    }

    @Test func optionOfAnotherCommandIsUnknown() throws {
        try expectUsageError(
            ["list", "--reveal"], message: "unknown option '--reveal'", usage: "tokenctl list",
            see: "tokenctl help list")
    }

    @Test func invalidDomain() throws {
        try expectUsageError(
            ["resume", "--domain", "auth.example", "--client-id", "c"],
            message: "invalid value for '--domain <url>': expected an http or https URL",
            usage: "tokenctl resume [--domain <url>] [--issuer <url>] --client-id <id> [--all] [--include-failed]", see: "tokenctl help resume")
    }

    private static let loginUsage =
        "tokenctl login [--domain <url>] [--issuer <url>] --client-id <id> --account <account> [--browser | --device] "
        + "[--connection <connection>] [--audience <api>] [--redirect-port <port> ...] [--timeout <seconds>] "
        + "[--prompt <prompt>] [--login-hint <identifier> | --login-hint-fd <fd>] [--max-age <seconds>] [--acr-values <values>] "
        + "[--apple-user-id <user-id>] [--allow-user-change] [--first-name <name>] [--last-name <name>] [--scope <scope> ...] [--dpop]"
    private static let server = ["--domain", "http://127.0.0.1:9", "--client-id", "c", "--account", "a"]

    @Test func browserOptionsNeedBrowser() throws {
        for (option, value) in [("--timeout", "5"), ("--redirect-port", "53180"), ("--connection", "apple"), ("--audience", "x")] {
            try expectUsageError(
                ["login"] + Self.server + [option, value], message: "'\(option)' can only be used with '--browser'",
                usage: Self.loginUsage, see: "tokenctl help login")
        }
    }

    @Test func appleCodeOptionsExcludeBrowser() throws {
        for option in ["--apple-user-id", "--first-name", "--last-name"] {
            try expectUsageError(
                ["login", "--browser"] + Self.server + [option, "x"],
                message: "'--browser' and '\(option)' cannot be used together", usage: Self.loginUsage,
                see: "tokenctl help login")
        }
    }

    @Test func redirectPortAndTimeoutMustBeNumbersInRange() throws {
        for port in ["0", "65536", "http", "-1"] {
            try expectUsageError(
                ["login", "--browser"] + Self.server + ["--redirect-port=\(port)"],
                message: "invalid value for '--redirect-port <port>': expected a port number from 1 to 65535",
                usage: Self.loginUsage, see: "tokenctl help login")
        }
        try expectUsageError(
            ["login", "--browser"] + Self.server + ["--timeout", "0"],
            message: "invalid value for '--timeout <seconds>': expected a positive integer", usage: Self.loginUsage,
            see: "tokenctl help login")
    }

    /// The refused option has its own error with a hint line, and never echoes the value.
    @Test func appleCodeArgumentIsRefusedWithAHint() throws {
        for arguments in [["--apple-code", "c0de-canary"], ["--apple-code=c0de-canary"], ["--apple-code"]] {
            let result = try TokenctlBinary.run(["login"] + arguments + ["--account", "a"])
            #expect(result.exitCode == 64)
            #expect(result.standardOutput == "")
            #expect(
                result.standardError == """
                    tokenctl: error: '--apple-code' is refused: the authorization code would be readable by every \
                    local user in the process list (/proc/PID/cmdline)
                    tokenctl: hint: read from standard input: printf '%s' "$CODE" | tokenctl login --account A
                    Usage: \(Self.loginUsage)
                    See 'tokenctl help login'.

                    """, "\(arguments)")
        }
    }

    @Test func helpOfUnknownCommand() throws {
        try expectUsageError(
            ["help", "delet"], message: "unknown command 'delet' (did you mean 'delete'?)",
            usage: "tokenctl help [<command>]", see: "tokenctl help")
    }

    // MARK: Version and help precedence

    /// The version printed is the top-level VERSION file, the one source of the release number.
    @Test func version() throws {
        let version = try String(contentsOf: repositoryRoot.appendingPathComponent("VERSION"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(version.split(separator: ".").count == 3)
        for arguments in [["--version"], ["list", "--version"]] {
            let result = try TokenctlBinary.run(arguments)
            #expect(result.exitCode == 0)
            #expect(result.standardOutput == version + "\n")
            #expect(result.standardError == "")
        }
    }

    @Test func helpWinsOverErrorsOnTheSameLine() throws {
        let result = try TokenctlBinary.run(["get", "--acount", "x", "--help"])
        #expect(result.exitCode == 0)
        #expect(result.standardOutput.hasPrefix("OVERVIEW: Show one item's metadata"))
        #expect(result.standardError == "")
    }

    @Test func helpAfterDoubleDashIsAnArgument() throws {
        try expectParsed(["state", "--", "--help"], command: "state")
    }
}
