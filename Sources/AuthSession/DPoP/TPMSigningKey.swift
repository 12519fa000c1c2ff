import TokenStore

/// A DPoP (RFC 9449) ES256 key that lives inside this machine's TPM 2.0, behind TokenStore's
/// ``TPMSigningDoor``: the private key is made by the TPM and never leaves it; every signature
/// is a TPM2_Sign on a TPM connection of its own (the door's doc says which commands, and why
/// none is held between proofs). A copy of the user's files — the store, the keyring, this key's
/// blob — signs nothing on another machine. What the caller keeps is the blob ``create(tcti:)``
/// returns; the session layer keeps it sealed in the store.
///
/// **Cached** (computed once, in ``create(tcti:)`` or ``load(blob:tcti:)``, from the public
/// area's x and y, with no TPM command): ``publicJWK`` and ``thumbprint``.
/// **Per proof**: SHA-256 of the message outside the TPM, then one TPM session:
/// ``TPMSigningDoor/commandsPerFirstProof`` commands the first time in a process,
/// ``TPMSigningDoor/commandsPerProof`` after.
///
/// Errors (as `DPoPSigningFailure.store`): no TPM answering is `tpmUnavailable` with the reason;
/// a blob made by another TPM (or altered) is `tpmMismatch` naming the TPM. No text holds key
/// material.
package final class TPMSigningKey: DPoPSigningKey {
    /// The TCTI configuration of the TPM holding the key (as `TPMKeyProvider.tcti`).
    package let tcti: String
    /// The public key, its JWK and thumbprint, from the key's public area. Cached.
    package let publicKey: DPoPPublicKey
    private let blob: [UInt8]

    /// Inside the TPM.
    package var residence: DPoPKeyResidence { .tpm }

    /// Makes a new signing key in the TPM `tcti` names (``TPMSigningDoor/createKey(tcti:)``).
    /// - Returns: the key, and the blob to keep (nothing in it is the private key in clear).
    /// - Throws: `tpmUnavailable` (no TPM answers; a TPM error).
    package static func create(tcti: String) throws(TokenStoreError) -> (key: TPMSigningKey, blob: [UInt8]) {
        let made = try TPMSigningDoor.createKey(tcti: tcti)
        return (TPMSigningKey(blob: made.blob, point: made.publicPoint, tcti: tcti), made.blob)
    }

    /// The key a blob from ``create(tcti:)`` holds, for the TPM `tcti` names. Sends no
    /// TPM command: the blob is read and its public area checked here; the TPM first sees it at
    /// the first signature (a blob made by another TPM is `tpmMismatch` then).
    /// - Throws: `dataKeyCorrupt` (not such a blob, or not a P-256 ECDSA signing key),
    ///   `integrityCheckFailed` (a part is not a TPM object), `tpmUnavailable` (no tpm2-tss).
    package static func load(blob: [UInt8], tcti: String) throws(TokenStoreError) -> TPMSigningKey {
        TPMSigningKey(blob: blob, point: try TPMSigningDoor.publicPoint(blob: blob), tcti: tcti)
    }

    private init(blob: [UInt8], point: [UInt8], tcti: String) {
        self.blob = blob
        self.tcti = tcti
        publicKey = DPoPPublicKey(point: point)
    }

    /// The ES256 signature of `message`: SHA-256 here, TPM2_Sign in the TPM; r‖s, 64 bytes.
    /// - Throws: `.store` with `tpmUnavailable` or `tpmMismatch` (see the type's doc).
    package func signES256(_ message: [UInt8]) throws(DPoPSigningFailure) -> [UInt8] {
        do {
            return try TPMSigningDoor.sign(digest: SHA256Digest.hash(message), blob: blob, tcti: tcti)
        } catch {
            throw .store(error)
        }
    }
}
