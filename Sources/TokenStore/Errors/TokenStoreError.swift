/// The one error type of the `TokenStore` module.
///
/// Errors are for the app's developers: each has a stable ``Code``, a message that never
/// holds a secret, an account name or a user id, an optional hint saying what to do, and
/// the underlying cause (SQLite extended result code, GLib error, errno) when there is one.
///
/// Match on the code with the static patterns (`~=` by code):
///
/// ```swift
/// do { _ = try store.refreshToken(account: "me") }
/// catch TokenStoreError.keyringLocked { /* ask the user to unlock */ }
/// catch let error as TokenStoreError { switch error.code { … } }
/// ```
public struct TokenStoreError: Error, Sendable, CustomStringConvertible {
    /// Stable error codes. Apps switch on these; the raw values never change.
    public enum Code: String, Sendable, CaseIterable {
        /// No Secret Service answered on the session bus. The message says how to start one.
        case secretServiceUnavailable
        /// The keyring holding the data key is locked: the user must unlock it (interaction required).
        case keyringLocked
        /// The store holds sealed rows but its data key is gone from the key provider.
        case dataKeyMissing
        /// The key provider returned a key that does not open this store (wrong length or wrong key).
        case dataKeyCorrupt
        /// A sealed row failed authentication: it was tampered with or moved. No plaintext is returned.
        case integrityCheckFailed
        /// The database file is not a valid store (malformed, not a database, truncated).
        case databaseCorrupt
        /// The database stayed locked by another connection after bounded retries.
        case databaseBusy
        /// The database was written by a newer version of this library.
        case schemaTooNew
        /// A migration failed and was rolled back whole, or an applied migration was changed.
        case migrationFailed
        /// The store path or its directory is unsafe (symlink, hard link, group/world writable, other owner).
        case unsafeFileLayout
        /// An argument was rejected (empty, too long, not allowed). Nothing was written.
        case invalidInput
        /// A file-system or unexpected SQLite error.
        case ioError
        /// The store was closed.
        case storeClosed
        /// A key-provider call did not answer within its time bound.
        case timedOut
        /// The operation was cancelled.
        case cancelled
        /// The passphrase given to a ``PassphraseKeyProvider`` does not open the wrapped key.
        case wrongPassphrase
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

        public var description: String {
            switch self {
            case .sqlite(let code, let message): return "SQLite error \(code): \(message)"
            case .glib(let domain, let code, let message): return "\(domain) error \(code): \(message)"
            case .posix(let errno, let operation): return "\(operation) failed: errno \(errno)"
            case .other(let text): return text
            }
        }
    }

    public let code: Code
    /// What went wrong, for a developer. Never contains a secret or an identifier.
    public let message: String
    /// What to do about it, when there is something to do.
    public let hint: String?
    public let cause: Cause?
    /// For ``Code/schemaTooNew``: the version found in the file and the newest this code knows.
    public let schemaVersions: (found: Int, supported: Int)?

    public init(
        _ code: Code, _ message: String, hint: String? = nil, cause: Cause? = nil,
        schemaVersions: (found: Int, supported: Int)? = nil
    ) {
        self.code = code
        self.message = message
        self.hint = hint
        self.cause = cause
        self.schemaVersions = schemaVersions
    }

    public var description: String {
        var text = "TokenStoreError.\(code.rawValue): \(message)"
        if let cause { text += " (\(cause))" }
        if let hint { text += " Hint: \(hint)" }
        return text
    }
}

extension TokenStoreError {
    /// Pattern for ``Code/secretServiceUnavailable``: `catch TokenStoreError.secretServiceUnavailable`.
    public static let secretServiceUnavailable = Code.secretServiceUnavailable
    /// Pattern for ``Code/keyringLocked``.
    public static let keyringLocked = Code.keyringLocked
    /// Pattern for ``Code/dataKeyMissing``.
    public static let dataKeyMissing = Code.dataKeyMissing
    /// Pattern for ``Code/dataKeyCorrupt``.
    public static let dataKeyCorrupt = Code.dataKeyCorrupt
    /// Pattern for ``Code/integrityCheckFailed``.
    public static let integrityCheckFailed = Code.integrityCheckFailed
    /// Pattern for ``Code/databaseCorrupt``.
    public static let databaseCorrupt = Code.databaseCorrupt
    /// Pattern for ``Code/databaseBusy``.
    public static let databaseBusy = Code.databaseBusy
    /// Pattern for ``Code/schemaTooNew``.
    public static let schemaTooNew = Code.schemaTooNew
    /// Pattern for ``Code/migrationFailed``.
    public static let migrationFailed = Code.migrationFailed
    /// Pattern for ``Code/unsafeFileLayout``.
    public static let unsafeFileLayout = Code.unsafeFileLayout
    /// Pattern for ``Code/invalidInput``.
    public static let invalidInput = Code.invalidInput
    /// Pattern for ``Code/ioError``.
    public static let ioError = Code.ioError
}

extension TokenStoreError.Code {
    /// `catch TokenStoreError.keyringLocked` support: matches a thrown ``TokenStoreError`` by code.
    public static func ~= (code: Self, error: any Error) -> Bool {
        (error as? TokenStoreError)?.code == code
    }
}

extension TokenStoreError {
    static let secretServiceHint =
        "Start a Secret Service (gnome-keyring-daemon --start --components=secrets, KeePassXC or KWallet) "
        + "in the user's session, or open the store with an explicit PassphraseKeyProvider."
    static let unlockHint =
        "Unlock the login keyring (e.g. log in to the desktop, or open the store with allowsUserInteraction: true)."
}
