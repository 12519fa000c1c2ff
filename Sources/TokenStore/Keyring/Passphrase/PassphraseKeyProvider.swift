internal import CSodium
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Keeps data keys in files, each wrapped under a key derived from a passphrase the app
/// supplies: for headless machines (SSH sessions, servers, CI) with no Secret Service.
///
/// Never chosen automatically: a store uses it only when the app passes it explicitly.
///
/// ```swift
/// let provider = PassphraseKeyProvider(storePath: path, passphrase: SecretBytes(utf8: phrase))
/// let store = try TokenStore(path: path, appID: "com.example.app", keyProvider: provider)
/// ```
///
/// Each key is one file, `tokenstore-<store-id>-<key-id>.key` (mode 0600, opened with
/// `O_NOFOLLOW`, replaced atomically), in ``directory`` — by default not the database's
/// directory but ``defaultDirectory(environment:)`` (`$XDG_STATE_HOME/tokenstore/keys`), so one
/// backup of the database folder is not enough to start guessing the passphrase offline. A
/// deleted key's file is overwritten before it is unlinked. The file holds the 32-byte data key sealed with
/// XChaCha20-Poly1305 under a key derived with Argon2id (libsodium `crypto_pwhash`,
/// `ALG_ARGON2ID13`). The file holds the Argon2id parameters (opslimit, memlimit), the salt
/// and the nonce next to the wrapped key, a passphrase verifier, and a checksum of the whole
/// file; the associated data binds the wrapped key to its store id and key id, so a file
/// copied under another name does not open.
///
/// Errors when loading:
/// - the passphrase does not match the file's verifier: `wrongPassphrase`; nothing is changed.
/// - the file's checksum, layout or parameters are wrong, or the wrapped key does not
///   authenticate although the passphrase is right: `integrityCheckFailed` — the file was
///   altered (not `dataKeyCorrupt`, which means "the provider gave a key that does not open
///   the store": here no key is given at all). Someone who alters the salt or parameters
///   *and* recomputes the checksum gets `wrongPassphrase`, which cannot be told apart
///   without the passphrase.
///
/// The protection is only as strong as the passphrase: the file can be attacked offline by
/// guessing, slowed down by Argon2id's cost. Prefer the Secret Service where there is one.
public struct PassphraseKeyProvider: KeyProvider {
    /// Argon2id cost limits (libsodium `opslimit` and `memlimit`).
    public struct Limits: Sendable, Equatable {
        /// Passes over memory.
        public let opsLimit: UInt64
        /// Memory in bytes.
        public let memLimit: UInt64

        /// Custom limits. Below ``minimum`` (libsodium's interactive limits) or above libsodium's
        /// bounds they are `invalidInput` when a key is stored.
        public init(opsLimit: UInt64, memLimit: UInt64) {
            self.opsLimit = opsLimit
            self.memLimit = memLimit
        }

        /// libsodium's moderate limits (`OPSLIMIT_MODERATE`, `MEMLIMIT_MODERATE`: 3 passes,
        /// 256 MiB, about a second): the default.
        public static let moderate = Limits(
            opsLimit: UInt64(crypto_pwhash_opslimit_moderate()), memLimit: UInt64(crypto_pwhash_memlimit_moderate()))
        /// libsodium's interactive limits (2 passes, 64 MiB): for tests and small devices.
        public static let interactive = Limits(
            opsLimit: UInt64(crypto_pwhash_opslimit_interactive()), memLimit: UInt64(crypto_pwhash_memlimit_interactive()))
        /// The weakest limits a key is wrapped with: libsodium's interactive ones. (A file
        /// written earlier with weaker limits still opens; a rotation rewraps it.)
        public static let minimum = interactive

        /// Whether these limits may wrap a key: at least ``minimum``, within libsodium's bounds.
        var allowedForWrapping: Bool {
            opsLimit >= Self.minimum.opsLimit && memLimit >= Self.minimum.memLimit
                && opsLimit <= WrappedKeyFile.maximumOps && memLimit <= WrappedKeyFile.maximumMemory
        }
    }

    public var name: String { KeyProviderKind.passphrase.rawValue }
    /// The directory holding the wrapped-key files.
    public let directory: String
    /// The limits used when a key is wrapped (a file is opened with the limits it records).
    public let limits: Limits
    /// Where ``init(storePath:passphrase:limits:)`` kept key files before they moved out of the
    /// database's directory: still read, and cleaned on delete; never written.
    let legacyDirectory: String?
    private let passphrase: SecretBytes

    /// A provider keeping its files in `directory` (made with mode 0700 if missing).
    /// - Parameters:
    ///   - directory: where the wrapped-key files live.
    ///   - passphrase: supplied by the app (read from a terminal or a file descriptor); kept in
    ///     guarded memory.
    ///   - limits: Argon2id cost for newly wrapped keys; ``Limits/moderate`` by default.
    public init(directory: String, passphrase: SecretBytes, limits: Limits = .moderate) {
        self.init(directory: directory, legacyDirectory: nil, passphrase: passphrase, limits: limits)
    }

    /// A provider for the database at `storePath`, keeping its files in `keyDirectory` —
    /// ``defaultDirectory(environment:)`` unless given; never the database's own directory
    /// (key files an earlier version left there are still read, and deleted with their key).
    public init(storePath: String, passphrase: SecretBytes, limits: Limits = .moderate, keyDirectory: String? = nil) {
        let storeDirectory = PathNames.directory(of: storePath)
        self.init(
            directory: keyDirectory ?? Self.defaultDirectory(), legacyDirectory: storeDirectory.isEmpty ? "." : storeDirectory,
            passphrase: passphrase, limits: limits)
    }

    private init(directory: String, legacyDirectory: String?, passphrase: SecretBytes, limits: Limits) {
        self.directory = directory
        self.legacyDirectory = legacyDirectory == directory ? nil : legacyDirectory
        self.passphrase = passphrase
        self.limits = limits
    }

    /// The default directory of wrapped-key files: `$XDG_STATE_HOME/tokenstore/keys`, or
    /// `~/.local/state/tokenstore/keys` when `XDG_STATE_HOME` is unset or not absolute. State,
    /// not data: kept apart from the databases under `$XDG_DATA_HOME`.
    public static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        let base: String
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            base = state
        } else {
            base = (environment["HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? PathNames.passwordDatabaseHome()) + "/.local/state"
        }
        return base + "/tokenstore/keys"
    }

    /// The path of the file holding `reference`'s key.
    /// - Throws: `invalidInput` when the ids are not hex.
    public func filePath(for reference: DataKeyReference) throws -> String {
        try KeyFiles.checkHex(reference)
        return FileLayout.wrappedKeyPath(directory: directory, storeID: reference.storeID, keyID: reference.keyID)
    }

    /// Reads and unwraps a key.
    /// - Returns: the key, or `nil` when there is no file for it.
    /// - Throws: `wrongPassphrase`, `integrityCheckFailed`, `unsafeFileLayout` (a link, not
    ///   a regular file, another owner, readable by others), `ioError`.
    public func loadKey(_ reference: DataKeyReference) throws -> SecretBytes? {
        for path in try paths(for: reference) {
            guard let bytes = try KeyFiles.read(path) else { continue }
            return try WrappedKeyFile.unwrap(bytes, passphrase: passphrase, reference: reference)
        }
        return nil
    }

    /// Where `reference`'s file is looked for: ``directory``, then the legacy location.
    private func paths(for reference: DataKeyReference) throws -> [String] {
        let path = try filePath(for: reference)
        guard let legacyDirectory else { return [path] }
        return [path, FileLayout.wrappedKeyPath(directory: legacyDirectory, storeID: reference.storeID, keyID: reference.keyID)]
    }

    /// Wraps and stores a key, replacing the file of the same reference atomically.
    /// - Throws: `invalidInput` (not 32 bytes, empty passphrase, limits below
    ///   ``Limits/minimum`` or out of bounds),
    ///   `unsafeFileLayout`, `ioError`.
    public func storeKey(_ key: SecretBytes, for reference: DataKeyReference) throws {
        let path = try filePath(for: reference)
        let bytes = try WrappedKeyFile.wrap(key, passphrase: passphrase, limits: limits, reference: reference)
        try KeyFiles.write(bytes, to: path, directory: directory)
    }

    /// Deletes a key's file: overwrites it with zeros (and syncs that) before unlinking it, so
    /// the wrapped key does not stay on disk in the file's old blocks (file systems that copy on
    /// write, and backups, can still hold it). Succeeds when it is already gone.
    /// - Warning: every row sealed under this key becomes unreadable.
    public func deleteKey(_ reference: DataKeyReference) throws {
        for path in try paths(for: reference) { try KeyFiles.delete(path) }
    }

    /// `present` when the key's file exists (the passphrase is not checked), else `missing`.
    public func availability(of reference: DataKeyReference) throws -> DataKeyAvailability {
        for path in try paths(for: reference) where try KeyFiles.exists(path) { return .present }
        return .missing
    }
}

/// The wrapped-key file format, version 1 (174 bytes):
///
/// `"TSPK" ‖ version u8 ‖ alg u8 ‖ opslimit u64le ‖ memlimit u64le ‖ salt (16) ‖ nonce (24)`
/// (the header, 62 bytes) `‖ verifier (32) ‖ wrapped key (32 + 16) ‖ checksum (32)`.
///
/// Argon2id gives 64 bytes: the first 32 wrap the key, the last 32 key the verifier
/// (BLAKE2b over the header and the reference). The checksum is unkeyed BLAKE2b over
/// everything before it, so accidental or naive damage is told apart from a wrong passphrase.
enum WrappedKeyFile {
    static let magic = Array("TSPK".utf8)
    static let version: UInt8 = 1
    static let headerCount = 62
    static let wrappedCount = WrappedKey.sealedCount
    static let totalCount = headerCount + 32 + wrappedCount + 32

    static func wrap(
        _ key: SecretBytes, passphrase: SecretBytes, limits: PassphraseKeyProvider.Limits, reference: DataKeyReference
    ) throws -> [UInt8] {
        guard key.count == 32 else { throw TokenStoreError(.invalidInput, "A data key must be 32 bytes, not \(key.count).") }
        guard passphrase.count > 0 else { throw TokenStoreError(.invalidInput, "The passphrase is empty.") }
        guard limits.allowedForWrapping else {
            throw TokenStoreError(
                .invalidInput,
                "The Argon2id limits are below libsodium's interactive limits (2 passes, 64 MiB) or above its bounds.")
        }
        var header = magic + [version, UInt8(crypto_pwhash_alg_argon2id13())]
        header += littleEndian(limits.opsLimit) + littleEndian(limits.memLimit)
        header += SecretBytes.random(count: 16).copyBytes()
        header += SecretBytes.random(count: 24).copyBytes()
        let derived = try derive(passphrase, header: header)
        let verifier = self.verifier(derived, header: header, reference: reference)
        let wrapped = try derived.withUnsafeBytes { all in
            try WrappedKey.seal(
                key, kek: UnsafeRawBufferPointer(rebasing: all[0..<32]), associatedData: header + binding(reference),
                nonce: Array(header[38..<62]))
        }
        return WrappedKey.checksummed(header + verifier + wrapped)
    }

    static func unwrap(_ bytes: [UInt8], passphrase: SecretBytes, reference: DataKeyReference) throws -> SecretBytes {
        func altered(_ why: String) -> TokenStoreError {
            TokenStoreError(
                .integrityCheckFailed, "The wrapped-key file was altered or damaged (\(why)).",
                hint: "Restore the file from a backup, or reset the store explicitly (resetStore).")
        }
        let (body, failure) = WrappedKey.body(of: bytes, count: totalCount)
        if let failure { throw altered(failure) }
        let header = Array(body[0..<headerCount])
        guard Array(header[0..<4]) == magic else { throw altered("not a wrapped-key file") }
        guard header[4] == version else { throw altered("unknown version") }
        guard Int32(header[5]) == crypto_pwhash_alg_argon2id13() else { throw altered("unknown algorithm") }
        let ops = readLittleEndian(header, at: 6), memory = readLittleEndian(header, at: 14)
        guard ops >= UInt64(crypto_pwhash_opslimit_min()), ops <= maximumOps,
              memory >= UInt64(crypto_pwhash_memlimit_min()), memory <= maximumMemory
        else { throw altered("parameters out of bounds") }
        guard passphrase.count > 0 else { throw TokenStoreError(.wrongPassphrase, "The passphrase is empty.") }
        let derived = try derive(passphrase, header: header)
        guard ConstantTime.equal(verifier(derived, header: header, reference: reference), Array(body[headerCount..<(headerCount + 32)])) else {
            throw TokenStoreError(
                .wrongPassphrase, "The passphrase does not open the wrapped data key.",
                hint: "Supply the passphrase the store was created with.")
        }
        let wrapped = Array(body[(headerCount + 32)..<(headerCount + 32 + wrappedCount)])
        let key = derived.withUnsafeBytes { all in
            WrappedKey.open(
                wrapped, kek: UnsafeRawBufferPointer(rebasing: all[0..<32]), associatedData: header + binding(reference),
                nonce: Array(header[38..<62]))
        }
        guard let key else { throw altered("the wrapped key does not authenticate") }
        return key
    }

    /// Upper bounds accepted from a file, so a doctored file cannot ask for unbounded work.
    static let maximumOps = UInt64(crypto_pwhash_opslimit_sensitive()) * 4
    static let maximumMemory = UInt64(crypto_pwhash_memlimit_sensitive())

    /// 64 bytes of Argon2id output: the wrapping key, then the verifier key.
    private static func derive(_ passphrase: SecretBytes, header: [UInt8]) throws -> SecretBytes {
        let salt = Array(header[22..<38])
        let ops = readLittleEndian(header, at: 6), memory = readLittleEndian(header, at: 14)
        var rc: Int32 = -1
        let out = SecretBytes(count: 64) { out in
            passphrase.withUnsafeBytes { phrase in
                rc = crypto_pwhash(
                    out.baseAddress!.assumingMemoryBound(to: UInt8.self), 64,
                    phrase.baseAddress!.assumingMemoryBound(to: CChar.self), UInt64(phrase.count), salt,
                    ops, Int(memory), crypto_pwhash_alg_argon2id13())
            }
        }
        guard rc == 0 else {
            throw TokenStoreError(.ioError, "Argon2id could not run (out of memory for its memory limit?).")
        }
        return out
    }

    /// Only the first 32 bytes wrap (libsodium reads 32 bytes of key); the rest keys this.
    private static func verifier(_ derived: SecretBytes, header: [UInt8], reference: DataKeyReference) -> [UInt8] {
        derived.withUnsafeBytes { all in
            Blake2b.digest(Array("tokenstore/passphrase-verifier/v1".utf8) + header + binding(reference),
                           key: UnsafeRawBufferPointer(rebasing: all[32..<64]))
        }
    }

    private static func binding(_ reference: DataKeyReference) -> [UInt8] {
        Array("store-id=\(reference.storeID);key-id=\(reference.keyID)".utf8)
    }

    private static func littleEndian(_ value: UInt64) -> [UInt8] {
        withUnsafeBytes(of: value.littleEndian) { Array($0) }
    }

    private static func readLittleEndian(_ bytes: [UInt8], at offset: Int) -> UInt64 {
        (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[offset + $1]) << (8 * UInt64($1)) }
    }
}
