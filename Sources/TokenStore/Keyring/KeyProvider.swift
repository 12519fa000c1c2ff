/// Names one data key of one store, as a key provider files it.
///
/// The identifiers are random hex strings; they name nothing about the user. The app id
/// appears only in the human-readable label.
public struct DataKeyReference: Sendable, Hashable, CustomStringConvertible {
    /// The store's random id (32 lowercase hex digits).
    public let storeID: String
    /// The key's random id (32 lowercase hex digits).
    public let keyID: String
    /// The app id the store belongs to, for the label a person sees in a keyring manager.
    public let appID: String

    public init(storeID: String, keyID: String, appID: String) {
        self.storeID = storeID
        self.keyID = keyID
        self.appID = appID
    }

    /// The label of the keyring item: "TokenStore data key — <app-id>".
    public var label: String { "TokenStore data key — \(appID)" }

    /// The label where the provider keeps labels in clear text (KWallet's attribute file):
    /// no app id, and unique per key (the random key id, already an attribute): KWallet files
    /// items under their label, and two items created at once with one label overwrote
    /// each other (a key lost).
    public var neutralLabel: String { "TokenStore data key \(keyID)" }

    public var description: String { "store \(storeID.prefix(8)) key \(keyID.prefix(8))" }
}

/// What a key provider knows about a key, for diagnostics (`tokenctl status`).
public enum DataKeyAvailability: String, Sendable {
    /// The key can be read now.
    case present
    /// The key may exist, but the keyring holding it is locked.
    case locked
    /// The provider answered and has no such key.
    case missing
}

/// Keeps data keys outside the database: the Secret Service by default
/// (``SecretServiceKeyProvider``), in a Flatpak sandbox that cannot reach it a key wrapped
/// under the Secret portal's per-app secret (``PortalKeyProvider``, see
/// ``KeyProviderSelection``), or a passphrase-wrapped key chosen explicitly by the app.
///
/// Implementations must be safe to call from any thread. They must never answer "missing"
/// when they could not look (a locked keyring, an absent service): they throw instead.
public protocol KeyProvider: Sendable {
    /// A short name for diagnostics, such as `secret-service`.
    var name: String { get }

    /// Reads a data key.
    /// - Returns: the key, or `nil` when the provider looked and has no such key.
    /// - Throws: ``TokenStoreError`` `keyringLocked`, `secretServiceUnavailable`, `timedOut`.
    func loadKey(_ reference: DataKeyReference) throws -> SecretBytes?

    /// Stores a data key, replacing any key with the same reference.
    /// - Throws: ``TokenStoreError`` `keyringLocked`, `secretServiceUnavailable`, `timedOut`.
    func storeKey(_ key: SecretBytes, for reference: DataKeyReference) throws

    /// Deletes a data key. Succeeds when the key is already gone.
    /// - Warning: every row sealed under this key becomes unreadable.
    /// - Throws: ``TokenStoreError`` `keyringLocked`, `secretServiceUnavailable`, `timedOut`.
    func deleteKey(_ reference: DataKeyReference) throws

    /// Tells whether a key is present, locked away, or missing, without unlocking anything.
    func availability(of reference: DataKeyReference) throws -> DataKeyAvailability

    /// Reads a store's epoch: a counter kept outside the database file, raised by every
    /// logout and key rotation, so that a database file restored from an older copy is
    /// told apart (`storeRolledBack`). See <doc:StoreEpoch>.
    /// - Parameter storeID: the store's random id (32 lowercase hex digits).
    /// - Returns: the highest epoch the provider holds for the store; 0 when it holds none.
    /// - Throws: ``TokenStoreError`` `keyringLocked`, `secretServiceUnavailable`, `timedOut`,
    ///   `integrityCheckFailed` (a stored epoch is not a number), `invalidInput`, `ioError`.
    func storeEpoch(storeID: String) throws -> UInt64

    /// Raises a store's epoch to `epoch`; an epoch the provider already holds that is as high
    /// or higher stays (the epoch never goes down). Implementations must write the new value
    /// before they remove an older one, so a crash leaves the old or the new value, never none.
    /// - Parameters:
    ///   - storeID: the store's random id (32 lowercase hex digits).
    ///   - appID: the app id, for a human-readable label only.
    ///   - epoch: the value to raise it to.
    /// - Throws: ``TokenStoreError`` `keyringLocked`, `secretServiceUnavailable`, `timedOut`,
    ///   `invalidInput`, `ioError`.
    func raiseStoreEpoch(storeID: String, appID: String, to epoch: UInt64) throws

    /// Deletes a store's epoch (when the store itself is destroyed). Succeeds when there is none.
    /// - Throws: ``TokenStoreError`` `keyringLocked`, `secretServiceUnavailable`, `timedOut`, `ioError`.
    func deleteStoreEpoch(storeID: String) throws

    /// Starts connecting to where the provider keeps keys, in the background, and returns at once:
    /// a store's open calls it first, then reads its database meanwhile. Best effort (a failure
    /// shows in the call that follows). The default does nothing.
    func beginConnecting()

    /// The data key as ``loadKey(_:)`` answers it (same errors), and the epoch of
    /// `reference.storeID` as ``storeEpoch(storeID:)`` would answer it, in one operation where the
    /// provider can do that cheaper (a store's open); the epoch is nil when the key is missing or
    /// the epoch was not read this way (the store then asks ``storeEpoch(storeID:)``).
    /// The default: ``loadKey(_:)``, and nil.
    func loadKeyAndStoreEpoch(_ reference: DataKeyReference) throws -> (key: SecretBytes?, epoch: UInt64?)

    /// The TCTI of the TPM this provider seals keys with (``TPMKeyProvider/tcti``), where a
    /// store's DPoP key is made and signs and whose kind decides the tier; nil (the default) for
    /// a provider without a TPM. A capability callers read instead of casting to a provider type.
    var tpmTCTI: String? { get }
}

extension KeyProvider {
    /// Does nothing: a provider that can connect early implements it.
    public func beginConnecting() {}

    /// ``loadKey(_:)``, and no epoch (the store asks ``storeEpoch(storeID:)``).
    public func loadKeyAndStoreEpoch(_ reference: DataKeyReference) throws -> (key: SecretBytes?, epoch: UInt64?) {
        (try loadKey(reference), nil)
    }

    /// nil: no TPM.
    public var tpmTCTI: String? { nil }
}
