import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Keeps data keys sealed by this machine's TPM 2.0, in the Secret Service: both the user's
/// keyring and this machine's TPM are needed to open the store (a copy of the home directory,
/// keyring included, does not open elsewhere).
///
/// The data key is sealed (TPM2_Create of a keyedhash sealed object) under a primary storage
/// key that TPM2_CreatePrimary derives in the owner hierarchy each time (the same template on
/// the same TPM gives the same key: nothing is made persistent, no root needed). The sealed blob
/// (`TPMSealedBlob`: the object's public and TPM-encrypted private parts) is kept in the
/// Secret Service item where ``SecretServiceKeyProvider`` keeps a raw key (same schema, the
/// `store-id` and `key-id` attributes); no item of a TPM store holds the raw key. The key is
/// unsealed once per open: TPM2_ReadPublic of the persistent storage root key at 0x81000001
/// (systemd provisions it from the same template: it is the same key), then TPM2_Load,
/// TPM2_StartAuthSession, TPM2_Unseal and one flush (`operationsPerOpenThroughSRK`); without
/// that key, or with another key there, TPM2_CreatePrimary derives the primary, and it is flushed
/// too (``operationsPerOpen``). TPM2_Startup only when the TPM answers that it was never started.
/// The library never makes or removes a persistent key. The key crosses the TPM interface only encrypted: TPM2_Create (sealing) and
/// TPM2_Unseal run in an HMAC session salted to the primary key with AES-128-CFB parameter
/// encryption, new each time, so a sniffer on a discrete TPM's bus sees neither the key nor the
/// same bytes twice.
///
/// No PCR policy: the sealed key does not depend on the firmware or boot state (a firmware
/// update would otherwise lock users out), so it protects against copying, not against
/// another boot of the same machine.
///
/// The epoch items stay in the Secret Service (as ``SecretServiceKeyProvider``'s).
///
/// Errors: no usable TPM (no device, no permission to open it, a TCTI that does not answer, or
/// not within 10 s: a TPM that accepts the connection and stays silent is a time-out, not a hang) is
/// `tpmUnavailable` naming the TPM and the reason, never a fallback to the keyring alone; a key
/// sealed by another TPM is `tpmMismatch` naming this one, and nothing is changed.
///
/// ```swift
/// let store = try TokenStore(path: path, appID: "com.example.app", keyProvider: TPMKeyProvider())
/// ```
public struct TPMKeyProvider: KeyProvider {
    /// The environment variable naming the TCTI (`swtpm:host=127.0.0.1,port=2321`, `device:/dev/tpm0`).
    public static let tctiVariable = "TOKENSTORE_TPM_TCTI"
    /// The TCTI used when ``tctiVariable`` is not set: the kernel's resource manager.
    public static let defaultTCTI = TPMDiagnosis.defaultTCTI
    /// The TPM commands one open sends without the persistent storage root key (TPM2_ReadPublic
    /// answered "no such handle", TPM2_CreatePrimary, TPM2_Load, TPM2_StartAuthSession,
    /// TPM2_Unseal and two TPM2_FlushContext; the session ends with the Unseal), for estimating a
    /// real TPM's cost. Two more when the TPM was never started (its first answer is
    /// TPM_RC_INITIALIZE; then TPM2_Startup, and that command again).
    public static let operationsPerOpen = 7
    /// The TPM commands one open sends through the persistent storage root key at 0x81000001
    /// (TPM2_ReadPublic, TPM2_Load, TPM2_StartAuthSession, TPM2_Unseal, one TPM2_FlushContext):
    /// no TPM2_CreatePrimary, the slowest command of the open on a real TPM.
    package static let operationsPerOpenThroughSRK = 5

    public var name: String { KeyProviderKind.tpm.rawValue }

    /// The TCTI configuration of the TPM used, as the tpm2-tss TCTI loader takes it.
    public let tcti: String
    /// The Secret Service provider whose items hold the sealed keys and whose epoch items are used.
    public let keyring: SecretServiceKeyProvider
    /// Where the TPM path says, at debug level and with no identifier, which primary key an open
    /// used (the persistent storage root key, or one derived because that was absent or another key).
    package var logger: TokenStoreLogger = .disabled

    /// A provider for the TPM `tcti` names (by default `$TOKENSTORE_TPM_TCTI`, else
    /// `device:/dev/tpmrm0`), keeping sealed keys in `keyring`.
    public init(tcti: String? = nil, keyring: SecretServiceKeyProvider = SecretServiceKeyProvider()) {
        self.tcti = tcti ?? Self.environmentTCTI()
        self.keyring = keyring
    }

    /// `$TOKENSTORE_TPM_TCTI` when set and not empty, else ``defaultTCTI``.
    public static func environmentTCTI() -> String {
        guard let value = getenv(tctiVariable).map({ String(cString: $0) }), !value.isEmpty else { return defaultTCTI }
        return value
    }

    /// Reads the sealed key and unseals it with the TPM.
    /// - Returns: the key, or nil when the keyring holds no item for it (the TPM is not asked).
    /// - Throws: ``TokenStoreError`` `tpmUnavailable`, `tpmMismatch` (sealed by another TPM),
    ///   `dataKeyCorrupt` (the item is not a sealed key), `integrityCheckFailed`, and the
    ///   Secret Service's errors (``SecretServiceKeyProvider/loadKey(_:)``).
    public func loadKey(_ reference: DataKeyReference) throws -> SecretBytes? {
        guard let item = try keyring.loadItem(reference) else { return nil }
        return try unseal(item)
    }

    /// The data key in a sealed item: the blob loaded under its primary (the persistent SRK when
    /// it is the blob's, else derived: ``TPMSession/withLoaded(_:subject:logger:_:)``), TPM2_Unseal in
    /// a session salted to that primary that encrypts the answer, what was made flushed.
    func unseal(_ item: SecretBytes) throws(TokenStoreError) -> SecretBytes {
        let blob = try TPMSealedBlob(decoding: item.copyBytes())
        let logger = logger
        let key = try TPMSession.with(tcti: tcti, startup: false) { session throws(TokenStoreError) -> SecretBytes in
            try session.withLoaded(blob, logger: logger) { sealed, primary throws(TokenStoreError) in
                try session.unseal(sealed, salt: primary)
            }
        }
        guard key.count == SecretServiceKeyProvider.keyLength else {
            throw TokenStoreError(.dataKeyCorrupt, "The TPM unsealed \(key.count) bytes, not a data key; nothing was changed.")
        }
        return key
    }

    /// Seals `key` with the TPM and stores the sealed blob in the keyring.
    /// - Throws: ``TokenStoreError`` `invalidInput` (not 32 bytes), `tpmUnavailable`, and the
    ///   Secret Service's errors (``SecretServiceKeyProvider/storeKey(_:for:)``).
    public func storeKey(_ key: SecretBytes, for reference: DataKeyReference) throws {
        guard key.count == SecretServiceKeyProvider.keyLength else {
            throw TokenStoreError(.invalidInput, "A data key must be \(SecretServiceKeyProvider.keyLength) bytes, not \(key.count).")
        }
        // Sealed under the derived primary, never the persistent SRK (TPMSession+Primary.swift).
        let blob = try TPMSession.with(tcti: tcti, startup: false) { session throws(TokenStoreError) -> TPMSealedBlob in
            let (primary, parentName) = try session.createPrimary()
            return try session.withTransient(primary) { primary throws(TokenStoreError) in
                let sealed = try session.seal(key, under: primary)
                return TPMSealedBlob(parentName: parentName, publicPart: sealed.public, privatePart: sealed.private)
            }
        }
        try keyring.storeItem(SecretBytes(blob.encoded), for: reference)
    }

    /// Deletes the sealed key's item (the TPM holds nothing to delete).
    public func deleteKey(_ reference: DataKeyReference) throws { try keyring.deleteKey(reference) }

    /// Whether the sealed key's item is present, locked or missing (the TPM is not asked).
    public func availability(of reference: DataKeyReference) throws -> DataKeyAvailability {
        try keyring.availability(of: reference)
    }

    /// The store's epoch, from the Secret Service (``SecretServiceKeyProvider/storeEpoch(storeID:)``).
    public func storeEpoch(storeID: String) throws -> UInt64 { try keyring.storeEpoch(storeID: storeID) }

    /// Raises the store's epoch in the Secret Service.
    public func raiseStoreEpoch(storeID: String, appID: String, to epoch: UInt64) throws {
        try keyring.raiseStoreEpoch(storeID: storeID, appID: appID, to: epoch)
    }

    /// Deletes the store's epoch from the Secret Service.
    public func deleteStoreEpoch(storeID: String) throws { try keyring.deleteStoreEpoch(storeID: storeID) }

    /// Whether a TPM answers at `tcti` and can make TokenStore's primary key, and if not why.
    /// Sends TPM2_CreatePrimary and a flush (TPM2_Startup first only when the TPM asks for it);
    /// seals nothing.
    /// A device TCTI is also asked its manufacturer (one TPM2_GetCapability more) to
    /// tell a software TPM behind it (``TPMAvailability/simulator``).
    public static func probe(tcti: String = environmentTCTI()) -> TPMAvailability {
        let device = TPMIdentity.isKernelDevice(tcti)
        do {
            let simulator = try TPMSession.with(tcti: tcti, startup: false) { session throws(TokenStoreError) -> Bool in
                let (primary, _) = try session.createPrimary()
                session.flush(primary)
                return device ? try session.identity().isSimulatorManufacturer : true
            }
            return TPMAvailability(tcti: tcti, available: true, reason: "", simulator: simulator)
        } catch {
            return .unavailable(tcti: tcti, reason: error.message)
        }
    }

    /// This provider's TPM (``KeyProvider/tpmTCTI``).
    public var tpmTCTI: String? { tcti }

    /// TPM commands this process has sent so far (every provider and probe), for benchmarks.
    package static var commandCount: Int { TPMSession.commandCount }
}
