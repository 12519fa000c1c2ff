internal import CTSS2

/// A DPoP (RFC 9449) ES256 key that lives inside this machine's TPM 2.0: the private key is made
/// by the TPM (TPM2_Create, sensitiveDataOrigin) and never leaves it; every signature is a
/// TPM2_Sign. A copy of the user's files — the store, the keyring, this key's blob — signs
/// nothing on another machine.
///
/// The key is an unrestricted ECC P-256 signing key (scheme ECDSA SHA-256; fixedTPM,
/// fixedParent, userWithAuth with an empty password, noDA, no PCR policy) made under the same
/// owner-hierarchy primary key ``TPMKeyProvider`` derives (TPM2_CreatePrimary with the same
/// template: the same key each time on the same TPM, nothing persistent). What the caller keeps
/// is the blob ``create(tcti:)`` returns (`TPMSealedBlob`, magic `TSDK`: the primary's
/// name, the key's TPM2B_PUBLIC, and its TPM2B_PRIVATE, which the TPM encrypted under the
/// primary); the session layer keeps it sealed in the store.
///
/// **Cached** (computed once, in ``create(tcti:)`` or ``load(blob:tcti:)``,
/// from the public area's x and y, with no TPM command): ``publicJWK`` and ``thumbprint``.
/// **Per proof**: SHA-256 of the message outside the TPM, then one TPM session. The first proof
/// of a process with a key (``commandsPerFirstProof``: TPM2_Startup, TPM2_CreatePrimary,
/// TPM2_Load, a flush of the primary, TPM2_ContextSave of the key, TPM2_Sign, a flush of the key)
/// keeps the key's saved context in memory (encrypted by the TPM, loadable only by it and only
/// until it restarts); every later proof is ``commandsPerProof`` commands: TPM2_ContextLoad,
/// TPM2_Sign, a flush (no TPM2_Startup: the TPM answers TPM_RC_INITIALIZE if it restarted, and
/// then gets it; a context it refuses is replaced by loading the key from its blob again).
///
/// **One TPM connection per proof, none held between proofs.** A TPM without a resource manager
/// (swtpm over TCP, `/dev/tpm0`) has 3 object slots and serves one connection at a time: a key
/// that kept its connection (and its loaded object) open would lock every other user of the TPM
/// out — this process's own store opens (``TPMKeyProvider``), `tokenctl`, another app — for as
/// long as it lives. So each signature opens the TCTI, loads the key, signs, flushes both
/// objects and closes (under ``TPMSession``'s process-wide lock, errors included). On a real
/// TPM behind `/dev/tpmrm0` the flush after a proof could be left to the resource manager (2
/// commands); swtpm and `/dev/tpm0` have none, so TokenStore always flushes.
///
/// Errors (as `DPoPSigningFailure.store`): no TPM answering is
/// `tpmUnavailable` with the reason; a blob made by another TPM (or altered) is `tpmMismatch`
/// naming the TPM. No text holds key material.
package final class TPMSigningKey: DPoPSigningKey {
    /// The TPM commands a signature sends once the key's context is saved in this process:
    /// TPM2_ContextLoad, TPM2_Sign, TPM2_FlushContext (for estimating a real TPM's cost per proof).
    package static let commandsPerProof = 3
    /// The TPM commands of the first signature with a key in a process: TPM2_Startup,
    /// TPM2_CreatePrimary, TPM2_Load, TPM2_FlushContext (the primary), TPM2_ContextSave,
    /// TPM2_Sign, TPM2_FlushContext (the key).
    package static let commandsPerFirstProof = 7

    /// The TCTI configuration of the TPM holding the key (as ``TPMKeyProvider/tcti``).
    package let tcti: String
    /// The public key, its JWK and thumbprint, from the key's public area. Cached.
    package let publicKey: DPoPPublicKey
    private let blob: TPMSealedBlob

    /// Inside the TPM.
    package var residence: DPoPKeyResidence { .tpm }

    /// Makes a new signing key in the TPM `tcti` names (TPM2_Startup, TPM2_CreatePrimary,
    /// TPM2_StartAuthSession, TPM2_Create in that salted, encrypting session, one flush).
    /// - Returns: the key, and the blob to keep (nothing in it is the private key in clear).
    /// - Throws: `tpmUnavailable` (no TPM answers; a TPM error).
    package static func create(
        tcti: String
    ) throws(TokenStoreError) -> (key: TPMSigningKey, blob: [UInt8]) {
        let blob = try TPMSession.with(tcti: tcti) { session throws(TokenStoreError) -> TPMSealedBlob in
            let (primary, parentName) = try session.createPrimary()
            return try session.withTransient(primary) { primary throws(TokenStoreError) in
                let made = try session.createSigningKey(under: primary)
                return TPMSealedBlob(kind: .signingKey, parentName: parentName, publicPart: made.public, privatePart: made.private)
            }
        }
        return (try TPMSigningKey(blob: blob, tcti: tcti), blob.encoded)
    }

    /// The key a blob from ``create(tcti:)`` holds, for the TPM `tcti` names. Sends no
    /// TPM command: the blob is read and its public area checked here; the TPM first sees it at
    /// the first signature (a blob made by another TPM is `tpmMismatch` then).
    /// - Throws: `dataKeyCorrupt` (not such a blob, or not a P-256 ECDSA signing key),
    ///   `integrityCheckFailed` (a part is not a TPM object), `tpmUnavailable` (no tpm2-tss).
    package static func load(
        blob: [UInt8], tcti: String
    ) throws(TokenStoreError) -> TPMSigningKey {
        try TPMSigningKey(blob: TPMSealedBlob(decoding: blob, kind: .signingKey), tcti: tcti)
    }

    private init(blob: TPMSealedBlob, tcti: String) throws(TokenStoreError) {
        let api = try TSS2Library.loaded().api
        var area = try TPMMarshal.unmarshalPublic(blob.publicPart, api)
        _ = try TPMMarshal.unmarshalPrivate(blob.privatePart, api)
        var x = [UInt8](repeating: 0, count: 32)
        var y = [UInt8](repeating: 0, count: 32)
        let read = x.withUnsafeMutableBufferPointer { x in
            y.withUnsafeMutableBufferPointer { y in tokenstore_tpm_signing_point(&area, x.baseAddress, y.baseAddress) }
        }
        guard read == 0 else {
            throw TokenStoreError(
                .dataKeyCorrupt, "The TPM-resident DPoP key's public part is not a P-256 ECDSA signing key; nothing was changed.")
        }
        self.blob = blob
        self.tcti = tcti
        publicKey = DPoPPublicKey(point: [0x04] + x + y)
    }

    /// The ES256 signature of `message`: SHA-256 here, TPM2_Sign in the TPM; r‖s, 64 bytes.
    /// - Throws: `.store` with `tpmUnavailable` or `tpmMismatch` (see the type's doc).
    package func signES256(_ message: [UInt8]) throws(DPoPSigningFailure) -> [UInt8] {
        let digest = SHA256Digest.hash(message)
        let blob = blob
        let tcti = tcti
        let slot = SavedContexts.Slot(tcti: tcti, blob: blob.encoded)
        let saved = SavedContexts.shared.context(for: slot)
        do {
            return try TPMSession.with(tcti: tcti, startup: saved == nil) { session throws(TokenStoreError) -> [UInt8] in
                if let saved {
                    var loaded = try session.loadContext(saved)
                    if case .restarted = loaded {
                        try session.startup()
                        loaded = try session.loadContext(saved)
                    }
                    if case .loaded(let key) = loaded {
                        return try session.withTransient(key) { key throws(TokenStoreError) in try session.sign(digest: digest, with: key) }
                    }
                    SavedContexts.shared.forget(slot)  // the TPM restarted since: load the key anew
                }
                let (primary, parentName) = try session.createPrimary()
                let key = try session.withTransient(primary) { primary throws(TokenStoreError) -> TPMSession.Object in
                    guard parentName == blob.parentName else {
                        throw TPMDiagnosis.mismatch(tcti: tcti, detail: "the primary key's name differs", subject: Self.subject)
                    }
                    return try session.load(public: blob.publicPart, private: blob.privatePart, under: primary, subject: Self.subject)
                }  // the primary is flushed before signing: one object slot in use, not two
                return try session.withTransient(key) { key throws(TokenStoreError) in
                    SavedContexts.shared.keep(try session.saveContext(key), for: slot)
                    return try session.sign(digest: digest, with: key)
                }
            }
        } catch {
            throw .store(error)
        }
    }

    private static let subject = "This DPoP key was made"
}
