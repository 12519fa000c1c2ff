import FoundationEssentials

/// What a keyed lookup hash names; each domain hashes different fields, so a hash of one
/// kind can never stand for another.
enum LookupDomain: UInt8 {
    /// An item: (service, account, kind) — `items.lookup`.
    case item = 1
    /// An account: (service, account) — `account_ref` of items, outbox entries and logout marks.
    case account = 2
    /// An Apple user id — `user_ref` of credential states and their history.
    case user = 3
    /// A cached access token: (service, account, audience, scope set) — `access_tokens.lookup`.
    case accessToken = 4
    /// A DPoP entry: (entry kind, its name) — `dpop_state.lookup` (``DPoPStateRecord``).
    case dpop = 5
    /// A server's discovery document: its configured issuer — `discovery.lookup` (``DiscoveryRecord``).
    case discovery = 6
    /// MAC of a `pending_revocations` row's clear columns (schedule, flag, attempts).
    case outboxRowMAC = 65
    /// MAC of an `account_marks` row (logging out, the entry that finishes it).
    case logoutMarkMAC = 66
    /// MAC of a `credential_history` row, chained to the previous row of the same user.
    case historyRowMAC = 67
    /// MAC of the store epoch in `store_info` (see ``StoreEpoch``).
    case storeEpochMAC = 68
    /// MAC of the key provider's kind in `store_info` (see ``KeyProviderRecord``).
    case keyProviderMAC = 69
    /// MAC of the access policy and the lock for every process in `store_info` (see ``AccessPolicyRecord``).
    case accessPolicyMAC = 70
    /// MAC of a `key_slots` row (see ``KeySlots``).
    case keySlotMAC = 71
    /// MAC of the set of `key_slots` rows (`key_slot_set`).
    case keySlotSetMAC = 72
    /// MAC of a proof of the user's presence shared by a login session's processes (see ``PresenceProofs``).
    case presenceProofMAC = 73
    /// MAC of a `rotation_slot_keys` row: a slot's new key pair during a rotation (``KeySlotRotation``).
    case rotationSlotKeyMAC = 74
    /// MAC of a `retired_slot_keys` row: a slot key to delete after a rotation (``KeySlotRotation``).
    case retiredSlotKeyMAC = 75
}

/// The store id and one data key: everything sealed, opened or hashed under that key.
///
/// Sealing binds each value to the store id, the key id, the record kind and the row's keyed
/// hash, so a blob copied to another row, table or store does not open.
struct Envelope: Sendable {
    let storeID: [UInt8]
    let key: DataKey

    var keyID: [UInt8] { key.keyID }

    /// The keyed BLAKE2b hash of `fields` in `domain`: the only form identifiers take in the clear.
    func lookup(_ domain: LookupDomain, _ fields: [[UInt8]]) -> [UInt8] {
        key.lookupHash(domain: domain.rawValue, fields)
    }

    /// The secret's fingerprint under this key's fingerprint subkey (see ``DataKey/fingerprint(_:)``).
    func fingerprint(_ secret: SecretBytes) -> String {
        key.fingerprint(secret)
    }

    /// A keyed MAC over `fields` in a MAC `domain`, under the data key's MAC subkey:
    /// authenticates columns kept in the clear. Callers start `fields` with the table's name
    /// and the row key.
    func mac(_ domain: LookupDomain, _ fields: [[UInt8]]) -> [UInt8] {
        key.macHash(domain: domain.rawValue, fields)
    }

    func itemLookup(_ item: ItemKey) -> [UInt8] {
        key.lookupHash(domain: LookupDomain.item.rawValue) {
            $0.field(item.account.service)
            $0.field(item.account.name)
            $0.field(byte: item.kind.code)
        }
    }

    func accountRef(_ account: AccountID) -> [UInt8] {
        key.lookupHash(domain: LookupDomain.account.rawValue) {
            $0.field(account.service)
            $0.field(account.name)
        }
    }

    func accessTokenLookup(_ token: AccessTokenKey) -> [UInt8] {
        key.lookupHash(domain: LookupDomain.accessToken.rawValue) {
            $0.field(token.account.service)
            $0.field(token.account.name)
            $0.field(token.audience ?? "")
            $0.field(byte: token.audience == nil ? 0 : 1)
            $0.field(token.scopeSet)
        }
    }

    func userRef(_ userID: String) -> [UInt8] {
        key.lookupHash(domain: LookupDomain.user.rawValue) { $0.field(userID) }
    }

    func seal(_ fields: RecordFields, kind: RecordKind, rowKey: [UInt8]) -> [UInt8] {
        fields.encode().withUnsafeBytes { Sealer.seal($0, key: key, binding: binding(kind, rowKey: rowKey)) }
    }

    /// Opens a sealed column of a row whose key id is `keyID`: it must be this envelope's key.
    /// - Throws: `integrityCheckFailed` (another key, altered, moved, or an invalid layout).
    func open(_ blob: [UInt8], keyID: [UInt8], kind: RecordKind, rowKey: [UInt8]) throws -> RecordFields {
        let plaintext = try blob.withUnsafeBytes { blob in
            try keyID.withUnsafeBytes { keyID in try openPlaintext(blob, keyID: keyID, kind: kind, rowKey: rowKey) }
        }
        return try RecordFields.decode(plaintext)
    }

    /// ``open(_:keyID:kind:rowKey:)`` of a row's `sealed` and `keyID` columns, read where SQLite
    /// holds them (no copy of the sealed bytes).
    func open(_ row: Row, sealed: Int32, keyID: Int32, kind: RecordKind, rowKey: [UInt8]) throws -> RecordFields {
        try RecordFields.decode(try openPlaintext(row, sealed: sealed, keyID: keyID, kind: kind, rowKey: rowKey))
    }

    /// ``open(_:sealed:keyID:kind:rowKey:)`` to the decrypted record, undecoded
    /// (``RecordFields/forEachField(in:_:)`` walks it).
    func openPlaintext(_ row: Row, sealed: Int32, keyID: Int32, kind: RecordKind, rowKey: [UInt8]) throws -> SecretBytes {
        try row.withBlob(sealed) { sealed in
            try row.withBlob(keyID) { keyID in try openPlaintext(sealed, keyID: keyID, kind: kind, rowKey: rowKey) }
        }
    }

    /// ``open(_:keyID:kind:rowKey:)`` of lent bytes, to the decrypted record, undecoded.
    /// - Throws: `integrityCheckFailed` (another key, altered or moved).
    private func openPlaintext(_ blob: UnsafeRawBufferPointer, keyID: UnsafeRawBufferPointer, kind: RecordKind, rowKey: [UInt8]) throws -> SecretBytes {
        guard key.keyID.withUnsafeBytes({ $0.elementsEqual(keyID) }) else {
            throw TokenStoreError(.integrityCheckFailed, "A sealed \(kind) record names a data key this store does not use.")
        }
        return try Sealer.open(blob, key: key, binding: binding(kind, rowKey: rowKey))
    }

    private func binding(_ kind: RecordKind, rowKey: [UInt8]) -> Sealer.Binding {
        Sealer.Binding(storeID: storeID, keyID: key.keyID, kind: kind, rowKey: rowKey)
    }
}
