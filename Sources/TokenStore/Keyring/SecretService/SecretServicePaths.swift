internal import CGIO
internal import CLibSecret
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Searches and reads of the Secret Service through libsecret's path-level calls
/// (`secret-paths.h`), for ``SecretServiceItems`` and ``SecretServiceEpochItems``.
///
/// `secret_password_searchv_sync` makes a proxy object for every item it finds (a `GetAll`, and
/// for the first a `StartServiceByName` and `GetNameOwner`, each a D-Bus round trip) only to read
/// its `Locked` property, and runs on libsecret's backend, a second service proxy beside the one
/// `secret_service_get` keeps. Here one `SearchItems` answers which items match and which of them
/// are locked, one `GetSecrets` brings the secrets of the unlocked ones, and every call goes
/// through the one cached service proxy (`secret_service_get`), as `secret-tool lookup` does.
///
/// Used everywhere, a Flatpak or Snap sandbox included: the provider's writes go to the D-Bus
/// service, so its reads must too (libsecret's `secret_password_*` calls would use its file
/// backend there).
enum SecretServicePaths {
    /// What one search found: the object paths of the matching items, unlocked and locked.
    struct Found {
        var unlocked: [String] = []
        var locked: [String] = []
        var count: Int { unlocked.count + locked.count }
    }

    /// The items matching `attributes` under `schema` (its name matched as `xdg:schema`, as
    /// `secret_password_searchv_sync` does) in every collection; unlocks nothing (no prompt).
    static func search(
        _ schema: UnsafeMutablePointer<SecretSchema>, _ attributes: OpaquePointer, _ cancellable: GLibCancellable,
        operation: String
    ) throws(TokenStoreError) -> Found {
        try withService(cancellable, operation: operation, needsSession: false) { service throws(TokenStoreError) in
            var unlocked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
            var locked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
            var error: UnsafeMutablePointer<GError>?
            let ok = secret_service_search_for_dbus_paths_sync(
                service, schema, attributes, cancellable.pointer, &unlocked, &locked, &error)
            defer {
                g_strfreev(unlocked)
                g_strfreev(locked)
            }
            if let error { throw GLibError.classify(error, operation: operation) }
            guard ok != 0 else { throw TokenStoreError(.ioError, "The Secret Service search failed (\(operation)).") }
            return Found(unlocked: strings(unlocked), locked: strings(locked))
        }
    }

    /// The secrets of the unlocked items at `paths`, in the order of `paths` (one `GetSecrets`),
    /// copied straight from libsecret's buffers into guarded memory.
    /// - Throws: `ioError` when the service returns no secret for one of them.
    static func secrets(
        of paths: [String], _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) -> [SecretBytes] {
        var secrets: [SecretBytes] = []
        for secret in try readableSecrets(of: paths, cancellable, operation: operation) {
            guard let secret else {
                throw TokenStoreError(.ioError, "\(SecretServiceItems.unreadableSecretMessage): an item without a secret (\(operation)).")
            }
            secrets.append(secret)
        }
        return secrets
    }

    /// The secrets of the unlocked items at `paths`, in the order of `paths` (one `GetSecrets`);
    /// nil for an item the service returned no secret for.
    /// - Throws: `ioError` when the service returns no secrets at all.
    static func readableSecrets(
        of paths: [String], _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) -> [SecretBytes?] {
        guard !paths.isEmpty else { return [] }
        return try withService(cancellable, operation: operation) { service throws(TokenStoreError) in
            let copies = paths.map { strdup($0) }
            defer { for copy in copies { free(copy) } }
            var list: [UnsafePointer<gchar>?] = copies.map { UnsafePointer($0) } + [nil]
            var error: UnsafeMutablePointer<GError>?
            let table = list.withUnsafeMutableBufferPointer { buffer in
                secret_service_get_secrets_for_dbus_paths_sync(service, buffer.baseAddress, cancellable.pointer, &error)
            }
            if let error {
                if let table { g_hash_table_unref(table) }
                throw GLibError.classify(error, operation: operation)
            }
            guard let table else {
                // A transfer session gone wrong (seen with KWallet): retried on a new connection
                // (SecretServiceKeyProvider.isSessionFailure).
                throw TokenStoreError(.ioError, "\(SecretServiceItems.unreadableSecretMessage): no secrets returned (\(operation)).")
            }
            defer { g_hash_table_unref(table) }
            return paths.map { path -> SecretBytes? in
                guard let value = path.withCString({ g_hash_table_lookup(table, $0) }) else { return nil }
                return SecretServiceItems.bytes(of: OpaquePointer(value))
            }
        }
    }

    /// Deletes the item at `path` (no prompt is expected: only items found unlocked are passed).
    static func delete(_ path: String, _ cancellable: GLibCancellable, operation: String) throws(TokenStoreError) {
        try withService(cancellable, operation: operation, needsSession: false) { service throws(TokenStoreError) in
            var error: UnsafeMutablePointer<GError>?
            _ = secret_service_delete_item_dbus_path_sync(service, path, cancellable.pointer, &error)
            if let error { throw GLibError.classify(error, operation: operation) }
        }
    }

    /// Whether the collection behind the `default` alias is locked; `nil` when there is no
    /// default collection. `unlockedItem`: the path of an item the same operation just found
    /// unlocked; when it lies in the default collection, that collection is unlocked without
    /// asking again. Else asks the service itself (`Properties.Get`), not a cached property.
    static func defaultCollectionLocked(
        unlockedItem: String? = nil, _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) -> Bool? {
        try withService(cancellable, operation: operation, needsSession: false) { service throws(TokenStoreError) -> Bool? in
            var error: UnsafeMutablePointer<GError>?
            let alias = secret_service_read_alias_dbus_path_sync(
                service, SecretServiceItems.defaultCollectionAlias, cancellable.pointer, &error)
            if let error {
                g_free(alias)
                throw GLibError.classify(error, operation: operation)
            }
            guard let alias else { return nil }
            let path = String(cString: alias)
            g_free(alias)
            if let unlockedItem, unlockedItem.hasPrefix(path + "/") { return false }
            return try SecretServiceItems.lockedProperty(service, path: path, cancellable, operation: operation)
        }
    }

    // MARK: - Pieces

    /// libsecret's cached service proxy
    /// (``SecretServiceItems/withService(_:operation:needsSession:_:)``).
    static func withService<R>(
        _ cancellable: GLibCancellable, operation: String, needsSession: Bool = true,
        _ body: (UnsafeMutablePointer<SecretService>) throws(TokenStoreError) -> R
    ) throws(TokenStoreError) -> R {
        try SecretServiceItems.withService(cancellable, operation: operation, needsSession: needsSession, body)
    }

    private static func strings(_ list: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?) -> [String] {
        guard let list else { return [] }
        var result: [String] = []
        var index = 0
        while let entry = list[index] {
            result.append(String(cString: entry))
            index += 1
        }
        return result
    }
}
