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
    /// The app id used for stores named by `--store PATH` whose folder is not an app id: it only
    /// labels the keyring item.
    static let defaultAppID = "tokenctl"

    /// The app id a store named by its path belongs to: the folder of `…/APP-ID/tokens.sqlite`
    /// (the layout `TokenStore(appID:)` makes) when that is a valid app id, else "tokenctl".
    /// It only labels a new keyring item ("TokenStore data key — APP-ID") and is shown by
    /// `status`; the items are found by store id, so a store made under another label opens.
    static func appID(forStorePath path: String) -> String {
        let components = path.split(separator: "/", omittingEmptySubsequences: true)
        guard components.count >= 2, components.last == "tokens.sqlite" else { return defaultAppID }
        let folder = String(components[components.count - 2])
        let plain = folder.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: ".")
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        }
        guard plain, folder.utf8.count <= 255, folder != ".", folder != ".." else { return defaultAppID }
        return folder
    }

    let global: GlobalOptions
    let console: Console
    let environment: [String: String]
    /// Set by `slot add tpm-pin`: `--pin-fd` is the new slot's PIN, not a way to open the store.
    var leavesPINToCommand = false

    var json: Bool { global.json }

    /// The library's log: on stderr at debug level with `--verbose`, else off. The library
    /// logs no secret, account name or user id at any level.
    var logger: TokenStoreLogger {
        global.verbose ? .standardError(label: "tokenstore", level: .debug) : .disabled
    }

    // MARK: The store

    /// The database path and the app id of the store the user named.
    /// - Throws: `UsageError` when no store is named at all.
    func storeLocation() throws -> (path: String, appID: String) {
        switch global.storeLocation {
        case .path(let path):
            try Self.checkPathLength(path, variable: nil)
            return (path, Self.appID(forStorePath: path))
        case .appID(let appID):
            do {
                return (try TokenStore.defaultPath(appID: appID), appID)
            } catch let error as TokenStoreError where error.code == .invalidInput {
                // A command-line value: a usage error (64), not a data error.
                throw UsageError(
                    kind: .invalidValue(
                        option: GlobalOptions.appID.synopsis, environmentVariable: nil,
                        expectation: "expected 1–255 characters of [A-Za-z0-9._-], not . or .."),
                    commandName: nil)
            }
        case .defaultLocation:
            if let path = environment[Self.storeVariable], !path.isEmpty {
                try Self.checkPathLength(path, variable: Self.storeVariable)
                return (path, Self.appID(forStorePath: path))
            }
            // Shown with tokenctl's usage line, which names --store and --app-id.
            throw UsageError(kind: .noStoreNamed(variable: Self.storeVariable), commandName: nil)
        }
    }

    /// Refuses a store path the system cannot name (ENAMETOOLONG) as the usage error it is (64),
    /// before a file-system call fails on it.
    private static func checkPathLength(_ path: String, variable: String?) throws {
        do {
            try FileLayout.checkPathLength(path)
        } catch {
            throw UsageError(
                kind: .invalidValue(
                    option: GlobalOptions.store.synopsis, environmentVariable: variable,
                    expectation: "the path is too long (ENAMETOOLONG): the system allows \(FileLayout.maximumPathBytes) bytes "
                        + "in all and \(FileLayout.maximumNameBytes) per name"),
                commandName: nil)
        }
    }

    /// Whether a file exists at the store path (a dangling symbolic link counts: opening it is then refused).
    func storeFileExists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// The store location, refusing a path that names a directory: a mistyped path, not a
    /// permission problem (64).
    func checkedStoreLocation() throws -> (path: String, appID: String) {
        let location = try storeLocation()
        var info = stat()
        if lstat(location.path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR {
            throw CommandFailure(
                .usage, "the store path names a directory, not a database file",
                hint: "give the database file itself, e.g. --store DIR/tokens.sqlite")
        }
        return location
    }

    /// Fails with a clear message (66) when the store file does not exist; inspection commands
    /// never create a store (nor a data key) because of a mistyped path. A folder on the way
    /// that cannot be entered is a permission problem (77), not a missing store.
    func requireExistingStore() throws -> (path: String, appID: String) {
        let location = try checkedStoreLocation()
        guard storeFileExists(location.path) else {
            // EACCES on the way is reported as such, before "no store" could mislead.
            if case .missing = try FileLayout.judge(databasePath: location.path) {
                throw CommandFailure(
                    .noInput, "no store at the given path",
                    hint: "check --store, --app-id or \(Self.storeVariable); 'tokenctl put' or 'tokenctl login' creates a store")
            }
            return location
        }
        return location
    }

    /// Opens the store: read-only for the commands that only read (nothing created, migrated,
    /// chmod-ed, and no side file added), else for writing, creating it when `create` is true
    /// and it does not exist yet. A mode the writing open tightened is reported on stderr, and so
    /// is a store it made (``NewStoreNote``, also with --quiet and --json).
    /// - Throws: `CommandFailure` when the store is missing or empty; `TokenStoreError` from the open.
    /// `announcesNewStore: false` leaves the note to the caller (`put` prints it once its write succeeded).
    func openStore(
        create: Bool = false, readOnly: Bool = false, announcesNewStore: Bool = true, accessPolicy: AccessPolicy? = nil
    ) throws -> TokenStore {
        let location = create ? try checkedStoreLocation() : try requireExistingStore()
        let newStoreNote = create && announcesNewStore ? NewStoreNote(path: location.path) : nil
        if readOnly, FileLayout.fileSize(of: location.path) == 0 {
            throw CommandFailure(
                .noInput, "the store file is empty: nothing was stored in it yet",
                hint: "'tokenctl put' or 'tokenctl login' makes it a store")
        }
        // The automatic choice is the library's own (it reads the recorded provider on its first connection).
        // `slot add tpm-pin` reads --pin-fd as the new slot's PIN: the store is opened without it.
        let pinOpens = global.pinFileDescriptor != nil && !leavesPINToCommand
        let automatic = global.passphraseFileDescriptor == nil && global.recoveryKeyFileDescriptor == nil && !pinOpens
            && global.keyProvider == .auto
        let provider = automatic ? nil : try keyProvider(storePath: location.path, withPIN: pinOpens)
        let directory = PathNames.directory(of: location.path)
        let modeFiles = [(directory.isEmpty ? "." : directory, "store directory", 0o700), (location.path, "database file", 0o600)]
        let before = modeFiles.map { FileLayout.mode(of: $0.0) }
        let store = try TokenStore(
            path: location.path, appID: location.appID, keyProvider: provider, logger: logger,
            options: .init(readOnly: readOnly, accessPolicy: accessPolicy))
        for (file, old) in zip(modeFiles, before) {
            if let old, old != file.2, FileLayout.mode(of: file.0) == file.2 {
                note("made the \(file.1) \(Format.mode(file.2)) (it was \(Format.mode(old)))")
            }
        }
        for line in newStoreNote?.lines(path: location.path) ?? [] { console.writeError("tokenctl: \(line)\n") }
        return store
    }

    /// Opens the existing store and runs a long `task` on it, showing `progressLabel: done/total`
    /// on stderr meanwhile (see `ProgressReporter`); `task` hands the progress callback to the store.
    /// - Throws: what `openStore()` and `task` throw.
    func withOpenStore<T>(
        progressLabel: String, readOnly: Bool = false, _ task: (TokenStore, _ progress: @escaping (Int, Int) -> Void) throws -> T
    ) throws -> T {
        let store = try openStore(readOnly: readOnly)
        let progress = ProgressReporter(label: progressLabel, console: console, quiet: global.quiet)
        let result = try task(store) { done, total in progress.update(done: done, total: total) }
        progress.finish()
        return result
    }

    /// The key provider the global options ask for: with `--passphrase-fd N` the passphrase
    /// provider keeping its wrapped key under `$XDG_STATE_HOME/tokenstore/keys` (not beside the
    /// database; a key file an earlier version left there is still read); with
    /// `--key-provider portal` the Secret portal's provider (key files beside the database);
    /// with `secret-service` the Secret Service; with `tpm` the TPM-sealed key (``TPMKeyProvider``,
    /// `$TOKENSTORE_TPM_TCTI`); else the library's automatic choice (the
    /// Secret Service, or the portal in a Flatpak sandbox that cannot reach it).
    /// Call it once per command: the passphrase is read from the descriptor to its end.
    func keyProvider(storePath: String, withPIN: Bool = true) throws -> any KeyProvider {
        if withPIN, let fd = global.pinFileDescriptor {
            guard global.keyProvider == .auto else {
                throw CommandFailure(
                    .usage, "--pin-fd opens the store with its TPM PIN key slot; it cannot be combined with --key-provider",
                    hint: "give one of them (unset TOKENCTL_KEY_PROVIDER); the TPM is $TOKENSTORE_TPM_TCTI")
            }
            return TPMPINKeyProvider(pin: try SecretInput.pin(fileDescriptor: fd))
        }
        if let fd = global.recoveryKeyFileDescriptor {
            guard global.keyProvider == .auto else {
                throw CommandFailure(
                    .usage, "--recovery-key-fd opens the store with its recovery key; it cannot be combined with --key-provider",
                    hint: "give one of them (unset TOKENCTL_KEY_PROVIDER)")
            }
            return RecoveryKeyProvider(recoveryKey: try SecretInput.recoveryKey(fileDescriptor: fd))
        }
        if let fd = global.passphraseFileDescriptor {
            guard global.keyProvider == .auto else {
                throw CommandFailure(
                    .usage, "--passphrase-fd chooses the passphrase key provider; it cannot be combined with --key-provider",
                    hint: "give one of them (unset TOKENCTL_KEY_PROVIDER)")
            }
            return PassphraseKeyProvider(storePath: storePath, passphrase: try SecretInput.passphrase(fileDescriptor: fd))
        }
        // A named kind makes its own provider (every kind with a command-line name can).
        guard let make = global.keyProvider.traits?.make else { return KeyProviderSelection.automatic(storePath: storePath) }
        return make(storePath)
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
