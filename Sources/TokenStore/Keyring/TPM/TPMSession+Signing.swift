internal import CTSS2

extension TPMSession {
    /// TPM2_Create of a DPoP signing key under `parent`: ECC P-256, sign only, ECDSA SHA-256,
    /// fixedTPM, fixedParent, sensitiveDataOrigin (the TPM makes the private key and never lets
    /// it out), userWithAuth with an empty password, noDA.
    /// - Returns: the key's public and private parts, marshalled (TPM2B_PUBLIC, TPM2B_PRIVATE:
    ///   the private part is encrypted by the TPM under `parent`).
    func createSigningKey(under parent: Object) throws(TokenStoreError) -> (public: [UInt8], private: [UInt8]) {
        var template = TPM2B_PUBLIC()
        tokenstore_tpm_signing_template(&template)
        var sensitive = TPM2B_SENSITIVE_CREATE()
        return try create(&template, &sensitive, under: parent)
    }

    /// TPM2_Sign of a SHA-256 `digest` (32 bytes) with a loaded signing key, scheme ECDSA SHA-256,
    /// a null validation ticket (the key is unrestricted).
    /// - Returns: r‖s, each left-padded to 32 bytes (64 bytes, not DER).
    func sign(digest: [UInt8], with key: Object) throws(TokenStoreError) -> [UInt8] {
        guard digest.count == 32 else { throw TokenStoreError(.invalidInput, "A SHA-256 digest is 32 bytes, not \(digest.count).") }
        let esys = try context()
        var inDigest = TPM2B_DIGEST()
        var scheme = TPMT_SIG_SCHEME()
        var validation = TPMT_TK_HASHCHECK()
        digest.withUnsafeBufferPointer { tokenstore_tpm_sign_inputs($0.baseAddress, &inDigest, &scheme, &validation) }
        var signature: UnsafeMutablePointer<TPMT_SIGNATURE>?
        commands += 1
        let rc = api.esys_sign(
            esys, key.handle, tokenstore_esys_tr_password, tokenstore_esys_tr_none, tokenstore_esys_tr_none,
            &inDigest, &scheme, &validation, &signature)
        defer { if let signature { api.esys_free(signature) } }
        guard rc == TSS2_RC_SUCCESS, let signature else { throw TPMDiagnosis.failed("TPM2_Sign", tcti: tcti, rc: rc) }
        var raw = [UInt8](repeating: 0, count: 64)
        let converted = raw.withUnsafeMutableBufferPointer { tokenstore_tpm_ecdsa_rs(signature, $0.baseAddress) }
        guard converted == 0 else {
            throw TokenStoreError(.tpmUnavailable, "\(TPMDiagnosis.naming(tcti)) answered TPM2_Sign with a signature that is not ECDSA P-256.")
        }
        return raw
    }

    /// TPM2_ContextSave of a loaded object: its context, encrypted and integrity-protected by
    /// the TPM (only this TPM loads it again, and only until it restarts), as bytes.
    func saveContext(_ object: Object) throws(TokenStoreError) -> [UInt8] {
        let esys = try context()
        var saved: UnsafeMutablePointer<TPMS_CONTEXT>?
        commands += 1
        let rc = api.esys_context_save(esys, object.handle, &saved)
        defer { if let saved { api.esys_free(saved) } }
        guard rc == TSS2_RC_SUCCESS, let saved else { throw TPMDiagnosis.failed("TPM2_ContextSave", tcti: tcti, rc: rc) }
        return Array(UnsafeRawBufferPointer(start: saved, count: MemoryLayout<TPMS_CONTEXT>.size))
    }

    /// What TPM2_ContextLoad made of a saved context.
    enum LoadedContext {
        /// The object, loaded again (flush it).
        case loaded(Object)
        /// The TPM answered TPM_RC_INITIALIZE: it restarted and wants TPM2_Startup.
        case restarted
        /// The TPM refused it (restarted and started since, or another TPM): load the object anew.
        case refused
    }

    /// TPM2_ContextLoad of bytes ``saveContext(_:)`` returned.
    func loadContext(_ bytes: [UInt8]) throws(TokenStoreError) -> LoadedContext {
        guard bytes.count == MemoryLayout<TPMS_CONTEXT>.size else { return .refused }
        let esys = try context()
        var saved = TPMS_CONTEXT()
        bytes.withUnsafeBytes { source in withUnsafeMutableBytes(of: &saved) { $0.copyMemory(from: source) } }
        var handle: ESYS_TR = tokenstore_esys_tr_none
        commands += 1
        let rc = api.esys_context_load(esys, &saved, &handle)
        if rc == TSS2_RC_SUCCESS { return .loaded(Object(handle: handle)) }
        return rc == tokenstore_rc_initialize ? .restarted : .refused
    }
}
