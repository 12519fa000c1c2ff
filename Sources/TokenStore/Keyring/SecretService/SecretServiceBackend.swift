internal import CGIO
internal import CLibSecret

/// How ``SecretServiceKeyProvider`` reads the Secret Service: one read path
/// (``SecretServiceBackends/current``).
///
/// - ``SecretServicePathBackend``: libsecret's path-level calls (`secret-paths.h`) on its one cached
///   service proxy: one `SearchItems`, one `GetSecrets`, and a warm-up of the connection that a
///   store's open starts while it reads its database (``SecretServiceWarmUp``).
///
/// Writes and deletes (``SecretServiceItems``) use libsecret's D-Bus item and service calls.
protocol SecretServiceBackend: Sendable {
    /// The items matching `attributes` under `schema` (its name matched as `xdg:schema`) in every
    /// collection, without unlocking anything (no prompt).
    /// - Parameter secrets: whose secrets to read: none, the single unlocked item's when exactly
    ///   one item matched, or every unlocked item's.
    func search(
        _ schema: UnsafeMutablePointer<SecretSchema>, _ attributes: OpaquePointer, secrets: SecretServiceSearch.Secrets,
        _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) -> SecretServiceSearch

    /// Whether the collection behind the `default` alias is locked; nil when there is none.
    /// `unlockedItem`: the path of an item the same operation just found unlocked; when it lies
    /// in the default collection, that collection is unlocked without asking again.
    func lockState(unlockedItem: String?, _ cancellable: GLibCancellable, operation: String) throws(TokenStoreError) -> Bool?

    /// Deletes the unlocked item at `path` (one this backend's search found).
    func delete(_ path: String, _ cancellable: GLibCancellable, operation: String) throws(TokenStoreError)

    /// Starts connecting in the background (best effort), where this backend can.
    func beginWarmUp(timeout: Duration)
}

/// What a ``SecretServiceBackend`` search found.
struct SecretServiceSearch: Sendable {
    /// Whose secrets a search reads.
    enum Secrets: Sendable { case none, ifSingle, all }

    /// One unlocked item.
    struct Item: Sendable {
        /// Its object path; nil where the backend has none (libsecret's file backend).
        var path: String?
        /// Its secret, when asked for; nil when not asked for or the service returned none.
        var secret: SecretBytes?
    }

    var unlocked: [Item] = []
    var lockedCount = 0
    var count: Int { unlocked.count + lockedCount }
}

/// The backend of this process, chosen once.
enum SecretServiceBackends {
    /// The path-level backend, everywhere. The provider writes with libsecret's D-Bus item calls
    /// (`secret_item_create_sync`, `secret_service_store_sync`, `secret_service_clear_sync`), so it
    /// reads the same D-Bus service too, also where libsecret's own `secret_password_*` calls
    /// would pick its file backend (a Flatpak or Snap sandbox, `SECRET_BACKEND=file`): reading
    /// there through them missed every key written to the service ("0 key items after storing one").
    static let current: any SecretServiceBackend = SecretServicePathBackend.shared
}

/// The path-level backend (``SecretServicePaths``). One instance per process: libsecret's
/// cached service proxy, which its calls and its warm-up share, is one per process.
struct SecretServicePathBackend: SecretServiceBackend {
    static let shared = SecretServicePathBackend()

    /// The background connection a store's open starts (state of this backend).
    let warmUp = SecretServiceWarmUp()

    private init() {}

    func search(
        _ schema: UnsafeMutablePointer<SecretSchema>, _ attributes: OpaquePointer, secrets: SecretServiceSearch.Secrets,
        _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) -> SecretServiceSearch {
        let paths = try SecretServicePaths.search(schema, attributes, cancellable, operation: operation)
        var found = SecretServiceSearch(unlocked: paths.unlocked.map { .init(path: $0) }, lockedCount: paths.locked.count)
        let read = secrets == .all || (secrets == .ifSingle && paths.count == 1)
        guard read, !paths.unlocked.isEmpty else { return found }
        let values = try SecretServicePaths.readableSecrets(of: paths.unlocked, cancellable, operation: operation)
        for index in found.unlocked.indices { found.unlocked[index].secret = values[index] }
        return found
    }

    func lockState(unlockedItem: String?, _ cancellable: GLibCancellable, operation: String) throws(TokenStoreError) -> Bool? {
        try SecretServicePaths.defaultCollectionLocked(unlockedItem: unlockedItem, cancellable, operation: operation)
    }

    func delete(_ path: String, _ cancellable: GLibCancellable, operation: String) throws(TokenStoreError) {
        try SecretServicePaths.delete(path, cancellable, operation: operation)
    }

    func beginWarmUp(timeout: Duration) { warmUp.begin(timeout: timeout) }
}
