internal import CSodium

/// How the keys a store works with are made from its data key (`data_keys.scheme`).
package enum KeyScheme: Int64, Sendable, Comparable {
    /// Before schema version 8: the data key itself seals (XChaCha20-Poly1305) and is also the
    /// master key the lookup subkey is derived from. Still opened; a store using it is
    /// re-sealed under a new key of the current scheme at its next open.
    case legacy = 1
    /// The data key is only a master key: sealing, lookups, fingerprints and MACs each use
    /// their own subkey (`crypto_kdf_derive_from_key`, BLAKE2b), so no two uses share a key.
    case derived = 2

    /// The scheme new keys get.
    package static let current = KeyScheme.derived

    package static func < (lhs: KeyScheme, rhs: KeyScheme) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// The store's 256-bit data key and the subkeys derived from it, in guarded memory.
///
/// Subkeys (`crypto_kdf_derive_from_key`, subkey id 1, one 8-byte context per use):
/// - sealing (`tsseal01`): XChaCha20-Poly1305 of every sealed value; in the ``KeyScheme/legacy``
///   scheme the data key itself;
/// - lookups (`tslookup`): the keyed hashes that replace identifiers in the database;
/// - fingerprints (`tsfinger`): the short fingerprints `list`/`get` print, so they cannot be
///   brute-forced back to a short secret without the key;
/// - MACs (`tsmac001`): authentication of columns outside the seal.
package final class DataKey: Sendable {
    static let byteCount = 32

    let keyID: [UInt8]
    let scheme: KeyScheme
    /// The data key itself: what the key provider keeps. Never used directly to seal (except
    /// in the legacy scheme).
    let material: SecretBytes
    /// The key every value is sealed under.
    let sealingKey: SecretBytes
    private let lookupKey: SecretBytes
    private let fingerprintKey: SecretBytes
    private let macKey: SecretBytes

    package init(keyID: [UInt8], material: SecretBytes, scheme: KeyScheme = .current) throws {
        guard material.count == Self.byteCount else {
            throw TokenStoreError(
                .dataKeyCorrupt, "The data key from the key provider has the wrong length (\(material.count) bytes).")
        }
        self.keyID = keyID
        self.scheme = scheme
        self.material = material
        lookupKey = Self.subkey(of: material, context: "tslookup")
        fingerprintKey = Self.subkey(of: material, context: "tsfinger")
        macKey = Self.subkey(of: material, context: "tsmac001")
        switch scheme {
        case .legacy: sealingKey = material
        case .derived: sealingKey = Self.subkey(of: material, context: "tsseal01")
        }
    }

    private static func subkey(of master: SecretBytes, context: StaticString) -> SecretBytes {
        precondition(context.utf8CodeUnitCount == Int(crypto_kdf_CONTEXTBYTES), "a KDF context is 8 bytes")
        return SecretBytes(count: 32) { out in
            master.withUnsafeBytes { key in
                context.withUTF8Buffer { ctx in
                    ctx.withMemoryRebound(to: CChar.self) { ctx in
                        let rc = crypto_kdf_derive_from_key(
                            out.baseAddress!.assumingMemoryBound(to: UInt8.self), 32, 1, ctx.baseAddress!,
                            key.baseAddress!.assumingMemoryBound(to: UInt8.self))
                        precondition(rc == 0, "crypto_kdf_derive_from_key failed with valid parameters")
                    }
                }
            }
        }
    }

    /// A new random key of `scheme`.
    static func generate(scheme: KeyScheme = .current) throws -> DataKey {
        try DataKey(keyID: Array(SecretBytes.random(count: 16).copyBytes()), material: .random(count: byteCount), scheme: scheme)
    }

    /// Keyed BLAKE2b over length-prefixed fields, with a one-byte domain tag.
    func lookupHash(domain: UInt8, _ fields: [[UInt8]]) -> [UInt8] {
        lookupHash(domain: domain) { for field in fields { $0.field(field) } }
    }

    /// ``lookupHash(domain:_:)`` with the fields fed by `feed` (strings without a copy).
    func lookupHash(domain: UInt8, _ feed: (inout Blake2b.Fields) -> Void) -> [UInt8] {
        lookupKey.withUnsafeBytes { Blake2b.fields(key: $0, domain: domain, feed) }
    }

    /// Keyed BLAKE2b under the MAC subkey, same message layout as ``lookupHash(domain:_:)``:
    /// authenticates values kept outside the seal.
    func macHash(domain: UInt8, _ fields: [[UInt8]]) -> [UInt8] {
        macKey.withUnsafeBytes { key in Blake2b.fields(key: key, domain: domain) { for field in fields { $0.field(field) } } }
    }

    /// The secret's fingerprint under this store's fingerprint subkey (4 bytes, hex): stable
    /// for one store, different in another, and useless for guessing without the key.
    func fingerprint(_ secret: SecretBytes) -> String {
        let digest = fingerprintKey.withUnsafeBytes { key in
            secret.withUnsafeBytes { Blake2b.digest($0, key: key, length: 4) }
        }
        return Hex.encode(digest)
    }
}
