internal import CGIO
internal import CLibSecret

/// The libsecret calls behind ``SecretServiceKeyProvider``. Every function blocks, so each
/// runs on a ``GLibWorkerThread``; each frees every GLib object it makes before returning.
///
/// Only non-variadic libsecret entry points are used (`secret_schema_newv`,
/// `secret_password_*v_*_sync`), and the item attributes hold only `store-id` and `key-id`.
enum SecretServiceItems {
    static let schemaName = "dev.tokenstore.DataKey"
    static let storeIDAttribute = "store-id"
    static let keyIDAttribute = "key-id"
    /// `SECRET_COLLECTION_DEFAULT` (a C macro, not imported).
    static let defaultCollectionAlias = "default"
    static let contentType = "application/octet-stream"

    /// libsecret 0.20 registers its enum and flags GTypes without a once-guard. Two threads
    /// making a process's first libsecret calls at once can both register
    /// `SecretSchemaAttributeType`; the loser logs "cannot register existing type" and the type
    /// stays invalid for the whole process, so every later store fails ("did not store the
    /// key"; seen once in CI with tests opening stores in parallel). Registering them here,
    /// under Swift's thread-safe static initialization, before any libsecret call closes the
    /// race. The values are kept so that no call is optimized away (they are `G_GNUC_CONST`).
    static let registeredTypes: [GType] = [
        secret_schema_attribute_type_get_type(), secret_schema_flags_get_type(), secret_schema_type_get_type(),
        secret_service_flags_get_type(), secret_collection_flags_get_type(), secret_collection_create_flags_get_type(),
        secret_item_flags_get_type(), secret_item_create_flags_get_type(), secret_search_flags_get_type(),
        secret_backend_flags_get_type(), secret_error_get_type(),
    ]

    /// What a search without unlocking found for one reference.
    struct Found: Sendable {
        /// Items matching the reference in any collection, locked or not.
        var count = 0
        /// How many of them are locked.
        var locked = 0
        /// The secret of the single unlocked item, when secrets were asked for and exactly one
        /// item matched.
        var secret: SecretBytes?
        /// The object path of that single unlocked item (path-level search only, ``SecretServicePaths``).
        var unlockedPath: String?
    }

    // MARK: - Operations

    /// Searches every collection for items of `reference` without unlocking anything
    /// (no `SECRET_SEARCH_UNLOCK`, so no prompt), optionally loading the secret.
    /// - Throws: `ioError` (``unreadableSecretMessage``) when one unlocked item matched, its
    ///   secret was asked for and the service returned none.
    static func search(
        _ reference: DataKeyReference, loadSecret: Bool, in backend: any SecretServiceBackend, _ cancellable: GLibCancellable,
        operation: String
    ) throws(TokenStoreError) -> Found {
        try withSchema { schema throws(TokenStoreError) in
            try withAttributes(reference) { attributes throws(TokenStoreError) in
                let result = try backend.search(
                    schema, attributes, secrets: loadSecret ? .ifSingle : .none, cancellable, operation: operation)
                var found = Found(count: result.count, locked: result.lockedCount)
                if result.count == 1, let single = result.unlocked.first {
                    found.unlockedPath = single.path
                    if loadSecret {
                        guard let secret = single.secret else {
                            throw TokenStoreError(.ioError, "\(unreadableSecretMessage): an item without a secret (\(operation)).")
                        }
                        found.secret = secret
                    }
                }
                return found
            }
        }
    }

    /// Whether the collection behind the `default` alias is locked; `nil` when there is no
    /// default collection. Asks the service itself (`Properties.Get`) rather than trusting a
    /// cached proxy property. `unlockedItem`: the path of an item the same operation just found
    /// unlocked (``Found/unlockedPath``); when it lies in the default collection, that answers.
    static func defaultCollectionLocked(
        unlockedItem: String? = nil, in backend: any SecretServiceBackend, _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) -> Bool? {
        try backend.lockState(unlockedItem: unlockedItem, cancellable, operation: operation)
    }

    /// Whether `collection` is locked, as the service says now (`Properties.Get`).
    static func isLocked(
        _ collection: UnsafeMutablePointer<SecretCollection>, of service: UnsafeMutablePointer<SecretService>,
        _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) -> Bool {
        let path = String(cString: g_dbus_proxy_get_object_path(
            UnsafeMutableRawPointer(collection).assumingMemoryBound(to: GDBusProxy.self)))
        return try lockedProperty(service, path: path, cancellable, operation: operation)
    }

    /// The `Locked` property of the collection at `path`, asked of the service (`Properties.Get`).
    static func lockedProperty(
        _ service: UnsafeMutablePointer<SecretService>, path: String, _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) -> Bool {
        let proxy = UnsafeMutableRawPointer(service).assumingMemoryBound(to: GDBusProxy.self)
        var children: [OpaquePointer?] = [
            g_variant_new_string("org.freedesktop.Secret.Collection"),
            g_variant_new_string("Locked"),
        ]
        let parameters = children.withUnsafeMutableBufferPointer {
            g_variant_new_tuple($0.baseAddress, 2)
        }
        var error: UnsafeMutablePointer<GError>?
        let reply = g_dbus_connection_call_sync(
            g_dbus_proxy_get_connection(proxy), g_dbus_proxy_get_name(proxy), path,
            "org.freedesktop.DBus.Properties", "Get", parameters, nil,
            G_DBUS_CALL_FLAGS_NONE, -1, cancellable.pointer, &error)
        if let error { throw GLibError.classify(error, operation: operation) }
        guard let reply else {
            throw TokenStoreError(.ioError, "The Secret Service gave no lock state (\(operation)).")
        }
        defer { g_variant_unref(reply) }
        guard g_variant_n_children(reply) == 1 else { throw badLockReply(operation) }
        let boxed = g_variant_get_child_value(reply, 0)!
        defer { g_variant_unref(boxed) }
        guard g_variant_classify(boxed) == G_VARIANT_CLASS_VARIANT else { throw badLockReply(operation) }
        let value = g_variant_get_variant(boxed)!
        defer { g_variant_unref(value) }
        guard g_variant_classify(value) == G_VARIANT_CLASS_BOOLEAN else { throw badLockReply(operation) }
        return g_variant_get_boolean(value) != 0
    }

    /// Deletes the unlocked items of `reference`. Returns false when nothing was deleted,
    /// which libsecret also answers for items in a locked collection.
    static func clear(
        _ reference: DataKeyReference, _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) -> Bool {
        try withSchema { schema throws(TokenStoreError) in
            try withAttributes(reference) { attributes throws(TokenStoreError) in
                try withService(cancellable, operation: operation, needsSession: false) { service throws(TokenStoreError) in
                    var error: UnsafeMutablePointer<GError>?
                    let cleared = secret_service_clear_sync(service, schema, attributes, cancellable.pointer, &error)
                    if let error { throw GLibError.classify(error, operation: operation) }
                    return cleared != 0
                }
            }
        }
    }

    /// Asks the service to unlock the default collection; the service may show a prompt and
    /// this waits for it. Returns false when the prompt was dismissed or could not be shown.
    static func unlockDefaultCollection(
        _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) -> Bool {
        try withService(cancellable, operation: operation) { service throws(TokenStoreError) in
            guard let collection = try defaultCollection(service, cancellable, operation: operation) else {
                throw TokenStoreError(
                    .ioError, "The Secret Service has no default collection to unlock (\(operation)).",
                    hint: TokenStoreError.secretServiceHint)
            }
            defer { g_object_unref(collection) }
            let objects = g_list_append(nil, UnsafeMutableRawPointer(collection))
            defer { g_list_free(objects) }
            var unlocked: UnsafeMutablePointer<GList>?
            var error: UnsafeMutablePointer<GError>?
            let count = secret_service_unlock_sync(service, objects, cancellable.pointer, &unlocked, &error)
            if let unlocked { g_list_free_full(unlocked, g_object_unref) }
            if let error { throw GLibError.classify(error, operation: operation) }
            return count > 0
        }
    }

    /// Drops libsecret's cached default service proxy (safe at any time: holders of a
    /// reference keep theirs), so the next call connects to whatever daemon runs now.
    static func forgetCachedService() {
        secret_service_disconnect()
    }

    // MARK: - Pieces

    /// libsecret's cached service proxy, made (and the service started) once per process.
    /// `needsSession`: false for calls that move no secret (searches, lock state), which then
    /// need not wait for a warm-up's session (``SecretServiceWarmUp``), only for its proxy.
    static func withService<R>(
        _ cancellable: GLibCancellable, operation: String, needsSession: Bool = true,
        _ body: (UnsafeMutablePointer<SecretService>) throws(TokenStoreError) -> R
    ) throws(TokenStoreError) -> R {
        // The warm-up's proxy (and session), not a second one beside it.
        SecretServicePathBackend.shared.warmUp.waitWhileRunning(cancellable, needsSession: needsSession)
        var error: UnsafeMutablePointer<GError>?
        let service = secret_service_get_sync(SECRET_SERVICE_NONE, cancellable.pointer, &error)
        if let error {
            if let service { g_object_unref(service) }
            throw GLibError.classify(error, operation: operation)
        }
        guard let service else { throw GLibError.unavailable(operation, nil) }
        defer { g_object_unref(service) }
        return try body(service)
    }

    /// The collection the `default` alias points at (a new reference: `g_object_unref`), or nil.
    static func defaultCollection(
        _ service: UnsafeMutablePointer<SecretService>, _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) -> UnsafeMutablePointer<SecretCollection>? {
        var error: UnsafeMutablePointer<GError>?
        let collection = secret_collection_for_alias_sync(
            service, defaultCollectionAlias, SECRET_COLLECTION_NONE, cancellable.pointer, &error)
        if let error {
            if let collection { g_object_unref(collection) }
            throw GLibError.classify(error, operation: operation)
        }
        return collection
    }

    private static func badLockReply(_ operation: String) -> TokenStoreError {
        TokenStoreError(.ioError, "The Secret Service answered the lock state with an unexpected type (\(operation)).")
    }

    /// The schema: name `dev.tokenstore.DataKey`, two string attributes, flags NONE (so the
    /// `xdg:schema` attribute is matched too).
    static func withSchema<R>(
        _ body: (UnsafeMutablePointer<SecretSchema>) throws(TokenStoreError) -> R
    ) throws(TokenStoreError) -> R {
        try withSchema(named: schemaName, attributes: [storeIDAttribute, keyIDAttribute], body)
    }

    /// A schema of string `attributes`, flags NONE (its `xdg:schema` attribute is matched too,
    /// so items of one schema are never found by a search of another).
    static func withSchema<R>(
        named name: String, attributes names: [String],
        _ body: (UnsafeMutablePointer<SecretSchema>) throws(TokenStoreError) -> R
    ) throws(TokenStoreError) -> R {
        let types = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, nil)!
        defer { g_hash_table_unref(types) }
        // Values are SecretSchemaAttributeType as pointers; STRING is 0, a null pointer.
        let stringType = UnsafeMutableRawPointer(bitPattern: Int(SECRET_SCHEMA_ATTRIBUTE_STRING.rawValue))
        for attribute in names { g_hash_table_insert(types, g_strdup(attribute), stringType) }
        guard let schema = secret_schema_newv(name, SECRET_SCHEMA_NONE, types) else {
            throw TokenStoreError(.ioError, "libsecret could not make the item schema \(name).")
        }
        defer { secret_schema_unref(schema) }
        return try body(schema)
    }

    /// `store-id` and `key-id`, nothing else: Secret Service attributes are not encrypted.
    static func withAttributes<R>(
        _ reference: DataKeyReference, _ body: (OpaquePointer) throws(TokenStoreError) -> R
    ) throws(TokenStoreError) -> R {
        try withAttributes([storeIDAttribute: reference.storeID, keyIDAttribute: reference.keyID], body)
    }

    /// An attribute table for libsecret's `*v` calls.
    static func withAttributes<R>(
        _ values: [String: String], _ body: (OpaquePointer) throws(TokenStoreError) -> R
    ) throws(TokenStoreError) -> R {
        let attributes = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free)!
        defer { g_hash_table_unref(attributes) }
        for (name, value) in values { g_hash_table_insert(attributes, g_strdup(name), g_strdup(value)) }
        return try body(attributes)
    }

    /// Whether a search result is a locked `SecretItem`. Results of other backends (the
    /// file backend) have no lock of their own: they count as unlocked.
    static func isLocked(_ object: UnsafeMutableRawPointer) -> Bool {
        let instance = object.assumingMemoryBound(to: GTypeInstance.self)
        guard g_type_check_instance_is_a(instance, secret_item_get_type()) != 0 else { return false }
        return secret_item_get_locked(object.assumingMemoryBound(to: SecretItem.self)) != 0
    }

    /// The object path of a search result; nil for results of other backends (the file backend).
    static func path(of object: UnsafeMutableRawPointer) -> String? {
        let instance = object.assumingMemoryBound(to: GTypeInstance.self)
        guard g_type_check_instance_is_a(instance, g_dbus_proxy_get_type()) != 0,
            let path = g_dbus_proxy_get_object_path(object.assumingMemoryBound(to: GDBusProxy.self))
        else { return nil }
        return String(cString: path)
    }

    /// The secret of one unlocked search result, copied straight from libsecret's buffer
    /// into guarded memory; nil when libsecret has none for it.
    static func readableSecret(
        of object: UnsafeMutableRawPointer, _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) -> SecretBytes? {
        var value: OpaquePointer?
        let instance = object.assumingMemoryBound(to: GTypeInstance.self)
        if g_type_check_instance_is_a(instance, secret_item_get_type()) != 0 {
            value = secret_item_get_secret(object.assumingMemoryBound(to: SecretItem.self))
        }
        if value == nil {
            var error: UnsafeMutablePointer<GError>?
            value = secret_retrievable_retrieve_secret_sync(OpaquePointer(object), cancellable.pointer, &error)
            if let error {
                if let value { secret_value_unref(UnsafeMutableRawPointer(value)) }
                throw GLibError.classify(error, operation: operation)
            }
        }
        guard let value else { return nil }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        return bytes(of: value)
    }

    /// The bytes of a `SecretValue` (not released here), copied into guarded memory.
    static func bytes(of value: OpaquePointer) -> SecretBytes {
        var length: gsize = 0
        let bytes = secret_value_get(value, &length)
        return SecretBytes(count: Int(length)) { buffer in
            if let bytes, let target = buffer.baseAddress, length > 0 {
                target.copyMemory(from: bytes, byteCount: Int(length))
            }
        }
    }
}
