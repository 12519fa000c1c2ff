internal import CTSS2

/// The primary key a sealed object loads under: the machine's persistent storage root key when
/// it is there and is TokenStore's primary, else the primary derived again.
///
/// TokenStore's primary template (``tokenstore_tpm_primary_template``) is the TCG's ECC P-256
/// "SRK" template, which systemd (`systemd-tpm2-setup`, ≥ 253) and tpm2-tools provision
/// persistently at 0x81000001 (``tokenstore_tpm_srk_handle``). A primary key is derived from the
/// hierarchy's seed and the template alone, so such a persistent key made from the same template
/// in the owner hierarchy *is* the key TPM2_CreatePrimary derives: the same Name, and every object
/// sealed under one loads under the other. An open reads the persistent key's public area
/// (TPM2_ReadPublic: microseconds) instead of deriving the key (TPM2_CreatePrimary: an ECC key
/// generation, 50–200 ms on a discrete TPM), and uses it only when its Name is the one the
/// sealed blob records (``TPMSealedBlob/parentName``): an absent handle, another key there, or a
/// key there that refuses the load (an SRK given a password) falls back to TPM2_CreatePrimary,
/// silently (a debug log line, no identifier).
///
/// Sealing (``TPMKeyProvider/storeKey(_:for:)``, a PIN slot's wrap) keeps TPM2_CreatePrimary:
/// only a key derived from the owner seed is sure to be there again when the persistent handle is
/// gone (its owner may evict it any day), and a public area that looks like the template's does
/// not prove that (a key of the endorsement hierarchy, or one made with unique data or a password,
/// can sit at 0x81000001 with the same template fields). Sealing is rare (a store's first open, a
/// key rotation, a new slot); the opens, which are not, get the persistent key.
///
/// The persistent key is never flushed, and TokenStore never creates or evicts persistent objects:
/// they are the machine owner's (systemd makes the SRK at boot).
extension TPMSession {
    /// The owner's storage root key at ``tokenstore_tpm_srk_handle`` (one TPM2_ReadPublic, through
    /// Esys_TR_FromTPMPublic), when it is there and its Name is `name`; else nil (absent, or
    /// another key: the caller derives the primary instead). The Name compared is the one
    /// Esys_TR_GetName computes from the public area ESYS keeps (tpm2-tss 3.2: nameAlg + SHA-256 of
    /// the marshalled TPMT_PUBLIC, not the Name field of the answer), the public key the unseal's
    /// session is then salted to: an answer with this Name and another key does not pass.
    /// Not a transient object: never flushed; ``forget(_:)`` drops ESYS's record of it.
    /// - Throws: `tpmUnavailable` only when nothing answered (a TCTI failure).
    func persistentPrimary(named name: [UInt8], logger: TokenStoreLogger) throws(TokenStoreError) -> Object? {
        let esys = try context()
        var handle: ESYS_TR = tokenstore_esys_tr_none
        let rc = try startingIfAsked("TPM2_ReadPublic") {
            commands += 1
            return api.esys_tr_from_tpm_public(
                esys, tokenstore_tpm_srk_handle, tokenstore_esys_tr_none, tokenstore_esys_tr_none, tokenstore_esys_tr_none, &handle)
        }
        guard rc == TSS2_RC_SUCCESS else {
            logger.debug("no persistent storage root key: deriving the TPM primary key", metadata: ["tpm.rc": "0x\(String(rc, radix: 16))"])
            return nil
        }
        let object = Object(handle: handle)
        let found: [UInt8]
        do {
            found = try self.name(of: object)
        } catch {
            forget(object)
            logger.debug("the persistent storage root key's name is unreadable: deriving the TPM primary key")
            return nil
        }
        guard found == name else {
            forget(object)
            logger.debug("the persistent storage root key is not the one this key was sealed under: deriving the TPM primary key")
            return nil
        }
        return object
    }

    /// Drops ESYS's record of a persistent object (Esys_TR_Close: no TPM command; the object stays).
    func forget(_ object: Object) {
        guard let esys = try? context() else { return }
        var handle = object.handle
        _ = api.esys_tr_close(esys, &handle)
    }

    /// Loads `blob` (a sealed data key, a PIN slot's object) under its primary key, runs `body` with
    /// the loaded object and that primary (the key to salt a session to), then flushes the object,
    /// and the primary when it was derived for this call (never the persistent one).
    ///
    /// With the persistent SRK (``persistentPrimary(named:logger:)``): TPM2_ReadPublic, TPM2_Load,
    /// what `body` sends, one flush. Without: TPM2_ReadPublic, TPM2_CreatePrimary, TPM2_Load, what
    /// `body` sends, two flushes. A session opened with `startup: false` gets TPM2_Startup first
    /// only when the TPM asks for it (``startingIfAsked(_:_:)``).
    /// - Throws: `tpmMismatch` (the derived primary is not the blob's: another TPM, or a cleared
    ///   one; or the TPM refuses the blob), `tpmUnavailable`, `integrityCheckFailed`, and what
    ///   `body` throws.
    func withLoaded<R>(
        _ blob: TPMSealedBlob, subject: String = "This store's data key was sealed", logger: TokenStoreLogger = .disabled,
        _ body: (_ object: Object, _ primary: Object) throws(TokenStoreError) -> R
    ) throws(TokenStoreError) -> R {
        if let srk = try persistentPrimary(named: blob.parentName, logger: logger) {
            defer { forget(srk) }
            // A refusal here (the SRK has a password, …) is not the blob's fault: the derived
            // primary decides, and names a real mismatch.
            let object: Object
            do {
                object = try load(public: blob.publicPart, private: blob.privatePart, under: srk, subject: subject)
            } catch {
                logger.debug(
                    "the persistent storage root key refused the sealed object: deriving the TPM primary key",
                    metadata: ["error.code": error.code.rawValue])
                return try withDerivedPrimary(blob, subject: subject, body)
            }
            return try withTransient(object) { object throws(TokenStoreError) in try body(object, srk) }
        }
        return try withDerivedPrimary(blob, subject: subject, body)
    }

    /// ``withLoaded(_:subject:logger:_:)`` under the primary TPM2_CreatePrimary derives (flushed after).
    private func withDerivedPrimary<R>(
        _ blob: TPMSealedBlob, subject: String, _ body: (_ object: Object, _ primary: Object) throws(TokenStoreError) -> R
    ) throws(TokenStoreError) -> R {
        let (primary, parentName) = try createPrimary()
        return try withTransient(primary) { primary throws(TokenStoreError) -> R in
            guard parentName == blob.parentName else {
                throw TPMDiagnosis.mismatch(tcti: tcti, detail: "the primary key's name differs", subject: subject)
            }
            let object = try load(public: blob.publicPart, private: blob.privatePart, under: primary, subject: subject)
            return try withTransient(object) { object throws(TokenStoreError) in try body(object, primary) }
        }
    }
}
