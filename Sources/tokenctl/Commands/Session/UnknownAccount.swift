import TokenStore

/// What tokenctl says when a session command names an account the store has nothing for: a
/// mistyped `--account` should point at the name, not only at a new sign-in.
struct UnknownAccount {
    /// The name of a stored account of the same service within two edits of the one asked
    /// for, if any.
    let closestName: String?

    /// Whether `account` has no entry at all in `store` (no item, no cached token); nil when it has.
    static func check(_ account: AccountID, in store: TokenStore) throws -> UnknownAccount? {
        let stored = try store.accounts().map(\.account).filter { $0.service == account.service }
        if stored.contains(where: { $0.name == account.name }) { return nil }
        return UnknownAccount(closestName: closestMatch(to: account.name, among: stored.map(\.name)))
    }

    /// For stdout, where the result may name accounts (as `accounts` does).
    var sentence: String {
        "No account of that name is in this store: 'tokenctl accounts' lists them"
            + (closestName.map { " (did you mean '\($0)'?)" } ?? "") + "."
    }

    /// For stderr, which never shows an account name.
    var hint: String {
        "sign in again with 'tokenctl login'; but no account of that name is in this store now: if it is "
            + "mistyped, 'tokenctl accounts' lists the accounts" + (closestName == nil ? "" : " (one has a close name)")
    }
}
