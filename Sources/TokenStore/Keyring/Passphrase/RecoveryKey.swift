import FoundationEssentials

/// A recovery key: 256 random bits, shown once as text a person can copy onto paper and type
/// back: modhex (the 16 letters `cbdefghijklnrtuv`, which read the same on every keyboard
/// layout, as `systemd-cryptenroll --recovery-key` uses), in dash-separated groups of eight,
/// the 32 key bytes followed by a 4-byte BLAKE2b checksum of them, so a mistyped key is told
/// apart from a wrong one before any work.
///
/// ```swift
/// let (slot, recoveryKey) = try store.addRecoveryKeySlot()
/// print(recoveryKey.text)  // once; never stored
/// ```
public struct RecoveryKey: Sendable {
    /// The 32 key bytes, in guarded memory.
    public let bytes: SecretBytes

    static let alphabet = Array("cbdefghijklnrtuv".utf8)
    static let keyCount = 32
    static let checksumCount = 4

    /// A new random recovery key.
    public static func generate() -> RecoveryKey { RecoveryKey(bytes: SecretBytes.random(count: keyCount)) }

    init(bytes: SecretBytes) { self.bytes = bytes }

    /// Reads a recovery key typed back: case, spaces, dashes and line breaks are ignored.
    /// - Throws: `invalidInput` when it is not 72 modhex letters whose checksum matches (mistyped).
    public init(text: SecretBytes) throws {
        let letters = text.withUnsafeBytes { raw in
            raw.compactMap { byte -> UInt8? in
                let lower = (byte >= 0x41 && byte <= 0x5a) ? byte + 0x20 : byte
                return lower == UInt8(ascii: "-") || lower == 0x20 || lower == 0x0a || lower == 0x0d || lower == 0x09 ? nil : lower
            }
        }
        let count = (Self.keyCount + Self.checksumCount) * 2
        var decoded = [UInt8]()
        decoded.reserveCapacity(count / 2)
        var valid = letters.count == count
        if valid {
            for index in stride(from: 0, to: count, by: 2) {
                guard let high = Self.alphabet.firstIndex(of: letters[index]), let low = Self.alphabet.firstIndex(of: letters[index + 1]) else {
                    valid = false
                    break
                }
                decoded.append(UInt8(high << 4 | low))
            }
        }
        defer { for index in decoded.indices { decoded[index] = 0 } }
        guard valid, ConstantTime.equal(Self.checksum(Array(decoded[0..<Self.keyCount])), Array(decoded[Self.keyCount...])) else {
            throw TokenStoreError(
                .invalidInput, "That is not a recovery key as it was shown (72 letters of cbdefghijklnrtuv in groups); it may be mistyped.",
                hint: "Type it again as printed; dashes, spaces and case do not matter.")
        }
        bytes = SecretBytes(Array(decoded[0..<Self.keyCount]))
    }

    /// The text shown once: nine dash-separated groups of eight modhex letters.
    public var text: SecretBytes {
        var all = bytes.copyBytes()
        all += Self.checksum(all)
        var out: [UInt8] = []
        for (index, byte) in all.enumerated() {
            if index > 0, index % 4 == 0 { out.append(UInt8(ascii: "-")) }
            out.append(Self.alphabet[Int(byte >> 4)])
            out.append(Self.alphabet[Int(byte & 0x0f)])
        }
        defer {
            for index in all.indices { all[index] = 0 }
            for index in out.indices { out[index] = 0 }
        }
        return SecretBytes(out)
    }

    static func checksum(_ key: [UInt8]) -> [UInt8] {
        Blake2b.digest(Array("tokenstore/recovery-key/v1".utf8) + key, length: 16).prefix(checksumCount).map { $0 }
    }
}

/// Opens a store with its recovery key slot: the data key wrapped in the store's own
/// `key_slots` table under a key stretched from the recovery key with Argon2id (libsodium
/// `crypto_pwhash`, the wrapped-key format of ``PassphraseKeyProvider``).
///
/// It keeps nothing outside the database: it holds no store epoch (0; a file opened with it is
/// checked against no outside copy), and ``storeKey(_:for:)`` and ``loadKey(_:)`` are not its way
/// in (`invalidInput`): the store's open unwraps the slot's blob.
///
/// ```swift
/// let provider = RecoveryKeyProvider(recoveryKey: try RecoveryKey(text: typed))
/// let store = try TokenStore(path: path, appID: "com.example.app", keyProvider: provider)
/// try store.addKeySlot(SecretServiceKeyProvider())  // the keyring opens it again
/// ```
public struct RecoveryKeyProvider: KeyProvider, InStoreKeySlotProvider {
    public var name: String { KeyProviderKind.recovery.rawValue }
    let recoveryKey: RecoveryKey
    var slotNoun: String { "a recovery key slot" }
    /// The Argon2id cost of a key wrapped with it (an existing slot opens with the cost it records).
    public let limits: PassphraseKeyProvider.Limits

    public init(recoveryKey: RecoveryKey, limits: PassphraseKeyProvider.Limits = .moderate) {
        self.recoveryKey = recoveryKey
        self.limits = limits
    }

    /// The data key wrapped for a `key_slots` row.
    func wrap(_ key: SecretBytes, reference: DataKeyReference) throws -> [UInt8] {
        try WrappedKeyFile.wrap(key, passphrase: recoveryKey.bytes, limits: limits, reference: reference)
    }

    /// The data key out of a `key_slots` row's blob.
    /// - Throws: `wrongPassphrase` (another recovery key), `integrityCheckFailed` (the blob is damaged).
    func unwrap(_ blob: [UInt8], reference: DataKeyReference) throws -> SecretBytes {
        do {
            return try WrappedKeyFile.unwrap(blob, passphrase: recoveryKey.bytes, reference: reference)
        } catch let error as TokenStoreError where error.code == .wrongPassphrase {
            throw TokenStoreError(
                .wrongPassphrase, "The recovery key does not open this store's recovery slot.",
                hint: "Check that it is this store's recovery key.")
        }
    }

    public func loadKey(_ reference: DataKeyReference) throws -> SecretBytes? {
        throw TokenStoreError(.invalidInput, "A recovery key opens a store through its key slot, not by reference.")
    }

    public func storeKey(_ key: SecretBytes, for reference: DataKeyReference) throws {
        throw TokenStoreError(
            .invalidInput, "A recovery key does not make a store: add it to an open store (addRecoveryKeySlot).")
    }

    /// Nothing to delete outside the database.
    public func deleteKey(_ reference: DataKeyReference) throws {}

    public func availability(of reference: DataKeyReference) throws -> DataKeyAvailability { .present }

    public func storeEpoch(storeID: String) throws -> UInt64 { 0 }

    public func raiseStoreEpoch(storeID: String, appID: String, to epoch: UInt64) throws {}

    public func deleteStoreEpoch(storeID: String) throws {}
}
