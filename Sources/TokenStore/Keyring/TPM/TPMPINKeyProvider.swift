import FoundationEssentials
internal import CTSS2

/// Opens a store with a **TPM + PIN key slot**: the data key sealed by this machine's TPM in an
/// object whose authorization value is derived from a PIN, kept in the store's `key_slots` row.
/// Both the TPM and the PIN are needed, and the TPM itself limits the guesses: the object is
/// subject to its dictionary-attack protection (not `noDA`), so after the owner's number of wrong
/// PINs (`TPM2_PT_MAX_AUTH_FAIL`) the TPM refuses every PIN, the right one too, until it recovers.
///
/// - The TPM never sees the PIN: the authorization value is keyed BLAKE2b-256 of the store's id
///   and the slot's key id under the PIN, so one PIN gives unrelated values for two stores.
/// - Sealing (TPM2_Create) and unsealing (TPM2_Unseal) run in HMAC sessions salted to the primary
///   key with AES-128-CFB parameter encryption, as ``TPMKeyProvider``'s; the authorization value
///   crosses the interface only as an HMAC key.
/// - A wrong PIN is `wrongPIN`, its ``TokenStoreError/pinTriesLeft`` the wrong PINs the TPM still
///   allows (`TPM2_PT_MAX_AUTH_FAIL` − `TPM2_PT_LOCKOUT_COUNTER`); a TPM in lockout is
///   `tpmLockedOut`, its ``TokenStoreError/lockoutRecovery`` the longest wait
///   (`TPM2_PT_LOCKOUT_INTERVAL` per failure over the limit). Nothing is changed by either.
/// - The TPM's lockout parameters belong to its owner: this library reads them, never sets them.
///
/// Like ``RecoveryKeyProvider`` it holds no store epoch (0) and does not make a store: add it to
/// an open one.
///
/// ```swift
/// try store.addKeySlot(TPMPINKeyProvider(pin: SecretBytes(utf8: "4821")))
/// let again = try TokenStore(path: path, appID: "com.example.app", keyProvider: TPMPINKeyProvider(pin: typed))
/// ```
public struct TPMPINKeyProvider: KeyProvider, InStoreKeySlotProvider {
    public var name: String { KeyProviderKind.tpmPIN.rawValue }
    /// The TCTI configuration of the TPM used (as ``TPMKeyProvider/tcti``).
    public let tcti: String
    let pin: SecretBytes
    /// Which primary key an unseal used, at debug level, no identifier (as ``TPMKeyProvider/logger``).
    package var logger: TokenStoreLogger = .disabled

    /// The shortest and longest PIN, in bytes.
    public static let pinLengths = 4...64

    /// A provider for `pin` (its bytes, e.g. UTF-8 digits) and the TPM `tcti` names (by default
    /// `$TOKENSTORE_TPM_TCTI`, else `device:/dev/tpmrm0`).
    public init(pin: SecretBytes, tcti: String? = nil) {
        self.pin = pin
        self.tcti = tcti ?? TPMKeyProvider.environmentTCTI()
    }

    var slotNoun: String { "a TPM PIN key slot" }

    /// The dictionary-attack counter and settings of the TPM `tcti` names (one
    /// TPM2_GetCapability on a new connection; no PIN is tried, nothing changes): what
    /// `tokenctl status` shows for a store with a TPM + PIN slot.
    /// - Throws: `tpmUnavailable` (no TPM answers there), `tpmMismatch`.
    package static func lockoutState(tcti: String) throws -> TPMLockoutState {
        try TPMSession.with(tcti: tcti) { session throws(TokenStoreError) in try session.lockoutState() }
    }

    /// The object's authorization value: keyed BLAKE2b-256 under the PIN of the slot's identity.
    func authValue(_ reference: DataKeyReference) throws(TokenStoreError) -> SecretBytes {
        guard Self.pinLengths.contains(pin.count) else {
            throw TokenStoreError(
                .invalidInput, "A TPM PIN must be \(Self.pinLengths.lowerBound)–\(Self.pinLengths.upperBound) bytes, not \(pin.count).")
        }
        let context = Array("tokenstore/tpm-pin/v1\u{0}\(reference.storeID)\u{0}\(reference.keyID)".utf8)
        var digest = pin.withUnsafeBytes { Blake2b.digest(context, key: $0, length: 32) }
        defer { for index in digest.indices { digest[index] = 0 } }
        return SecretBytes(digest)
    }

    /// The data key sealed by the TPM under the PIN's authorization value, as a ``TPMSealedBlob``.
    func wrap(_ key: SecretBytes, reference: DataKeyReference) throws -> [UInt8] {
        guard key.count == SecretServiceKeyProvider.keyLength else {
            throw TokenStoreError(.invalidInput, "A data key must be \(SecretServiceKeyProvider.keyLength) bytes, not \(key.count).")
        }
        let auth = try authValue(reference)
        // Sealed under the derived primary, never the persistent SRK (TPMSession+Primary.swift).
        let blob = try TPMSession.with(tcti: tcti, startup: false) { session throws(TokenStoreError) -> TPMSealedBlob in
            let (primary, parentName) = try session.createPrimary()
            return try session.withTransient(primary) { primary throws(TokenStoreError) in
                let sealed = try session.seal(key, auth: auth, under: primary)
                return TPMSealedBlob(parentName: parentName, publicPart: sealed.public, privatePart: sealed.private)
            }
        }
        return blob.encoded
    }

    /// The data key unsealed with the PIN.
    /// - Throws: `wrongPIN`, `tpmLockedOut`, `tpmMismatch` (sealed by another TPM), `tpmUnavailable`,
    ///   `dataKeyCorrupt`, `invalidInput` (a PIN of the wrong length: the TPM is not asked).
    func unwrap(_ blob: [UInt8], reference: DataKeyReference) throws -> SecretBytes {
        let sealedBlob = try TPMSealedBlob(decoding: blob)
        let auth = try authValue(reference)
        let logger = logger
        let key = try TPMSession.with(tcti: tcti, startup: false) { session throws(TokenStoreError) -> SecretBytes in
            try session.withLoaded(sealedBlob, logger: logger) { sealed, primary throws(TokenStoreError) in
                try session.unseal(sealed, auth: auth, salt: primary)
            }
        }
        guard key.count == SecretServiceKeyProvider.keyLength else {
            throw TokenStoreError(.dataKeyCorrupt, "The TPM unsealed \(key.count) bytes, not a data key; nothing was changed.")
        }
        return key
    }

    public func loadKey(_ reference: DataKeyReference) throws -> SecretBytes? {
        throw TokenStoreError(.invalidInput, "A TPM PIN opens a store through its key slot, not by reference.")
    }

    public func storeKey(_ key: SecretBytes, for reference: DataKeyReference) throws {
        throw TokenStoreError(.invalidInput, "A TPM PIN does not make a store: add its slot to an open store (addKeySlot).")
    }

    /// Nothing to delete outside the database (the TPM keeps no object).
    public func deleteKey(_ reference: DataKeyReference) throws {}

    public func availability(of reference: DataKeyReference) throws -> DataKeyAvailability { .present }

    public func storeEpoch(storeID: String) throws -> UInt64 { 0 }

    public func raiseStoreEpoch(storeID: String, appID: String, to epoch: UInt64) throws {}

    public func deleteStoreEpoch(storeID: String) throws {}

    /// This provider's TPM (``KeyProvider/tpmTCTI``).
    public var tpmTCTI: String? { tcti }
}

extension TPMDiagnosis {
    /// A wrong PIN (TPM_RC_AUTH_FAIL): the TPM counted it; `state` says how many more it allows.
    static func wrongPIN(tcti: String, state: TPMLockoutState?, rc: TSS2_RC) -> TokenStoreError {
        let left = state?.triesLeft
        let tpm = naming(tcti).capitalizedFirstLetter
        let tries: String
        switch left {
        case nil: tries = "\(tpm) counted the failure towards its dictionary-attack lockout."
        case 0?: tries = "\(tpm) is now in dictionary-attack lockout: it refuses every PIN until it recovers."
        case 1?: tries = "\(tpm) allows 1 more wrong PIN before it locks out."
        case let count?: tries = "\(tpm) allows \(count) more wrong PINs before it locks out."
        }
        return TokenStoreError(
            .wrongPIN, "The PIN does not open this store's TPM PIN key slot; nothing was changed. " + tries,
            hint: "Check the PIN and try again; after too many wrong PINs the TPM refuses every PIN for a while.",
            cause: .other(decode(rc)), pinTriesLeft: left, lockoutRecovery: nil)
    }

    /// TPM_RC_LOCKOUT: the TPM refuses every PIN until it recovers.
    static func lockedOut(tcti: String, state: TPMLockoutState?, rc: TSS2_RC) -> TokenStoreError {
        let wait = state?.recoveryTime
        let when = wait.map { "It accepts a PIN again within \($0.components.seconds) s." }
            ?? "It does not recover by itself: only its lockout authorization ends the lockout."
        return TokenStoreError(
            .tpmLockedOut,
            "\(naming(tcti).capitalizedFirstLetter) is in dictionary-attack lockout after too many wrong PINs and refused the PIN "
                + "(the right one too). \(when) Nothing was changed; the store's data is intact.",
            hint: wait == nil
                ? "Have the TPM's owner end the lockout (tpm2_dictionarylockout -c with its lockout authorization), or open the "
                    + "store with another key slot."
                : "Wait, then try the PIN again, or open the store with another key slot; the store's data is intact.",
            cause: .other(decode(rc)), pinTriesLeft: 0, lockoutRecovery: wait)
    }
}

extension String {
    fileprivate var capitalizedFirstLetter: String { prefix(1).uppercased() + dropFirst() }
}
