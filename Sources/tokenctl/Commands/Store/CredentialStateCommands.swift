import TokenStore

/// `<user-id>`: the user whose credential state `state` and `history` show.
private let userIDArgument = PositionalSpec("user-id", "The Apple user identifier.")

/// A command whose one argument is the user id.
protocol UserIDCommand: TokenctlCommand {
    init(userID: String)
}

extension UserIDCommand {
    init(parsed: ParsedCommand) throws {
        self.init(userID: try parsed.requiredArgument(userIDArgument))
    }
}

/// `tokenctl state`: a user's credential state (authorized, revoked or notFound).
struct StateCommand: UserIDCommand {
    static let spec = CommandSpec(
        "state",
        abstract: "Show a user's credential state: authorized, revoked or notFound.",
        discussion: "Exits 0 for each of the three states.",
        positionals: [userIDArgument])

    let userID: String

    func run(_ context: CommandContext) throws -> ExitCode {
        let store = try context.openStore(readOnly: true)
        let state = try store.credentialState(forUserID: userID)
        context.emit(["state": .string(state.rawValue)]) { state.rawValue + "\n" }
        return .ok
    }
}

/// `tokenctl history`: a user's credential state transitions.
struct HistoryCommand: UserIDCommand {
    static let spec = CommandSpec(
        "history",
        abstract: "Show a user's credential state transitions, with time and reason.",
        positionals: [userIDArgument])

    let userID: String

    func run(_ context: CommandContext) throws -> ExitCode {
        let store = try context.openStore(readOnly: true)
        let state = try store.credentialState(forUserID: userID)
        let transitions = try store.credentialStateHistory(forUserID: userID)
        let document: JSONValue = [
            "state": .string(state.rawValue),
            "transitions": .array(transitions.map { transition in
                [
                    "date": .string(Format.date(transition.date)), "from": .string(transition.from.rawValue),
                    "to": .string(transition.to.rawValue), "reason": .string(transition.reason.rawValue),
                    "detail": Format.optional(transition.detail),
                ]
            }),
        ]
        context.emit(document) {
            guard !transitions.isEmpty else { return "No recorded transitions (state: \(state.rawValue)).\n" }
            var table = TextTable(header: ["DATE", "FROM", "TO", "REASON", "DETAIL"])
            for transition in transitions {
                table.append([
                    Format.date(transition.date), transition.from.rawValue, transition.to.rawValue,
                    transition.reason.rawValue, transition.detail ?? "-",
                ])
            }
            return table.rendered()
        }
        return .ok
    }
}
