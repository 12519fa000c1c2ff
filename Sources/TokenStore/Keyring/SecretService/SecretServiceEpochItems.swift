internal import CGIO
internal import CLibSecret

/// The libsecret calls behind the store epoch of ``SecretServiceKeyProvider``.
///
/// The epoch is kept in items of a schema of its own, `dev.tokenstore.StoreEpoch`, in the
/// default collection, with three attributes: `epoch-store-id` (the store's random id; not
/// `store-id`, so that a search for a store's key items never finds them), `epoch` (the value,
/// decimal) and `write-id` (random, so that no write ever matches an existing item).
/// The secret is the value again, in decimal. An item is never replaced in place (KeePassXC
/// hangs replacing an item another process created): a raise stores a new item, then clears
/// the items of lower values. A reader takes the highest value it finds, so a crash between
/// the two steps leaves the new value in force.
enum SecretServiceEpochItems {
    static let schemaName = "dev.tokenstore.StoreEpoch"
    static let storeIDAttribute = "epoch-store-id"
    static let epochAttribute = "epoch"
    static let writeIDAttribute = "write-id"

    /// What a search for one store's epoch items found.
    struct Found: Sendable {
        /// Items of the store in any collection, locked or not.
        var count = 0
        /// How many of them are locked (their values are unknown).
        var locked = 0
        /// The values of the unlocked items.
        var values: [UInt64] = []
        /// The object paths of unlocked items the service gave no secret, or an empty one, for: a
        /// garbled transfer session, or, when a search on a new connection finds them
        /// again, items KWallet kept from a failed create, which hold nothing
        /// (``SecretServiceKeyProvider`` reads again, then passes over them).
        var unreadable: [String] = []
    }

    /// Every epoch item of `storeID`, secrets loaded, without unlocking anything.
    static func search(
        _ storeID: String, in backend: any SecretServiceBackend, _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) -> Found {
        try withSchema { schema throws(TokenStoreError) in
            try withAttributes([storeIDAttribute: storeID]) { attributes throws(TokenStoreError) in
                let result = try backend.search(schema, attributes, secrets: .all, cancellable, operation: operation)
                var found = Found(count: result.count, locked: result.lockedCount)
                for item in result.unlocked {
                    // KWallet answers with an empty secret for an item it kept from a failed create.
                    if let secret = item.secret, secret.count > 0 {
                        found.values.append(try value(of: secret, operation))
                    } else if let path = item.path {
                        found.unreadable.append(path)
                    } else {
                        throw TokenStoreError(.ioError, "\(SecretServiceItems.unreadableSecretMessage) (\(operation)).")
                    }
                }
                return found
            }
        }
    }

    /// The text of the error for an epoch item whose secret is not a number.
    static let notANumberMessage = "A store-epoch item of the keyring does not hold a number"

    /// The epoch an item's secret holds.
    /// - Throws: `integrityCheckFailed` when it is not a number.
    private static func value(of secret: SecretBytes, _ operation: String) throws(TokenStoreError) -> UInt64 {
        guard let value = parse(secret.copyBytes()) else {
            throw TokenStoreError(
                .integrityCheckFailed, "\(notANumberMessage) (\(operation)).",
                hint: "Delete the store's epoch items (secret-tool search --all xdg:schema \(schemaName)); "
                    + "the next open writes the epoch again.")
        }
        return value
    }

    /// Stores a new item holding `epoch` in the default collection (never matching an existing
    /// item). Its label is `label` and the write id: KWallet files items under their labels and
    /// reuses the place of one it kept without a secret for the next of the same label (see
    /// ``SecretServiceItems/itemLabel(_:onKWallet:)``).
    static func store(
        _ epoch: UInt64, storeID: String, label: String, _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) {
        try SecretServiceItems.requireWritableDefaultCollection(cancellable, operation: operation)
        let text = String(epoch)
        let writeID = Hex.encode(SecretBytes.random(count: 8).copyBytes())
        try withSchema { schema throws(TokenStoreError) in
            try withAttributes([storeIDAttribute: storeID, epochAttribute: text, writeIDAttribute: writeID]) {
                attributes throws(TokenStoreError) in
                let bytes = Array(text.utf8)
                let value = bytes.withUnsafeBytes { raw in
                    secret_value_new(
                        raw.baseAddress?.assumingMemoryBound(to: gchar.self), gssize(raw.count), "text/plain")
                }
                guard let value else {
                    throw TokenStoreError(.ioError, "libsecret could not hold the store epoch (\(operation)).")
                }
                defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
                try SecretServiceItems.withService(cancellable, operation: operation) { service throws(TokenStoreError) in
                    var error: UnsafeMutablePointer<GError>?
                    let stored = secret_service_store_sync(
                        service, schema, attributes, SecretServiceItems.defaultCollectionAlias, "\(label) \(writeID)", value,
                        cancellable.pointer, &error)
                    if let error { throw GLibError.classify(error, operation: operation) }
                    if stored == 0 {
                        throw TokenStoreError(.ioError, "The Secret Service did not store the store epoch (\(operation)).")
                    }
                }
            }
        }
    }

    /// Deletes the unlocked items of `storeID` holding `epoch` (every one when `epoch` is nil).
    static func clear(
        _ storeID: String, epoch: UInt64?, _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) {
        var match = [storeIDAttribute: storeID]
        if let epoch { match[epochAttribute] = String(epoch) }
        try withSchema { schema throws(TokenStoreError) in
            try withAttributes(match) { attributes throws(TokenStoreError) in
                try SecretServiceItems.withService(cancellable, operation: operation, needsSession: false) {
                    service throws(TokenStoreError) in
                    var error: UnsafeMutablePointer<GError>?
                    _ = secret_service_clear_sync(service, schema, attributes, cancellable.pointer, &error)
                    if let error { throw GLibError.classify(error, operation: operation) }
                }
            }
        }
    }

    /// A decimal epoch of at most 19 digits, nothing else.
    static func parse(_ bytes: [UInt8]) -> UInt64? {
        guard (1...19).contains(bytes.count), bytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return UInt64(String(decoding: bytes, as: UTF8.self))
    }

    // MARK: - Pieces

    /// The schema: three string attributes, flags NONE (so `xdg:schema` is matched too and no
    /// data-key item is ever found by an epoch search).
    private static func withSchema<R>(
        _ body: (UnsafeMutablePointer<SecretSchema>) throws(TokenStoreError) -> R
    ) throws(TokenStoreError) -> R {
        try SecretServiceItems.withSchema(
            named: schemaName, attributes: [storeIDAttribute, epochAttribute, writeIDAttribute], body)
    }

    private static func withAttributes<R>(
        _ values: [String: String], _ body: (OpaquePointer) throws(TokenStoreError) -> R
    ) throws(TokenStoreError) -> R {
        try SecretServiceItems.withAttributes(values, body)
    }
}
