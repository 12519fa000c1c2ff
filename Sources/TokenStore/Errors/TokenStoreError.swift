#if canImport(Glibc)
import Glibc
#endif

/// The one error type of the `TokenStore` module.
///
/// Errors are for the app's developers: each has a stable ``Code``, a message that never
/// holds a secret, an account name or a user id, an optional hint saying what to do, and
/// the underlying cause (SQLite extended result code, GLib error, errno) when there is one.
///
/// Match with the static errors below, which compare by code only (message, hint and cause
/// are ignored). `catch TokenStoreError.keyringLocked` also matches a store error that reaches
/// the app wrapped by the session layer (`AuthSessionError.storage`), so write it before
/// `catch AuthSessionError.storage`. Codes are not an enum: a `switch` needs a `default:`.
///
/// ```swift
/// do { _ = try store.refreshToken(account: "me") }
/// catch TokenStoreError.keyringLocked { /* ask the user to unlock */ }
/// catch let error as TokenStoreError {
///     switch error.code {
///     case .databaseBusy: /* try again */
///     default: /* report error.description */
///     }
/// }
/// // In tests: #expect(throws: TokenStoreError.keyringLocked) { try store.refreshToken(account: "me") }
/// ```
public struct TokenStoreError: CodedError {
    /// A stable error code. Not an enum: a later version may add codes, so a `switch` over
    /// codes needs a `default:`. The raw values never change (`tokenctl --json` prints them).
    public struct Code: ErrorCode {
        /// The raw value, e.g. `"keyringLocked"`.
        public let rawValue: String

        /// Makes a code from its raw value.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// No Secret Service answered on the session bus. The message says how to start one.
        public static let secretServiceUnavailable = Code(rawValue: "secretServiceUnavailable")
        /// The keyring holding the data key is locked: the user must unlock it (interaction required).
        public static let keyringLocked = Code(rawValue: "keyringLocked")
        /// The store holds sealed rows but its data key is gone from the key provider.
        public static let dataKeyMissing = Code(rawValue: "dataKeyMissing")
        /// The key provider returned a key that does not open this store (wrong length or wrong key).
        public static let dataKeyCorrupt = Code(rawValue: "dataKeyCorrupt")
        /// A sealed row failed authentication: it was tampered with or moved. No plaintext is returned.
        public static let integrityCheckFailed = Code(rawValue: "integrityCheckFailed")
        /// The database file is not a valid store (malformed, not a database, truncated).
        public static let databaseCorrupt = Code(rawValue: "databaseCorrupt")
        /// The database stayed locked by another connection after bounded retries.
        public static let databaseBusy = Code(rawValue: "databaseBusy")
        /// The database was written by a newer version of this library.
        public static let schemaTooNew = Code(rawValue: "schemaTooNew")
        /// A migration failed and was rolled back whole, or an applied migration was changed.
        public static let migrationFailed = Code(rawValue: "migrationFailed")
        /// The store path or its directory is unsafe (symlink, hard link, group/world writable, other owner).
        public static let unsafeFileLayout = Code(rawValue: "unsafeFileLayout")
        /// An argument was rejected (empty, too long, not allowed). Nothing was written.
        public static let invalidInput = Code(rawValue: "invalidInput")
        /// A file-system or unexpected SQLite error.
        public static let ioError = Code(rawValue: "ioError")
        /// The store was closed.
        public static let storeClosed = Code(rawValue: "storeClosed")
        /// A key-provider call did not answer within its time bound.
        public static let timedOut = Code(rawValue: "timedOut")
        /// The operation was cancelled.
        public static let cancelled = Code(rawValue: "cancelled")
        /// The passphrase given to a ``PassphraseKeyProvider`` does not open the wrapped key, or
        /// the Secret portal's secret for this app does not open a ``PortalKeyProvider`` key file
        /// (the store was made by another app). Nothing is changed.
        public static let wrongPassphrase = Code(rawValue: "wrongPassphrase")
        /// The database's schema (its tables, indexes, triggers, views) is not the one its
        /// migrations make: an object was added, removed or changed outside this library.
        public static let schemaTampered = Code(rawValue: "schemaTampered")
        /// The disk (or the file-size limit) is full; the write was rolled back whole.
        public static let diskFull = Code(rawValue: "diskFull")
        /// The database file is older than its epoch in the key provider: it was restored from
        /// an older copy, undoing the logouts made since. Nothing was changed; restore the
        /// newest copy, or reset the store.
        public static let storeRolledBack = Code(rawValue: "storeRolledBack")
        /// The file at the store path is a database of another program (it has neither
        /// TokenStore's `application_id` nor its tables), or an empty file a read-only open
        /// cannot use. Nothing was written to it.
        public static let notAStore = Code(rawValue: "notAStore")
        /// The store needs a schema migration and was opened read-only
        /// (``TokenStore/Options/readOnly``), which never migrates. Nothing was written; open it
        /// once for writing (`tokenctl migrate`) to migrate it.
        public static let migrationRequired = Code(rawValue: "migrationRequired")
        /// The store's key was made by another key provider than the one it is opened with (the
        /// provider is recorded in the file): the message names the one it needs. Nothing was
        /// changed; open it with that provider (for a passphrase store: with its passphrase).
        public static let wrongKeyProvider = Code(rawValue: "wrongKeyProvider")
        /// No usable TPM 2.0 (``TPMKeyProvider``): no device, no permission to open it, or a TCTI
        /// that does not answer. The message names the TPM and the reason; nothing was changed.
        public static let tpmUnavailable = Code(rawValue: "tpmUnavailable")
        /// The store's data key was sealed by another TPM than the one asked (another machine, or
        /// this TPM was cleared since). The message names the TPM; nothing was changed, and the
        /// same files open again with the TPM that sealed the key.
        public static let tpmMismatch = Code(rawValue: "tpmMismatch")
        /// The store is locked (``TokenStore/lock(allProcesses:)``, `tokenctl lock`, or the
        /// desktop session's lock under ``AccessPolicy/whenUnlocked``): its data key was wiped
        /// from this process's memory, and nothing is read or written until it is unlocked.
        /// Temporary: retry after the user unlocks.
        public static let storeLocked = Code(rawValue: "storeLocked")
        /// The user's presence was asked for (``AccessPolicy/userPresence(_:)``) and the
        /// authorization was denied or dismissed. Nothing was read or changed. Temporary: retry
        /// after the user acts.
        public static let userPresenceDenied = Code(rawValue: "userPresenceDenied")
        /// ``AccessPolicy/whenUnlocked`` was asked, but nothing on the buses says when the session
        /// locks (no logind, no screensaver). The store was not opened.
        public static let lockSourceUnavailable = Code(rawValue: "lockSourceUnavailable")
        /// The PIN given for a TPM PIN key slot (``TPMPINKeyProvider``) is not its PIN. The TPM
        /// counted the failure towards its dictionary-attack lockout:
        /// ``TokenStoreError/pinTriesLeft`` says how many more it allows. Nothing was changed.
        public static let wrongPIN = Code(rawValue: "wrongPIN")
        /// The TPM is in dictionary-attack lockout after too many wrong PINs: it refuses every
        /// PIN, the right one too, until it recovers (``TokenStoreError/lockoutRecovery``: the
        /// longest wait; nil when only the TPM's lockout authorization ends it). Nothing was
        /// changed; the store's data is intact. Temporary: retry after the wait.
        public static let tpmLockedOut = Code(rawValue: "tpmLockedOut")

        /// Every code this version defines, in a stable order. A later version may add more.
        public static let allCases: [Code] = [
            .secretServiceUnavailable, .keyringLocked, .dataKeyMissing, .dataKeyCorrupt,
            .integrityCheckFailed, .databaseCorrupt, .databaseBusy, .schemaTooNew, .migrationFailed,
            .unsafeFileLayout, .invalidInput, .ioError, .storeClosed, .timedOut, .cancelled,
            .wrongPassphrase, .schemaTampered, .diskFull, .storeRolledBack, .notAStore, .migrationRequired,
            .wrongKeyProvider, .tpmUnavailable, .tpmMismatch, .storeLocked, .userPresenceDenied, .lockSourceUnavailable,
            .wrongPIN, .tpmLockedOut,
        ]
    }

    /// The underlying cause of an error, kept for diagnosis. Holds no secret.
    public enum Cause: Sendable, CustomStringConvertible {
        /// An SQLite result: the extended result code and SQLite's own message.
        case sqlite(extendedCode: Int32, message: String)
        /// A GLib error from libsecret/GIO: domain, code, message.
        case glib(domain: String, code: Int32, message: String)
        /// An errno value from a system call.
        case posix(errno: Int32, operation: String)
        /// Any other cause, already described without secrets.
        case other(String)

        /// A one-line description without secrets.
        public var description: String {
            switch self {
            case .sqlite(let code, let message): return "SQLite error \(code): \(message)"
            case .glib(let domain, let code, let message): return "\(domain) error \(code): \(message)"
            case .posix(let errno, let operation): return "\(operation) failed: \(String(cString: strerror(errno))) (errno \(errno))"
            case .other(let text): return text
            }
        }
    }

    /// The stable code.
    public let code: Code
    /// What went wrong, for a developer. Never contains a secret or an identifier.
    public let message: String
    /// What to do about it, when there is something to do.
    public let hint: String?
    /// The underlying cause, when there is one.
    public let cause: Cause?
    /// For ``Code/schemaTooNew``: the version found in the file and the newest this code knows.
    public let schemaVersions: (found: Int, supported: Int)?
    /// For ``Code/wrongKeyProvider``: the kind of key provider the store records (the one it needs).
    public let recordedKeyProvider: KeyProviderKind?
    /// For ``Code/wrongPIN``: the wrong PINs the TPM still allows before it locks out (nil when it
    /// did not say).
    public private(set) var pinTriesLeft: Int?
    /// For ``Code/tpmLockedOut``: the longest wait until the TPM accepts a PIN again (nil when it
    /// does not recover by itself, or did not say).
    public private(set) var lockoutRecovery: Duration?

    /// Makes an error. `message` and `hint` must hold no secret, account name or user id.
    public init(
        _ code: Code, _ message: String, hint: String? = nil, cause: Cause? = nil,
        schemaVersions: (found: Int, supported: Int)? = nil, recordedKeyProvider: KeyProviderKind? = nil
    ) {
        self.code = code
        self.message = message
        self.hint = hint
        self.cause = cause
        self.schemaVersions = schemaVersions
        self.recordedKeyProvider = recordedKeyProvider
        self.pinTriesLeft = nil
        self.lockoutRecovery = nil
    }

    /// Makes a TPM PIN error (``Code/wrongPIN``, ``Code/tpmLockedOut``) with what the TPM said:
    /// the wrong PINs it still allows, the longest wait until it accepts one again. A separate
    /// initializer, so that the one above keeps its 0.3.0 signature.
    public init(
        _ code: Code, _ message: String, hint: String? = nil, cause: Cause? = nil,
        pinTriesLeft: Int?, lockoutRecovery: Duration?
    ) {
        self.init(code, message, hint: hint, cause: cause)
        self.pinTriesLeft = pinTriesLeft
        self.lockoutRecovery = lockoutRecovery
    }

    /// `TokenStoreError.<code>: message (cause) Hint: …`, never a secret or an identifier.
    public var description: String {
        var text = descriptionHead
        if let cause { text += " (\(cause))" }
        if let hint { text += " Hint: \(hint)" }
        return text
    }
}

extension TokenStoreError {
    /// `catch TokenStoreError.keyringLocked`: matches a thrown ``TokenStoreError`` with the code
    /// of `pattern`, also when it is the cause of an `AuthSessionError.storage`.
    public static func ~= (pattern: TokenStoreError, error: any Error) -> Bool { matches(pattern, error) }

    // One error per code: a pattern for `catch`, `switch` and `#expect(throws:)`, equal to
    // every error with that code.

    /// Matches ``Code/secretServiceUnavailable``.
    public static let secretServiceUnavailable = Self(
        .secretServiceUnavailable, "No Secret Service answered on the session bus.", hint: secretServiceHint)
    /// Matches ``Code/keyringLocked``.
    public static let keyringLocked = Self(
        .keyringLocked, "The keyring holding the data key is locked.", hint: unlockHint)
    /// Matches ``Code/dataKeyMissing``.
    public static let dataKeyMissing = Self(
        .dataKeyMissing, "The store's data key is missing from the key provider.")
    /// Matches ``Code/dataKeyCorrupt``.
    public static let dataKeyCorrupt = Self(.dataKeyCorrupt, "The data key does not open this store.")
    /// Matches ``Code/integrityCheckFailed``.
    public static let integrityCheckFailed = Self(
        .integrityCheckFailed, "A sealed row failed authentication.")
    /// Matches ``Code/databaseCorrupt``.
    public static let databaseCorrupt = Self(.databaseCorrupt, "The database file is not a valid store.")
    /// Matches ``Code/databaseBusy``.
    public static let databaseBusy = Self(.databaseBusy, "The database stayed locked by another connection.")
    /// Matches ``Code/schemaTooNew``.
    public static let schemaTooNew = Self(
        .schemaTooNew, "The database was written by a newer version of this library.")
    /// Matches ``Code/migrationFailed``.
    public static let migrationFailed = Self(.migrationFailed, "A migration failed and was rolled back.")
    /// Matches ``Code/unsafeFileLayout``.
    public static let unsafeFileLayout = Self(.unsafeFileLayout, "The store path or its directory is unsafe.")
    /// Matches ``Code/invalidInput``.
    public static let invalidInput = Self(.invalidInput, "An argument was rejected.")
    /// Matches ``Code/ioError``.
    public static let ioError = Self(.ioError, "A file-system or unexpected SQLite error.")
    /// Matches ``Code/storeClosed``.
    public static let storeClosed = Self(.storeClosed, "The store was closed.")
    /// Matches ``Code/timedOut``.
    public static let timedOut = Self(.timedOut, "A key-provider call did not answer in time.")
    /// Matches ``Code/cancelled``.
    public static let cancelled = Self(.cancelled, "The operation was cancelled.")
    /// Matches ``Code/wrongPassphrase``.
    public static let wrongPassphrase = Self(
        .wrongPassphrase, "The passphrase does not open the wrapped key.")
    /// Matches ``Code/schemaTampered``.
    public static let schemaTampered = Self(
        .schemaTampered, "The database schema is not the one its migrations make.")
    /// Matches ``Code/diskFull``.
    public static let diskFull = Self(.diskFull, "The disk is full.")
    /// Matches ``Code/storeRolledBack``.
    public static let storeRolledBack = Self(
        .storeRolledBack, "The store file is older than its epoch in the key provider.")
    /// Matches ``Code/notAStore``.
    public static let notAStore = Self(.notAStore, "The file is not a TokenStore store.")
    /// Matches ``Code/migrationRequired``.
    public static let migrationRequired = Self(
        .migrationRequired, "The store needs a migration, and a read-only open does not migrate.")
    /// Matches ``Code/wrongKeyProvider``.
    public static let wrongKeyProvider = Self(
        .wrongKeyProvider, "The store's key was made by another key provider.")
    /// Matches ``Code/tpmUnavailable``.
    public static let tpmUnavailable = Self(.tpmUnavailable, "No usable TPM.")
    /// Matches ``Code/tpmMismatch``.
    public static let tpmMismatch = Self(.tpmMismatch, "The store's key was sealed by another TPM.")
    /// Matches ``Code/storeLocked``.
    public static let storeLocked = Self(.storeLocked, "The store is locked.")
    /// Matches ``Code/userPresenceDenied``.
    public static let userPresenceDenied = Self(.userPresenceDenied, "The user's presence was denied.")
    /// Matches ``Code/lockSourceUnavailable``.
    public static let lockSourceUnavailable = Self(
        .lockSourceUnavailable, "Nothing says when the desktop session locks.")
    /// Matches ``Code/wrongPIN``.
    public static let wrongPIN = Self(.wrongPIN, "The PIN does not open the TPM PIN key slot.")
    /// Matches ``Code/tpmLockedOut``.
    public static let tpmLockedOut = Self(.tpmLockedOut, "The TPM is in dictionary-attack lockout.")
}

extension TokenStoreError {
    static let secretServiceHint =
        "Start a Secret Service (gnome-keyring-daemon --start --components=secrets, KeePassXC or KWallet) "
        + "in the user's session, or open the store with an explicit PassphraseKeyProvider."
    static let unlockHint =
        "Unlock the login keyring (e.g. log in to the desktop, or open the store with allowsUserInteraction: true)."
}
