import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import TokenStore

/// What every command needs besides its own arguments: the global options, the console, the
/// environment, and the way to the store. Opening is lazy and explicit, so a command that
/// only inspects never creates a store or a key by accident.
struct CommandContext {
    /// The variable that names the store when neither `--store` nor `--app-id` is given.
    static let storeVariable = "TOKENCTL_STORE"
    /// The app id used for stores named by `--store PATH`: it only labels the keyring item.
    static let defaultAppID = "tokenctl"

    let global: GlobalOptions
    let console: Console
    let environment: [String: String]

    var json: Bool { global.json }

    // MARK: The store

    /// The database path and the app id of the store the user named.
    /// - Throws: `UsageError` when no store is named at all.
    func storeLocation() throws -> (path: String, appID: String) {
        switch global.storeLocation {
        case .path(let path):
            return (path, Self.defaultAppID)
        case .appID(let appID):
            return (try TokenStore.defaultPath(appID: appID), appID)
        case .defaultLocation:
            if let path = environment[Self.storeVariable], !path.isEmpty { return (path, Self.defaultAppID) }
            // Shown with tokenctl's usage line, which names --store and --app-id.
            throw UsageError(kind: .missingOption(option: "--store <path>"), commandName: nil)
        }
    }

    /// Whether a file exists at the store path (a dangling symbolic link counts: opening it is then refused).
    func storeFileExists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// Fails with a clear message when the store file does not exist; inspection commands
    /// never create a store (nor a data key) because of a mistyped path.
    func requireExistingStore() throws -> (path: String, appID: String) {
        let location = try storeLocation()
        guard storeFileExists(location.path) else {
            throw CommandFailure(
                .failure, "no store at the given path",
                hint: "check --store / --app-id; 'tokenctl put' or 'tokenctl login' creates a store")
        }
        return location
    }

    /// Opens the store (creating it when `create` is true and it does not exist yet).
    /// - Throws: `CommandFailure` when the store is missing; `TokenStoreError` from the open.
    func openStore(create: Bool = false) throws -> TokenStore {
        let location = create ? try storeLocation() : try requireExistingStore()
        let provider = try keyProvider(storePath: location.path)
        return try TokenStore(path: location.path, appID: location.appID, keyProvider: provider)
    }

    /// Opens the existing store and runs a long `task` on it, showing `progressLabel: done/total`
    /// on stderr meanwhile (see `ProgressReporter`); `task` hands the progress callback to the store.
    /// - Throws: what `openStore()` and `task` throw.
    func withOpenStore<T>(
        progressLabel: String, _ task: (TokenStore, _ progress: @escaping (Int, Int) -> Void) throws -> T
    ) throws -> T {
        let store = try openStore()
        let progress = ProgressReporter(label: progressLabel, console: console, quiet: global.quiet)
        let result = try task(store) { done, total in progress.update(done: done, total: total) }
        progress.finish()
        return result
    }

    /// The key provider the global options ask for: with `--passphrase-fd N` the passphrase
    /// provider keeping its wrapped key under `$XDG_STATE_HOME/tokenstore/keys` (not beside the
    /// database; a key file an earlier version left there is still read); with
    /// `--key-provider portal` the Secret portal's provider (key files beside the database);
    /// with `secret-service` the Secret Service; else the library's automatic choice (the
    /// Secret Service, or the portal in a Flatpak sandbox that cannot reach it).
    /// Call it once per command: the passphrase is read from the descriptor to its end.
    func keyProvider(storePath: String) throws -> any KeyProvider {
        if let fd = global.passphraseFileDescriptor {
            guard global.keyProvider == .auto else {
                throw CommandFailure(
                    .usage, "--passphrase-fd chooses the passphrase key provider; it cannot be combined with --key-provider",
                    hint: "give one of them (unset TOKENCTL_KEY_PROVIDER)")
            }
            return PassphraseKeyProvider(storePath: storePath, passphrase: try SecretInput.passphrase(fileDescriptor: fd))
        }
        switch global.keyProvider {
        case .auto: return KeyProviderSelection.automatic(storePath: storePath)
        case .secretService: return SecretServiceKeyProvider()
        case .portal: return PortalKeyProvider(storePath: storePath)
        }
    }

    // MARK: Output

    /// Writes `document` when `--json` is given, else `text()`.
    func emit(_ document: JSONValue, text: () -> String) {
        console.write(json ? document.rendered() : text())
    }

    /// An informational line on stderr, silenced by `--quiet` and `--json`.
    func note(_ text: String) {
        guard !global.quiet, !json else { return }
        console.writeError("tokenctl: \(text)\n")
    }
}
