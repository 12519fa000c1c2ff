internal import CSodium
import FoundationEssentials

/// Keeps data keys in files beside the store, each wrapped under a key derived from the
/// app's own secret that the XDG desktop portal hands out (`org.freedesktop.portal.Secret`):
/// the key provider of a Flatpak app that may not talk to the session's Secret Service. It
/// is libsecret's own design inside a sandbox (its file backend), so it protects the keys
/// as the platform does, not less.
///
/// Chosen automatically (``KeyProviderSelection/automatic(storePath:probeTimeout:)``, the store's default)
/// only when the process runs in a sandbox (`/.flatpak-info` exists) and no Secret Service
/// answers; anywhere else only when the app passes it explicitly:
///
/// ```swift
/// let store = try TokenStore(path: path, appID: "com.example.app",
///                            keyProvider: PortalKeyProvider(storePath: path))
/// ```
///
/// The portal gives each sandboxed app id its own secret (64 random bytes that gnome-keyring
/// keeps in the user's login keyring), so a store made by one app cannot be opened by another;
/// outside a sandbox every host app gets the same secret. The secret is asked for once per
/// provider, condensed at once with BLAKE2b into a 32-byte master key (kept in guarded
/// memory) and wiped; each file's wrapping key is derived from the master key with
/// BLAKE2b-KDF (libsodium `crypto_kdf_derive_from_key`, context `TSportal`) under a random
/// subkey id stored in the file.
///
/// Each key is one file, `tokenstore-<store-id>-<key-id>.portal-key` (mode 0600, opened with
/// `O_NOFOLLOW`, replaced atomically: a new file, then rename) in ``directory``, by default the
/// store's directory. A deleted key's file is overwritten with zeros before it is unlinked.
/// The file names and holds nothing but random ids, the wrapped key and its parameters.
///
/// Errors when loading:
/// - the portal refuses or is absent: `secretServiceUnavailable` with a hint naming the portal;
///   it does not answer in time: `timedOut`.
/// - the file's checksum or layout is wrong: `integrityCheckFailed`.
/// - the file is intact but the app's secret does not open it (the store was made by another
///   app id, or the app's portal secret was reset): `wrongPassphrase`; nothing is changed.
public struct PortalKeyProvider: KeyProvider {
    public var name: String { KeyProviderKind.portal.rawValue }
    /// The directory holding the wrapped-key files.
    public let directory: String
    /// The directory holding the store-epoch files: by default the passphrase provider's
    /// ``PassphraseKeyProvider/defaultDirectory(environment:)`` (`$XDG_STATE_HOME/tokenstore/keys`),
    /// not the store's directory, so a restored copy of that folder does not bring its epoch back too.
    public let epochDirectory: String
    /// The time bound of one portal call.
    public let timeout: Duration
    private let master: MasterKey

    /// A provider keeping its key files in `directory` (made with mode 0700 if missing) and its
    /// store epochs in `epochDirectory`.
    public init(directory: String, epochDirectory: String? = nil, timeout: Duration = .seconds(10)) {
        self.directory = directory
        self.epochDirectory = epochDirectory ?? PassphraseKeyProvider.defaultDirectory()
        self.timeout = timeout
        self.master = MasterKey()
    }

    /// A provider for the database at `storePath`, keeping its key files beside it.
    public init(storePath: String, timeout: Duration = .seconds(10)) {
        self.init(directory: Self.directory(of: storePath), timeout: timeout)
    }

    /// The store's epoch from its file in ``epochDirectory``; 0 when there is none.
    public func storeEpoch(storeID: String) throws -> UInt64 {
        try StoreEpochFiles(directory: epochDirectory).epoch(storeID: storeID)
    }

    /// Raises the store's epoch in ``epochDirectory`` (a new file renamed over the old one).
    public func raiseStoreEpoch(storeID: String, appID: String, to epoch: UInt64) throws {
        try StoreEpochFiles(directory: epochDirectory).raise(storeID: storeID, to: epoch)
    }

    /// Deletes the store's epoch file. Succeeds when there is none.
    public func deleteStoreEpoch(storeID: String) throws {
        try StoreEpochFiles(directory: epochDirectory).delete(storeID: storeID)
    }

    /// The directory part of `path` (`.` when it has none).
    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// The path of the file holding `reference`'s key.
    /// - Throws: `invalidInput` when the ids are not hex.
    public func filePath(for reference: DataKeyReference) throws -> String {
        try KeyFiles.checkHex(reference)
        return "\(directory)/tokenstore-\(reference.storeID)-\(reference.keyID).portal-key"
    }

    /// Reads and unwraps a key (asking the portal for the app's secret the first time).
    /// - Returns: the key, or `nil` when there is no file for it (the portal is not asked).
    /// - Throws: `wrongPassphrase`, `integrityCheckFailed`, `unsafeFileLayout`, `ioError`,
    ///   `secretServiceUnavailable`, `timedOut`.
    public func loadKey(_ reference: DataKeyReference) throws -> SecretBytes? {
        guard let bytes = try KeyFiles.read(try filePath(for: reference)) else { return nil }
        return try PortalKeyFile.unwrap(bytes, master: try master.value(timeout: timeout), reference: reference)
    }

    /// Wraps and stores a key, replacing the file of the same reference atomically.
    /// - Throws: `invalidInput` (not 32 bytes), `unsafeFileLayout`, `ioError`,
    ///   `secretServiceUnavailable`, `timedOut`.
    public func storeKey(_ key: SecretBytes, for reference: DataKeyReference) throws {
        let path = try filePath(for: reference)
        let bytes = try PortalKeyFile.wrap(key, master: try master.value(timeout: timeout), reference: reference)
        try KeyFiles.write(bytes, to: path, directory: directory)
    }

    /// Deletes a key's file (erased, then unlinked). Succeeds when it is already gone.
    /// - Warning: every row sealed under this key becomes unreadable.
    public func deleteKey(_ reference: DataKeyReference) throws {
        try KeyFiles.delete(try filePath(for: reference))
    }

    /// `present` when the key's file exists (the portal is not asked), else `missing`.
    public func availability(of reference: DataKeyReference) throws -> DataKeyAvailability {
        try KeyFiles.exists(try filePath(for: reference)) ? .present : .missing
    }

    /// The master key, asked from the portal once per provider (and its copies).
    final class MasterKey: Sendable {
        private let cached = Locked<SecretBytes?>(nil)

        func value(timeout: Duration) throws(TokenStoreError) -> SecretBytes {
            if let key = cached.withLock({ $0 }) { return key }
            let key = try PortalSecret.masterKey(timeout: timeout)
            return cached.withLock { current in
                if let current { return current }
                current = key
                return key
            }
        }
    }
}

/// The portal wrapped-key file, version 1 (118 bytes):
///
/// `"TSPT" ‖ version u8 ‖ kdf u8 (1: BLAKE2b-KDF) ‖ subkey id u64le ‖ nonce (24)` (the header,
/// 38 bytes) `‖ wrapped key (32 + 16) ‖ checksum (32)`.
///
/// The wrapping key is `crypto_kdf_derive_from_key(32, subkey id, "TSportal", master)`; the
/// key is sealed with XChaCha20-Poly1305, the header and the reference's ids as associated
/// data (a file copied under another name does not open). The checksum is unkeyed BLAKE2b
/// over everything before it, so damage is told apart from a secret that does not fit.
enum PortalKeyFile {
    static let magic = Array("TSPT".utf8)
    static let version: UInt8 = 1
    static let kdfBlake2b: UInt8 = 1
    static let headerCount = 38
    static let wrappedCount = WrappedKey.sealedCount
    static let totalCount = headerCount + wrappedCount + 32

    static func wrap(_ key: SecretBytes, master: SecretBytes, reference: DataKeyReference) throws -> [UInt8] {
        var header = magic + [version, kdfBlake2b]
        header += SecretBytes.random(count: 8).copyBytes()
        header += SecretBytes.random(count: 24).copyBytes()
        let kek = try wrappingKey(master, header: header)
        let wrapped = try kek.withUnsafeBytes { kek in
            try WrappedKey.seal(key, kek: kek, associatedData: header + binding(reference), nonce: Array(header[14..<38]))
        }
        return WrappedKey.checksummed(header + wrapped)
    }

    static func unwrap(_ bytes: [UInt8], master: SecretBytes, reference: DataKeyReference) throws -> SecretBytes {
        func altered(_ why: String) -> TokenStoreError {
            TokenStoreError(
                .integrityCheckFailed, "The portal wrapped-key file was altered or damaged (\(why)).",
                hint: "Restore the file from a backup, or reset the store explicitly (resetStore).")
        }
        let (body, failure) = WrappedKey.body(of: bytes, count: totalCount)
        if let failure { throw altered(failure) }
        let header = Array(body[0..<headerCount])
        guard Array(header[0..<4]) == magic else { throw altered("not a portal wrapped-key file") }
        guard header[4] == version else { throw altered("unknown version") }
        guard header[5] == kdfBlake2b else { throw altered("unknown key derivation") }
        let kek = try wrappingKey(master, header: header)
        let wrapped = Array(body[headerCount..<(headerCount + wrappedCount)])
        let key = kek.withUnsafeBytes { kek in
            WrappedKey.open(wrapped, kek: kek, associatedData: header + binding(reference), nonce: Array(header[14..<38]))
        }
        guard let key else {
            throw TokenStoreError(
                .wrongPassphrase,
                "This app's portal secret does not open the wrapped data key: the store was made by another app, "
                    + "or the app's secret in the portal was reset.",
                hint: "Open the store from the app (Flatpak app id) that created it; nothing was changed.")
        }
        return key
    }

    /// `crypto_kdf_derive_from_key` under the file's subkey id.
    private static func wrappingKey(_ master: SecretBytes, header: [UInt8]) throws -> SecretBytes {
        let subkeyID = (0..<8).reduce(UInt64(0)) { $0 | UInt64(header[6 + $1]) << (8 * UInt64($1)) }
        var rc: Int32 = -1
        let kek = SecretBytes(count: 32) { out in
            master.withUnsafeBytes { master in
                rc = crypto_kdf_derive_from_key(
                    out.baseAddress!.assumingMemoryBound(to: UInt8.self), 32, subkeyID, "TSportal",
                    master.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        guard rc == 0 else { throw TokenStoreError(.ioError, "Deriving the key-wrapping key failed.") }
        return kek
    }

    private static func binding(_ reference: DataKeyReference) -> [UInt8] {
        Array("portal;store-id=\(reference.storeID);key-id=\(reference.keyID)".utf8)
    }
}
