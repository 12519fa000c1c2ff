/// Keeps data keys in the Secret Service (gnome-keyring, KWallet, KeePassXC) through libsecret.
///
/// Each key is one item in the default collection, labelled "TokenStore data key — <app-id>"
/// under the schema `dev.tokenstore.DataKey`, with exactly two attributes, `store-id` and
/// `key-id` (Secret Service attributes are not encrypted, so nothing else goes there).
///
/// Every libsecret call runs on a thread of its own and is bounded by ``timeout``; a call
/// that does not answer in time is cancelled and throws `timedOut`.
///
/// The provider never answers "no key" when it could not look: a locked collection throws
/// `keyringLocked` from every operation, where libsecret itself would quietly return
/// nothing (lookup, clear). By default it never unlocks anything and so never shows a
/// prompt; pass `allowsUserInteraction: true`, or call ``unlockDefaultCollection(timeout:)``,
/// to let the Secret Service ask the user.
///
/// ```swift
/// let provider = SecretServiceKeyProvider()
/// let reference = DataKeyReference(storeID: storeID, keyID: keyID, appID: "com.example.app")
/// if let key = try provider.loadKey(reference) { … }
/// ```
public struct SecretServiceKeyProvider: KeyProvider {
    /// The length of a data key in bytes; an item of any other length is `dataKeyCorrupt`.
    public static let keyLength = 32

    public var name: String { KeyProviderKind.secretService.rawValue }

    /// The time bound of one operation (all the libsecret calls it makes together).
    public let timeout: Duration
    /// Whether a locked collection may be unlocked by asking the user (a Secret Service prompt).
    public let allowsUserInteraction: Bool
    /// The time bound of an unlock prompt when ``allowsUserInteraction`` is on.
    public let interactionTimeout: Duration
    /// How this provider reads the service, chosen when it is made (``SecretServiceBackends``).
    let backend: any SecretServiceBackend

    /// A provider for the session's Secret Service.
    /// - Parameters:
    ///   - timeout: the bound of each operation, 10 seconds by default.
    ///   - allowsUserInteraction: when true, an operation that finds the default collection
    ///     locked asks the Secret Service to unlock it (a prompt) and tries once more.
    ///   - interactionTimeout: how long to wait for the user at that prompt.
    public init(
        timeout: Duration = .seconds(10), allowsUserInteraction: Bool = false,
        interactionTimeout: Duration = .seconds(120)
    ) {
        self.timeout = timeout
        self.allowsUserInteraction = allowsUserInteraction
        self.interactionTimeout = interactionTimeout
        self.backend = SecretServiceBackends.current
    }

    /// Reads a data key without unlocking anything.
    ///
    /// - Returns: the key, or `nil` when the service answered, the default collection is
    ///   unlocked and no item matches.
    /// - Throws: ``TokenStoreError`` `keyringLocked` (the item, or the default collection
    ///   when no item is visible, is locked), `dataKeyCorrupt` (the item is not 32 bytes, or
    ///   more than one item matches the reference), `secretServiceUnavailable`, `timedOut`,
    ///   `cancelled`, `ioError`.
    public func loadKey(_ reference: DataKeyReference) throws -> SecretBytes? {
        try withInteraction { () throws(TokenStoreError) -> SecretBytes? in
            try GLibWorkerThread.run("load key", timeout: timeout) { cancellable throws(TokenStoreError) in
                try loadKeyOnce(reference, cancellable, operation: "load key").key
            }
        }
    }

    /// ``loadKey(_:)``'s work on the worker thread; also the object path of the key's item
    /// (path-level searches only, ``SecretServicePaths``).
    /// `expectedLength` nil: any length (a TPM-sealed key's item, ``TPMKeyProvider``).
    func loadKeyOnce(
        _ reference: DataKeyReference, _ cancellable: GLibCancellable, operation: String,
        expectedLength: Int? = SecretServiceKeyProvider.keyLength
    ) throws(TokenStoreError) -> (key: SecretBytes?, itemPath: String?) {
        let found = try SecretServiceItems.search(reference, loadSecret: true, in: backend, cancellable, operation: operation)
        if found.count > 1 { throw Self.duplicateItems(found.count, operation) }
        if found.count == 1 {
            if found.locked > 0 { throw Self.locked(operation) }
            guard let key = found.secret else {
                throw TokenStoreError(.ioError, "\(SecretServiceItems.unreadableSecretMessage) (\(GLibError.inWords(operation))).")
            }
            guard expectedLength == nil || key.count == expectedLength else {
                throw TokenStoreError(
                    .dataKeyCorrupt, "The key item holds \(key.count) bytes, not \(expectedLength ?? Self.keyLength) (\(GLibError.inWords(operation))).")
            }
            return (key, found.unlockedPath)
        }
        // Nothing visible. A locked collection may hide its items (not every
        // provider lists locked items), so "missing" only when it is unlocked.
        if try SecretServiceItems.defaultCollectionLocked(in: backend, cancellable, operation: operation) == true {
            throw Self.locked(operation)
        }
        return (nil, nil)
    }

    /// Stores a data key in the default collection. An item of the same reference is never
    /// overwritten in place: the key is written as a new item, then the old one is deleted
    /// (storing the key it already holds changes nothing).
    ///
    /// Nothing is written into a locked collection (that would make the service prompt), and
    /// no collection is created when there is no default one (that would be a dialog).
    ///
    /// - Throws: ``TokenStoreError`` `invalidInput` (not 32 bytes), `keyringLocked`,
    ///   `secretServiceUnavailable` (also: the service has no default collection),
    ///   `timedOut`, `cancelled`, `ioError`.
    public func storeKey(_ key: SecretBytes, for reference: DataKeyReference) throws {
        guard key.count == Self.keyLength else {
            throw TokenStoreError(
                .invalidInput, "A data key must be \(Self.keyLength) bytes, not \(key.count).")
        }
        try withInteraction { () throws(TokenStoreError) in
            try GLibWorkerThread.run("store key", timeout: timeout) { cancellable throws(TokenStoreError) in
                try SecretServiceItems.store(key, for: reference, in: backend, cancellable, operation: "store key")
            }
        }
    }

    /// Deletes every item of the reference. Succeeds when none is left, also when there was none.
    ///
    /// - Warning: every row sealed under this key becomes unreadable.
    /// - Throws: ``TokenStoreError`` `keyringLocked` (an item, or the default collection when
    ///   no item is visible, is locked: libsecret would report "nothing deleted" with no
    ///   error), `secretServiceUnavailable`, `timedOut`, `cancelled`, `ioError` (an item
    ///   survived the delete).
    public func deleteKey(_ reference: DataKeyReference) throws {
        try withInteraction { () throws(TokenStoreError) in
            try GLibWorkerThread.run("delete key", timeout: timeout) { cancellable throws(TokenStoreError) in
                let operation = "delete key"
                let before = try SecretServiceItems.search(reference, loadSecret: false, in: backend, cancellable, operation: operation)
                if before.locked > 0 { throw Self.locked(operation) }
                if before.count == 0 {
                    if try SecretServiceItems.defaultCollectionLocked(in: backend, cancellable, operation: operation) == true {
                        throw Self.locked(operation)
                    }
                    return
                }
                _ = try SecretServiceItems.clear(reference, cancellable, operation: operation)
                // Whatever clear answered, believe only a search that finds nothing.
                let after = try SecretServiceItems.search(reference, loadSecret: false, in: backend, cancellable, operation: operation)
                if after.locked > 0 { throw Self.locked(operation) }
                if after.count > 0 {
                    throw TokenStoreError(
                        .ioError, "\(after.count) key item(s) survived the delete (\(GLibError.inWords(operation))).")
                }
            }
        }
    }

    /// Tells whether the key is present, locked away, or missing, without unlocking
    /// anything (never a prompt, whatever ``allowsUserInteraction`` says).
    ///
    /// - Returns: `present` (one unlocked item), `locked` (the item, or the default
    ///   collection when no item is visible, is locked), `missing`.
    /// - Throws: ``TokenStoreError`` `dataKeyCorrupt` (more than one item),
    ///   `secretServiceUnavailable`, `timedOut`, `cancelled`, `ioError`.
    public func availability(of reference: DataKeyReference) throws -> DataKeyAvailability {
        let first = try reconnecting { () throws(TokenStoreError) -> DataKeyAvailability in try availabilityOnce(of: reference) }
        guard first == .locked, try unlockedWithoutPrompt() else { return first }
        return try availabilityOnce(of: reference)
    }

    private func availabilityOnce(of reference: DataKeyReference) throws(TokenStoreError) -> DataKeyAvailability {
        try GLibWorkerThread.run("key availability", timeout: timeout) { cancellable throws(TokenStoreError) in
            let operation = "key availability"
            let found = try SecretServiceItems.search(reference, loadSecret: false, in: backend, cancellable, operation: operation)
            if found.count > 1 { throw Self.duplicateItems(found.count, operation) }
            if found.count == 1 { return found.locked > 0 ? .locked : .present }
            if try SecretServiceItems.defaultCollectionLocked(in: backend, cancellable, operation: operation) == true {
                return .locked
            }
            return .missing
        }
    }

    /// Asks the Secret Service to unlock the default collection. The service may show a
    /// prompt; this waits for the user up to `timeout`. Returns at once when the collection
    /// is already unlocked.
    ///
    /// - Throws: ``TokenStoreError`` `keyringLocked` (the prompt was dismissed or could not
    ///   be shown), `secretServiceUnavailable`, `timedOut`, `cancelled`, `ioError` (no
    ///   default collection).
    public func unlockDefaultCollection(timeout: Duration = .seconds(120)) throws {
        try reconnecting { () throws(TokenStoreError) in try unlock(timeout: timeout) }
    }

    // MARK: - Private

    private func unlock(timeout: Duration) throws(TokenStoreError) {
        try GLibWorkerThread.run("unlock keyring", timeout: timeout) { cancellable throws(TokenStoreError) in
            let operation = "unlock keyring"
            if try SecretServiceItems.unlockDefaultCollection(cancellable, operation: operation) == false {
                throw TokenStoreError(
                    .keyringLocked,
                    "The keyring stayed locked: the unlock prompt was dismissed or could not be shown (\(GLibError.inWords(operation))).",
                    hint: TokenStoreError.unlockHint)
            }
        }
    }

    /// Runs `body`; when it finds the keyring locked and interaction is allowed, unlocks
    /// (a prompt) and runs it once more.
    /// A locked keyring is first unlocked without a prompt where the provider allows that
    /// (KWallet with its wallet open, see ``SecretServiceItems/unlockWithoutPrompt(_:operation:)``).
    func withInteraction<R>(_ body: () throws(TokenStoreError) -> R) throws(TokenStoreError) -> R {
        do {
            return try reconnecting(body)
        } catch where error.code == .keyringLocked {
            if try unlockedWithoutPrompt() { return try reconnecting(body) }
            guard allowsUserInteraction else { throw error }
            try unlock(timeout: interactionTimeout)
            return try reconnecting(body)
        }
    }

    private func unlockedWithoutPrompt() throws(TokenStoreError) -> Bool {
        try GLibWorkerThread.run("unlock keyring", timeout: timeout) { cancellable throws(TokenStoreError) in
            try SecretServiceItems.unlockWithoutPrompt(cancellable, operation: "unlock keyring")
        }
    }

    /// Runs `body`; when no Secret Service answered, forgets libsecret's cached service and
    /// runs it once more.
    ///
    /// libsecret keeps one service proxy per process, bound to the unique bus name of the
    /// daemon it first reached: once that daemon has exited, every later call fails ("name
    /// not provided by any .service files") even after a new daemon took its place, until
    /// the process restarts. Forgetting the proxy lets this call and the later ones reach
    /// the daemon running now (or have D-Bus start one).
    ///
    /// The same once more for a failed transfer session: KWallet 5 gets about one
    /// Diffie-Hellman session in 50 wrong (it wants a 128-byte public key, so a key with a
    /// leading zero byte is refused, "Client public key size is invalid", or its shared
    /// secret decrypts to garbage: libsecret then reads no secret). A new connection
    /// negotiates a new session. A key store checks what it wrote by reading it back, so a
    /// garbled write shows here too; its retry replaces that item.
    private func reconnecting<R>(_ body: () throws(TokenStoreError) -> R) throws(TokenStoreError) -> R {
        do {
            return try body()
        } catch where error.code == .secretServiceUnavailable || Self.isSessionFailure(error) {
            SecretServiceItems.forgetCachedService()
            return try body()
        }
    }

    /// An error that a new transfer session may not repeat (see ``reconnecting(_:)``): an
    /// unreadable secret, a key write that did not read back (KWallet answered the read-back
    /// search with no item: seen in ~1 matrix run in 3 once the epoch was raised more
    /// often), and an epoch item whose secret decrypted to something that is not a number (a
    /// garbled session; a second one in a row is the `integrityCheckFailed` it says).
    static func isSessionFailure(_ error: TokenStoreError) -> Bool {
        if error.code == .integrityCheckFailed { return error.message.contains(SecretServiceEpochItems.notANumberMessage) }
        guard error.code == .ioError else { return false }
        if error.message.contains(SecretServiceItems.unreadableSecretMessage) { return true }
        if error.message.contains(SecretServiceItems.notStoredMessage) { return true }
        guard case .glib(let domain, _, let message)? = error.cause else { return false }
        return domain == "secret-error" || message.contains("Client public key size is invalid")
    }

    static func locked(_ operation: String) -> TokenStoreError {
        TokenStoreError(
            .keyringLocked, "The keyring holding the data key is locked (\(GLibError.inWords(operation))).",
            hint: TokenStoreError.unlockHint)
    }

    private static func duplicateItems(_ count: Int, _ operation: String) -> TokenStoreError {
        TokenStoreError(
            .dataKeyCorrupt,
            "More than one key item (\(count)) matches this key reference; refusing to choose (\(GLibError.inWords(operation))).",
            hint: "Remove the extra items (secret-tool search --all store-id <id>) so that one remains.")
    }
}
