internal import CTSS2

/// The package's door to a signing key that lives inside this machine's TPM 2.0 (the
/// TPM-resident DPoP key: AuthSession's `TPMSigningKey` wraps it): make one, read its public
/// point, sign a digest with it. The private key is made by the TPM (TPM2_Create,
/// sensitiveDataOrigin) and never leaves it; every signature is a TPM2_Sign. A copy of the user's
/// files — the store, the keyring, this key's blob — signs nothing on another machine.
///
/// The key is an unrestricted ECC P-256 signing key (scheme ECDSA SHA-256; fixedTPM,
/// fixedParent, userWithAuth with an empty password, noDA, no PCR policy) made under the same
/// owner-hierarchy primary key ``TPMKeyProvider`` derives (TPM2_CreatePrimary with the same
/// template: the same key each time on the same TPM, nothing persistent). What the caller keeps
/// is the blob ``createKey(tcti:)`` returns (`TPMSealedBlob`, magic `TSDK`: the primary's
/// name, the key's TPM2B_PUBLIC, and its TPM2B_PRIVATE, which the TPM encrypted under the
/// primary); the session layer keeps it sealed in the store.
///
/// **No TPM command**: ``publicPoint(blob:)`` reads the point from the blob's public area.
/// **Per signature**: one TPM session. The first signature of a process with a key
/// (``commandsPerFirstProof``: TPM2_ReadPublic of the persistent SRK, TPM2_CreatePrimary,
/// TPM2_Load, TPM2_ContextSave of the key, TPM2_Sign, flushes of the key and the primary;
/// ``commandsPerFirstProofThroughSRK`` when the machine's persistent SRK is the key's parent:
/// no derivation and no flush of it, see `TPMSession+Primary.swift`) keeps the key's saved
/// context in memory (``SavedContexts``: encrypted by the TPM, loadable only by it and only until
/// it restarts); every later signature is ``commandsPerProof`` commands: TPM2_ContextLoad,
/// TPM2_Sign, a flush (no TPM2_Startup: the TPM answers TPM_RC_INITIALIZE if it restarted, and
/// then gets it; a context it refuses is replaced by loading the key from its blob again).
///
/// **One TPM connection per signature, none held between them.** A TPM without a resource
/// manager (swtpm over TCP, `/dev/tpm0`) has 3 object slots and serves one connection at a time:
/// a key that kept its connection (and its loaded object) open would lock every other user of the
/// TPM out — this process's own store opens (``TPMKeyProvider``), `tokenctl`, another app — for
/// as long as it lives. So each signature opens the TCTI, loads the key, signs, flushes both
/// objects and closes (under ``TPMSession``'s process-wide lock, errors included). Behind a
/// resource manager (`/dev/tpmrm0`, as on every desktop, or tpm2-abrmd) a later signature leaves
/// the flush to it (``commandsPerProofBehindResourceManager``); swtpm and `/dev/tpm0` have none,
/// so there TokenStore flushes.
///
/// Errors: no TPM answering is `tpmUnavailable` with the reason; a blob made by another TPM (or
/// altered) is `tpmMismatch` naming the TPM. No text holds key material.
package enum TPMSigningDoor {
    /// The TPM commands a signature sends once the key's context is saved in this process:
    /// TPM2_ContextLoad, TPM2_Sign, TPM2_FlushContext (for estimating a real TPM's cost per proof).
    package static let commandsPerProof = 3
    /// As ``commandsPerProof`` behind a resource manager (`/dev/tpmrm0`, tpm2-abrmd:
    /// ``TPMIdentity/isResourceManaged(_:)``): TPM2_ContextLoad and TPM2_Sign. The loaded key is
    /// left to the resource manager, which swaps a connection's objects out of the TPM after
    /// each command and drops them when the connection closes (a crash included). A flush of
    /// TokenStore's own is one more round trip to it, and on the kernel's more TPM commands: it
    /// loads every context of the connection before each command it is sent (`tpm2-space.c`,
    /// `tpm2_load_space`), the one to be flushed too. (tpm2-abrmd drops a flushed object's saved
    /// context without a TPM command: 7 TPM commands a proof through it either way, swaps included.)
    package static let commandsPerProofBehindResourceManager = 2
    /// The TPM commands of the first signature with a key in a process, on a started TPM:
    /// TPM2_ReadPublic (no persistent SRK that is the key's parent), TPM2_CreatePrimary,
    /// TPM2_Load, TPM2_ContextSave, TPM2_Sign, two TPM2_FlushContext. TPM2_Startup is sent only
    /// when the TPM asks for it (two commands more: the refused one and the Startup).
    package static let commandsPerFirstProof = 7
    /// As ``commandsPerFirstProof`` when the persistent SRK is the key's parent: TPM2_ReadPublic,
    /// TPM2_Load, TPM2_ContextSave, TPM2_Sign, one TPM2_FlushContext.
    package static let commandsPerFirstProofThroughSRK = 5

    /// Makes a new signing key in the TPM `tcti` names (TPM2_Startup, TPM2_CreatePrimary,
    /// TPM2_StartAuthSession, TPM2_Create in that salted, encrypting session, one flush).
    /// - Returns: the blob to keep (nothing in it is the private key in clear) and the key's
    ///   public point, uncompressed (0x04 ‖ x ‖ y, 65 bytes).
    /// - Throws: `tpmUnavailable` (no TPM answers; a TPM error).
    package static func createKey(tcti: String) throws(TokenStoreError) -> (blob: [UInt8], publicPoint: [UInt8]) {
        let blob = try TPMSession.with(tcti: tcti) { session throws(TokenStoreError) -> TPMSealedBlob in
            let (primary, parentName) = try session.createPrimary()
            return try session.withTransient(primary) { primary throws(TokenStoreError) in
                let made = try session.createSigningKey(under: primary)
                return TPMSealedBlob(kind: .signingKey, parentName: parentName, publicPart: made.public, privatePart: made.private)
            }
        }
        return (blob.encoded, try publicPoint(of: blob))
    }

    /// The public point (uncompressed, 65 bytes) of the key a blob from ``createKey(tcti:)``
    /// holds. Sends no TPM command: the blob is read and its public area checked here; the TPM
    /// first sees it at the first signature (a blob made by another TPM is `tpmMismatch` then).
    /// - Throws: `dataKeyCorrupt` (not such a blob, or not a P-256 ECDSA signing key),
    ///   `integrityCheckFailed` (a part is not a TPM object), `tpmUnavailable` (no tpm2-tss).
    package static func publicPoint(blob: [UInt8]) throws(TokenStoreError) -> [UInt8] {
        try publicPoint(of: TPMSealedBlob(decoding: blob, kind: .signingKey))
    }

    private static func publicPoint(of blob: TPMSealedBlob) throws(TokenStoreError) -> [UInt8] {
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
        return [0x04] + x + y
    }

    /// TPM2_Sign of a SHA-256 `digest` (32 bytes) with the key `blob` holds, in the TPM `tcti`
    /// names. The caller has read the blob with ``publicPoint(blob:)``.
    /// - Returns: r‖s, 64 bytes (not DER).
    /// - Throws: `tpmUnavailable` or `tpmMismatch` (see the type's doc), `dataKeyCorrupt` (not a
    ///   signing key's blob).
    package static func sign(digest: [UInt8], blob encoded: [UInt8], tcti: String) throws(TokenStoreError) -> [UInt8] {
        let blob = try TPMSealedBlob(decoding: encoded, kind: .signingKey)
        let slot = SavedContexts.Slot(tcti: tcti, blob: blob.encoded)
        let saved = SavedContexts.shared.context(for: slot)
        return try TPMSession.with(tcti: tcti, startup: false) { session throws(TokenStoreError) -> [UInt8] in
            if let saved {
                var loaded = try session.loadContext(saved)
                if case .restarted = loaded {
                    try session.startup()
                    loaded = try session.loadContext(saved)
                }
                if case .loaded(let key) = loaded {
                    // Behind a resource manager the connection's objects go with it: no flush.
                    if TPMIdentity.isResourceManaged(tcti) { return try session.sign(digest: digest, with: key) }
                    return try session.withTransient(key) { key throws(TokenStoreError) in try session.sign(digest: digest, with: key) }
                }
                SavedContexts.shared.forget(slot)  // the TPM restarted since: load the key anew
            }
            // Under the persistent SRK when it is the key's parent, else the derived primary.
            return try session.withLoaded(blob, subject: subject) { key, _ throws(TokenStoreError) in
                SavedContexts.shared.keep(try session.saveContext(key), for: slot)
                return try session.sign(digest: digest, with: key)
            }
        }
    }

    private static let subject = "This DPoP key was made"
}
