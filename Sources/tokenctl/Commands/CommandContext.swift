import AuthSession
import Foundation
import TokenStore

/// What every command needs: the parsed invocation, the console, the environment, and the
/// way to the store. Opening is lazy and explicit, so a command that only inspects never
/// creates a store or a key by accident.
struct CommandContext {
    /// The variable that names the store when neither `--store` nor `--app-id` is given.
    static let storeVariable = "TOKENCTL_STORE"
    /// The app id used for stores named by `--store PATH`: it only labels the keyring item.
    static let defaultAppID = "tokenctl"

    let invocation: CommandInvocation
    let console: Console
    let environment: [String: String]

    var command: ParsedCommand { invocation.command }
    var global: GlobalOptions { invocation.global }
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

    /// The key provider the global options ask for: the Secret Service, or with
    /// `--passphrase-fd N` the passphrase provider keeping its wrapped key next to the database.
    /// Call it once per command: the passphrase is read from the descriptor to its end.
    func keyProvider(storePath: String) throws -> any KeyProvider {
        if let fd = global.passphraseFileDescriptor {
            return PassphraseKeyProvider(storePath: storePath, passphrase: try SecretInput.passphrase(fileDescriptor: fd))
        }
        return SecretServiceKeyProvider()
    }

    // MARK: The authorization server

    /// The server configuration from `--domain` / `--client-id` (or their environment variables).
    /// - Throws: `UsageError` for a URL the session layer refuses (plain http to a remote host…).
    func serverConfiguration() throws -> AuthorizationServerConfiguration {
        guard let domain = command.value("domain"), let clientID = command.value("client-id") else {
            throw UsageError(kind: .missingOption(option: "--domain <url>"), commandName: command.name)
        }
        do {
            return try AuthorizationServerConfiguration(domain: domain, clientID: clientID)
        } catch let error as AuthSessionError where error.code == .insecureConfiguration {
            throw UsageError(
                kind: .invalidValue(
                    option: "--domain <url>", environmentVariable: nil,
                    expectation: "https, or plain http only to a loopback host (\(error.message))"),
                commandName: command.name)
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

// MARK: - Formatting helpers shared by the commands

enum Format {
    /// `2025-01-02T10:00:00Z`: UTC, whole seconds.
    static func date(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02dZ", c.year ?? 0, c.month ?? 0, c.day ?? 0, c.hour ?? 0,
            c.minute ?? 0, c.second ?? 0)
    }

    static func date(_ date: Date?) -> JSONValue { date.map { .string(Self.date($0)) } ?? .null }

    /// `0600`, or `-` for a missing file.
    static func mode(_ mode: Int?) -> String {
        guard let mode else { return "-" }
        let octal = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - octal.count)) + octal
    }

    static func optional(_ text: String?) -> JSONValue { text.map { .string($0) } ?? .null }

    static func strings(_ values: [String]) -> JSONValue { .array(values.map { .string($0) }) }
}

// MARK: - Running async session calls from the synchronous command

/// Runs `body` on the concurrency pool and blocks the calling (main) thread until it ends.
/// The main thread is not part of the cooperative pool, so waiting here cannot starve it.
func waitFor<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        do { box.set(.success(try await body())) } catch { box.set(.failure(error)) }
        done.signal()
    }
    done.wait()
    return try box.get()
}

private final class ResultBox<T: Sendable>: @unchecked Sendable {  // written once before the semaphore is signalled
    private let lock = NSLock()
    private var result: Result<T, any Error>?

    func set(_ value: Result<T, any Error>) { lock.withLock { result = value } }

    func get() throws -> T {
        guard let result = lock.withLock({ result }) else { fatalError("waitFor: no result after the task ended") }
        return try result.get()
    }
}
