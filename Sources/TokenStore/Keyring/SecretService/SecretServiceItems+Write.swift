internal import CGIO
internal import CLibSecret

/// The write path of ``SecretServiceKeyProvider`` and the prompt-free unlock, written so that
/// no Secret Service can turn a key write into a dialog that never returns:
///
/// - **No silent collection creation.** libsecret's `secret_password_store` into the
///   `default` alias calls `CreateCollection` when there is no default collection; KeePassXC
///   and KWallet answer that with a dialog (and KWallet rewrites its "Default Wallet"). The
///   store resolves the default collection first and throws when there is none.
/// - **Nothing written into a locked collection.** A store sent to a locked collection makes
///   libsecret unlock it (a prompt; KeePassXC's hangs headless). The store checks first.
/// - **No identifying label in clear text.** KWallet keeps labels and attributes unencrypted
///   (`<wallet>_attributes.json`): there the label carries no app id. It is unique per key
///   (KWallet files items under their label; two created at once with one label collided).
/// - **No item is overwritten in place.** Replacing an item another process created makes
///   KeePassXC run a per-item prompt that never completes. A key of an existing reference
///   is written as a new item (`Replace` off), then the old items are deleted by path.
extension SecretServiceItems {
    /// The text of the error for a key write whose read-back found no single item.
    static let notStoredMessage = "key items after storing one"

    /// Stores `key` as a new item of `reference` in the default collection, then deletes any
    /// older item of the same reference. Storing the key an item already holds changes nothing.
    static func store(
        _ key: SecretBytes, for reference: DataKeyReference, in backend: any SecretServiceBackend,
        _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) {
        try withWritableDefaultCollection(holding: "the data key", cancellable, operation: operation) {
            collection throws(TokenStoreError) in
            let before = try itemsBeforeWrite(reference, in: backend, cancellable, operation: operation)
            if before.locked > 0 {
                throw TokenStoreError(
                    .keyringLocked, "The keyring holding the data key is locked (\(operation)).",
                    hint: TokenStoreError.unlockHint)
            }
            if before.count == 1, let existing = before.secret, existing == key { return }
            let old = try items(of: reference, cancellable, operation: operation)
            defer { for item in old { g_object_unref(item) } }
            try create(key, for: reference, in: collection, cancellable, operation: operation)
            for item in old {
                try deleteItem(item, cancellable, operation: operation)
            }
            // Read it back: a transfer session that went wrong (KWallet) stores other bytes.
            let after = try search(reference, loadSecret: true, in: backend, cancellable, operation: operation)
            guard after.count == 1 else {
                throw TokenStoreError(.ioError, "\(after.count) \(notStoredMessage) (\(operation)).")
            }
            guard let stored = after.secret, stored == key else {
                throw TokenStoreError(.ioError, "\(unreadableSecretMessage): the stored key did not read back (\(operation)).")
            }
        }
    }

    /// The items of `reference` before a write, with the secret of a single one. An item whose
    /// secret cannot be read is one to replace, not an error: KWallet registers an item (its
    /// attributes) before it decrypts the secret sent with it, and when that decryption fails (a
    /// garbled transfer session, see ``SecretServiceKeyProvider``) it answers the create with an
    /// error but keeps the item, with no secret. The retry on a new connection then finds it.
    private static func itemsBeforeWrite(
        _ reference: DataKeyReference, in backend: any SecretServiceBackend, _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) -> Found {
        do {
            return try search(reference, loadSecret: true, in: backend, cancellable, operation: operation)
        } catch where error.code == .ioError && error.message.contains(unreadableSecretMessage) {
            return try search(reference, loadSecret: false, in: backend, cancellable, operation: operation)
        }
    }

    /// The label of a new key item. KWallet files an item under its label and reuses the place of
    /// an item that has no secret (see ``itemsBeforeWrite(_:in:_:operation:)``) for the next item of
    /// that label, so that deleting the secret-less one deletes the new one's secret with it (seen
    /// as "0 key items after storing one" in the provider matrix): there every write has a label
    /// of its own, with no app id (KWallet keeps labels in clear text).
    static func itemLabel(_ reference: DataKeyReference, onKWallet: Bool) -> String {
        guard onKWallet else { return reference.label }
        return "\(reference.neutralLabel) \(Hex.encode(SecretBytes.random(count: 4).copyBytes()))"
    }

    /// Checks that the default collection exists and is unlocked (unlocking it when that needs
    /// no prompt), so that a write into the `default` alias neither creates a collection nor
    /// sends a store to a locked one (each opens a dialog that can hang).
    /// - Throws: `secretServiceUnavailable` (no default collection), `keyringLocked`, and what
    ///   the calls throw.
    static func requireWritableDefaultCollection(
        _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) {
        try withWritableDefaultCollection(holding: "the store epoch", cancellable, operation: operation) { _ throws(TokenStoreError) in }
    }

    /// Runs `body` with the default collection once it is known to exist and to be unlocked (see
    /// ``requireWritableDefaultCollection(_:operation:)``); `holding` names what the keyring
    /// holds, for the `keyringLocked` text.
    private static func withWritableDefaultCollection(
        holding: String, _ cancellable: GLibCancellable, operation: String,
        _ body: (UnsafeMutablePointer<SecretCollection>) throws(TokenStoreError) -> Void
    ) throws(TokenStoreError) {
        try withService(cancellable, operation: operation) { service throws(TokenStoreError) in
            guard let collection = try defaultCollection(service, cancellable, operation: operation) else {
                throw noDefaultCollection(operation, cancellable)
            }
            defer { g_object_unref(collection) }
            if try isLocked(collection, of: service, cancellable, operation: operation),
                try !unlockWithoutPrompt(service, collection, cancellable, operation: operation)
            {
                throw TokenStoreError(
                    .keyringLocked, "The keyring holding \(holding) is locked (\(operation)).",
                    hint: TokenStoreError.unlockHint)
            }
            try body(collection)
        }
    }

    /// The message of an item whose secret could not be read or read back wrong.
    static let unreadableSecretMessage = "The key item has no readable secret"

    /// Unlocks the default collection when that needs no prompt; false otherwise.
    ///
    /// KWallet reports its collection locked to Secret Service clients until one of them
    /// calls `Unlock`, also when the wallet was opened at login (kwallet-pam); its unlock
    /// prompt then completes without showing anything. Only in that case — the daemon is
    /// kwalletd and says the wallet is open — is the unlock done; everywhere else it would be
    /// a dialog, which only ``SecretServiceKeyProvider/allowsUserInteraction`` permits.
    static func unlockWithoutPrompt(_ cancellable: GLibCancellable, operation: String) throws(TokenStoreError) -> Bool {
        try withService(cancellable, operation: operation) { service throws(TokenStoreError) in
            guard let collection = try defaultCollection(service, cancellable, operation: operation) else {
                return false
            }
            defer { g_object_unref(collection) }
            guard try isLocked(collection, of: service, cancellable, operation: operation) else { return true }
            return try unlockWithoutPrompt(service, collection, cancellable, operation: operation)
        }
    }

    private static func unlockWithoutPrompt(
        _ service: UnsafeMutablePointer<SecretService>, _ collection: UnsafeMutablePointer<SecretCollection>,
        _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) -> Bool {
        guard let identity = try KeyProviderIdentity.secretServiceNow(cancellable, operation: operation),
            identity.name == KeyProviderIdentity.kWallet, let generation = identity.version
        else { return false }
        guard let label = secret_collection_get_label(collection) else { return false }
        let wallet = String(cString: label)
        g_free(label)
        let connection = g_dbus_proxy_get_connection(
            UnsafeMutableRawPointer(service).assumingMemoryBound(to: GDBusProxy.self))!
        var children: [OpaquePointer?] = [g_variant_new_string(wallet)]
        let parameters = children.withUnsafeMutableBufferPointer { g_variant_new_tuple($0.baseAddress, 1) }
        var error: UnsafeMutablePointer<GError>?
        let reply = g_dbus_connection_call_sync(
            connection, "org.kde.kwalletd\(generation)", "/modules/kwalletd\(generation)", "org.kde.KWallet",
            "isOpen", parameters, nil, G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, cancellable.pointer, &error)
        if let error {
            g_error_free(error)
            return false
        }
        guard let reply else { return false }
        defer { g_variant_unref(reply) }
        guard g_variant_n_children(reply) == 1, let value = g_variant_get_child_value(reply, 0) else { return false }
        defer { g_variant_unref(value) }
        guard g_variant_classify(value) == G_VARIANT_CLASS_BOOLEAN, g_variant_get_boolean(value) != 0 else {
            return false
        }
        let objects = g_list_append(nil, UnsafeMutableRawPointer(collection))
        defer { g_list_free(objects) }
        var unlocked: UnsafeMutablePointer<GList>?
        let count = secret_service_unlock_sync(service, objects, cancellable.pointer, &unlocked, &error)
        if let unlocked { g_list_free_full(unlocked, g_object_unref) }
        if let error { throw GLibError.classify(error, operation: operation) }
        return count > 0
    }

    /// A new item (never `Replace`: see the type's comment) in `collection`.
    private static func create(
        _ key: SecretBytes, for reference: DataKeyReference, in collection: UnsafeMutablePointer<SecretCollection>,
        _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) {
        try withSchema { schema throws(TokenStoreError) in
            try withAttributes(reference) { attributes throws(TokenStoreError) in
                // secret_value_new copies the bytes into libsecret's own non-pageable memory.
                let value = key.withUnsafeBytes { bytes in
                    secret_value_new(
                        bytes.baseAddress?.assumingMemoryBound(to: gchar.self), gssize(bytes.count), contentType)
                }
                guard let value else {
                    throw TokenStoreError(.ioError, "libsecret could not hold the key (\(operation)).")
                }
                defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
                let provider = try KeyProviderIdentity.secretServiceNow(cancellable, operation: operation)
                let label = itemLabel(reference, onKWallet: provider?.name == KeyProviderIdentity.kWallet)
                var error: UnsafeMutablePointer<GError>?
                let item = secret_item_create_sync(
                    collection, schema, attributes, label, value, SECRET_ITEM_CREATE_NONE,
                    cancellable.pointer, &error)
                if let error {
                    if let item { g_object_unref(item) }
                    throw GLibError.classify(error, operation: operation)
                }
                guard let item else {
                    throw TokenStoreError(.ioError, "The Secret Service did not store the key (\(operation)).")
                }
                g_object_unref(item)
            }
        }
    }

    /// Every item of `reference`, in any collection, each a new reference (`g_object_unref`).
    private static func items(
        of reference: DataKeyReference, _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) -> [UnsafeMutablePointer<SecretItem>] {
        try withSchema { schema throws(TokenStoreError) in
            try withAttributes(reference) { attributes throws(TokenStoreError) in
                var error: UnsafeMutablePointer<GError>?
                let list = try withService(cancellable, operation: operation, needsSession: false) { service in
                    secret_service_search_sync(service, schema, attributes, SECRET_SEARCH_ALL, cancellable.pointer, &error)
                }
                if let error {
                    if let list { g_list_free_full(list, g_object_unref) }
                    throw GLibError.classify(error, operation: operation)
                }
                guard let list else { return [] }
                defer { g_list_free_full(list, g_object_unref) }
                var items: [UnsafeMutablePointer<SecretItem>] = []
                var node: UnsafeMutablePointer<GList>? = list
                while let current = node {
                    node = current.pointee.next
                    guard let object = current.pointee.data,
                        g_type_check_instance_is_a(object.assumingMemoryBound(to: GTypeInstance.self), secret_item_get_type()) != 0
                    else { continue }
                    g_object_ref(object)
                    items.append(object.assumingMemoryBound(to: SecretItem.self))
                }
                return items
            }
        }
    }

    /// Deletes `item`. KeePassXC answers every delete with a prompt, which deletes without a
    /// dialog when "confirm delete" is off; libsecret runs it. With confirmation on, the
    /// prompt waits for the user: bounded by the operation's time-out like every call.
    private static func deleteItem(
        _ item: UnsafeMutablePointer<SecretItem>, _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) {
        var error: UnsafeMutablePointer<GError>?
        _ = secret_item_delete_sync(item, cancellable.pointer, &error)
        if let error { throw GLibError.classify(error, operation: operation) }
    }

    /// `secretServiceUnavailable`: the service runs but has no default collection, and making
    /// one would ask the user (a dialog), so the store does not.
    static func noDefaultCollection(_ operation: String, _ cancellable: GLibCancellable) -> TokenStoreError {
        let name = (try? KeyProviderIdentity.secretServiceNow(cancellable, operation: operation))??.name
        let hint: String
        switch name {
        case KeyProviderIdentity.keePassXC?:
            hint = "Open a database in KeePassXC and expose a group of it (Database settings → Secret Service Integration)."
        case KeyProviderIdentity.kWallet?:
            hint = "Create a wallet in KWalletManager and make it the default wallet."
        case KeyProviderIdentity.gnomeKeyring?:
            hint = "Create a default keyring (Passwords and Keys, or log in to the desktop once)."
        default:
            hint = TokenStoreError.secretServiceHint
        }
        return TokenStoreError(
            .secretServiceUnavailable,
            "The Secret Service (\(name ?? "unknown")) has no default collection; TokenStore does not create one, "
                + "because that asks the user in a dialog (\(operation)).",
            hint: hint)
    }
}
