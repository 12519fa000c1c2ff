internal import CTSS2

/// The TPM's dictionary-attack state (TPM2_GetCapability of the TPM properties
/// TPM2_PT_LOCKOUT_COUNTER, TPM2_PT_MAX_AUTH_FAIL, TPM2_PT_LOCKOUT_INTERVAL,
/// TPM2_PT_LOCKOUT_RECOVERY), as read after a PIN was refused (and by `tokenctl status` for a store
/// with a TPM + PIN slot). Set by the TPM's owner; read only.
package struct TPMLockoutState: Equatable, Sendable {
    /// Authorization failures the TPM counts now (one less after each `interval` without a failure).
    package var counter: UInt32
    /// The failures that put the TPM into lockout.
    package var maxTries: UInt32
    /// Seconds after which the counter goes down by one; 0: only the lockout authorization ends a lockout.
    package var interval: UInt32
    /// Seconds before the lockout hierarchy may be tried again after a failure of its own.
    package var lockoutRecovery: UInt32

    /// The failures the TPM still allows before it locks out.
    package var triesLeft: Int { max(0, Int(maxTries) - Int(counter)) }

    /// Whether the counter has reached the limit.
    package var isLockedOut: Bool { counter >= maxTries }

    /// The longest wait until the TPM accepts an authorization again: enough intervals to bring
    /// the counter below the limit (the TPM does not say how far into the current one it is, so
    /// the wait may end up to one interval sooner). Nil when the TPM never recovers by itself.
    package var recoveryTime: Duration? {
        guard interval > 0 else { return nil }
        let intervals = max(1, Int(counter) - Int(maxTries) + 1)
        return .seconds(intervals * Int(interval))
    }
}

extension TPMSession {
    /// TPM2_Create of a sealed data object holding `data` under `parent` with the authValue `auth`,
    /// subject to the TPM's dictionary-attack protection (``tokenstore_tpm_sealed_pin_template``), the
    /// data and the authValue encrypted on the way in (a salted session).
    func seal(_ data: SecretBytes, auth: SecretBytes, under parent: Object) throws(TokenStoreError) -> (public: [UInt8], private: [UInt8]) {
        var template = TPM2B_PUBLIC()
        tokenstore_tpm_sealed_pin_template(&template)
        var sensitive = TPM2B_SENSITIVE_CREATE()
        defer { tokenstore_tpm_wipe(&sensitive, MemoryLayout<TPM2B_SENSITIVE_CREATE>.size) }
        let filled = data.withUnsafeBytes { bytes in
            auth.withUnsafeBytes { authBytes in
                tokenstore_tpm_sensitive_auth(
                    &sensitive, bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count,
                    authBytes.bindMemory(to: UInt8.self).baseAddress, authBytes.count)
            }
        }
        guard filled == 0 else { throw TokenStoreError(.invalidInput, "The data to seal is too long for the TPM.") }
        return try create(&template, &sensitive, under: parent)
    }

    /// TPM2_Unseal of a loaded PIN-protected object with the authValue `auth`, in a session salted to
    /// `salt` that encrypts the answer.
    /// - Throws: `wrongPIN` with the tries the TPM still allows (the TPM counted the failure),
    ///   `tpmLockedOut` with the time until it recovers; other failures as ``unseal(_:salt:)``.
    func unseal(_ object: Object, auth: SecretBytes, salt: Object) throws(TokenStoreError) -> SecretBytes {
        let esys = try context()
        var value = TPM2B_AUTH()
        defer { tokenstore_tpm_wipe(&value, MemoryLayout<TPM2B_AUTH>.size) }
        let filled = auth.withUnsafeBytes { tokenstore_tpm_auth(&value, $0.bindMemory(to: UInt8.self).baseAddress, $0.count) }
        guard filled == 0 else { throw TokenStoreError(.invalidInput, "The PIN's authorization value is too long for the TPM.") }
        let set = api.esys_tr_set_auth(esys, object.handle, &value)
        guard set == TSS2_RC_SUCCESS else { throw TPMDiagnosis.failed("setting the PIN's authorization", tcti: tcti, rc: set) }
        return try withEncryptedSession(salt: salt) { session throws(TokenStoreError) in
            try unseal(object, session: session) { rc in
                guard let refusal = TPMPINRefusal(rc: rc) else { return nil }
                let state = try? lockoutState()
                return refusal == .lockout
                    ? TPMDiagnosis.lockedOut(tcti: tcti, state: state, rc: rc) : TPMDiagnosis.wrongPIN(tcti: tcti, state: state, rc: rc)
            }
        }
    }

    /// The TPM's dictionary-attack state (one TPM2_GetCapability).
    func lockoutState() throws(TokenStoreError) -> TPMLockoutState {
        let esys = try context()
        var values = [UInt32](repeating: 0, count: 4)
        commands += 1
        var api = self.api
        let rc = values.withUnsafeMutableBufferPointer { tokenstore_tpm_read_lockout(&api, esys, $0.baseAddress) }
        guard rc == TSS2_RC_SUCCESS else { throw TPMDiagnosis.failed("TPM2_GetCapability", tcti: tcti, rc: rc) }
        return TPMLockoutState(counter: values[0], maxTries: values[1], interval: values[2], lockoutRecovery: values[3])
    }
}

/// How the TPM refused a PIN-protected object's authorization.
enum TPMPINRefusal: Equatable {
    /// TPM_RC_AUTH_FAIL (format 1, any session number): the HMAC did not match, the failure counted.
    case wrongAuth
    /// TPM_RC_LOCKOUT (a warning): the TPM is in dictionary-attack lockout.
    case lockout

    init?(rc: TSS2_RC) {
        guard rc != 0, rc & 0xFFFF_F000 == 0 else { return nil }  // a TSS layer's error, not the TPM's answer
        if rc & 0xFFF == 0x921 {
            self = .lockout
        } else if rc & 0x80 != 0, rc & 0x3F == 0x0E {
            self = .wrongAuth
        } else {
            return nil
        }
    }
}
