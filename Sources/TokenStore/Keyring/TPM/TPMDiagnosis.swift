internal import CTSS2
#if canImport(Glibc)
import Glibc
#endif

/// The typed errors of the TPM parts (``TPMSession``, ``TPMKeyProvider``): each names the TPM
/// (its TCTI configuration, which holds a device path or a loopback host and port, never an
/// identifier of the user) and the reason it could not be used.
enum TPMDiagnosis {
    /// The TCTI the provider uses when `TOKENSTORE_TPM_TCTI` is not set.
    static let defaultTCTI = "device:/dev/tpmrm0"

    /// "the TPM at device:/dev/tpmrm0".
    static func naming(_ tcti: String) -> String { "the TPM at \(KeyProviderKind.clipped(tcti))" }

    /// tpm2-tss's text for a response code (Tss2_RC_Decode), e.g. "tcti:IO failure".
    static func decode(_ rc: TSS2_RC) -> String {
        guard case .success(let library) = TSS2Library.shared, let text = library.api.rc_decode(rc) else { return "0x\(String(rc, radix: 16))" }
        return "\(String(cString: text)) (0x\(String(rc, radix: 16)))"
    }

    /// No usable TPM at `tcti`: the device is missing or not ours to open, or nothing answers.
    static func unavailable(tcti: String, rc: TSS2_RC, step: String) -> TokenStoreError {
        TokenStoreError(
            .tpmUnavailable, "No usable TPM: \(naming(tcti)) \(reason(tcti: tcti, rc: rc, step: step)).",
            hint: hint(tcti), cause: .other(decode(rc)))
    }

    /// Whether `rc` is the TCTI's (the connection to the TPM failed: nothing answered), not the TPM's.
    static func isTCTIFailure(_ rc: TSS2_RC) -> Bool { rc & tokenstore_rc_layer_mask == 0x000A_0000 }  // TSS2_TCTI_RC_LAYER

    /// A TPM command that failed after the TPM answered.
    static func failed(_ command: String, tcti: String, rc: TSS2_RC) -> TokenStoreError {
        TokenStoreError(
            .tpmUnavailable, "\(naming(tcti).capitalizedFirst) cannot be used: \(command) failed: \(decode(rc)).",
            hint: hint(tcti), cause: .other(decode(rc)))
    }

    /// A TCTI whose module part is a path (`/usr/lib/x.so:…`): the loader would `dlopen` it.
    static func pathRefused(tcti: String) -> TokenStoreError {
        TokenStoreError(
            .tpmUnavailable,
            "No usable TPM: the TCTI \(KeyProviderKind.clipped(tcti)) names its module by a path, which would load "
                + "that file as a library; refused, nothing was loaded.",
            hint: "Name a TCTI module, not a file: device:/dev/tpmrm0 (the kernel's TPM), swtpm:host=…,port=…, mssim:…, tabrmd:….")
    }

    /// What an answer to an owner-authorized command (TPM2_CreatePrimary in the owner hierarchy,
    /// with the empty password) means, when it is about the authorization: the owner hierarchy
    /// has a password (TPM_RC_BAD_AUTH, TPM_RC_AUTH_FAIL for the session) or the TPM is in
    /// dictionary-attack lockout (TPM_RC_LOCKOUT); nil for any other answer.
    static func ownerAuthorization(rc: TSS2_RC) -> String? {
        guard rc & 0xFFFF_F000 == 0 else { return nil }  // a TSS layer's error, not the TPM's answer
        if rc & 0xFFF == 0x921 { return "the TPM is in dictionary-attack lockout" }
        let formatOne = rc & 0x80 != 0
        if formatOne && [0x22, 0x0E].contains(rc & 0x3F) { return "the TPM's owner hierarchy has a password" }
        return nil
    }

    /// TPM2_CreatePrimary refused for the owner hierarchy's authorization (`what` says which).
    static func ownerRefused(tcti: String, what: String, rc: TSS2_RC) -> TokenStoreError {
        let lockout = what.contains("lockout")
        return TokenStoreError(
            .tpmUnavailable,
            "\(naming(tcti).capitalizedFirst) refused to make TokenStore's primary key: \(what) "
                + "(TPM2_CreatePrimary: \(decode(rc))). TokenStore uses the owner hierarchy with the empty password, "
                + "as a desktop's TPM has it; nothing was changed.",
            hint: lockout
                ? "Wait for the TPM's lockout to end (its recovery time), or have whoever holds the lockout password "
                    + "reset it (tpm2_dictionarylockout -c); the store opens again as it was."
                : "Whoever set the owner password (an administrator, tpm2-tools, another OS, or any user with access "
                    + "to the TPM) can remove it (tpm2_changeauth -c owner -p OLD); the store opens again as it was.",
            cause: .other(decode(rc)))
    }

    /// The sealed key was made by another TPM (or this TPM's owner seed was cleared since).
    /// `subject` says what was made ("This store's data key was sealed", "This DPoP key was made").
    static func mismatch(tcti: String, detail: String, subject: String = "This store's data key was sealed") -> TokenStoreError {
        let dataKey = subject.hasPrefix("This store")
        return TokenStoreError(
            .tpmMismatch,
            "\(subject) by another TPM than \(naming(tcti)) (or that TPM was cleared since, "
                + "or the \(dataKey ? "sealed key" : "key's blob") was altered); nothing was changed.",
            hint: dataKey
                ? "Open the store on the machine (or with the TOKENSTORE_TPM_TCTI) whose TPM sealed it; the same files open again there."
                : "Use the key on the machine (or with the TOKENSTORE_TPM_TCTI) whose TPM made it.",
            cause: .other(detail))
    }

    /// Why `tcti` gave no TPM, in words: the device's state for a device TCTI, else the answer.
    static func reason(tcti: String, rc: TSS2_RC, step: String) -> String {
        if let path = devicePath(tcti) {
            if access(path, F_OK) != 0 { return "does not exist (no TPM device: no TPM, or a container without it)" }
            if access(path, R_OK | W_OK) != 0 {
                return "cannot be opened: permission denied (the device belongs to group 'tss': join it, or add a uaccess rule)"
            }
            return "did not answer (\(step): \(decode(rc)))"
        }
        return "did not answer (\(step): \(decode(rc)))"
    }

    /// The device path of a `device:` TCTI (the default one when it names none), else nil.
    static func devicePath(_ tcti: String) -> String? {
        if tcti == "device" { return "/dev/tpmrm0" }
        guard tcti.hasPrefix("device:") else { return nil }
        let path = String(tcti.dropFirst("device:".count))
        return path.isEmpty ? "/dev/tpmrm0" : path
    }

    private static func hint(_ tcti: String) -> String {
        devicePath(tcti) != nil
            ? "Check that the machine has a TPM 2.0 and that you may open \(devicePath(tcti) ?? ""); TOKENSTORE_TPM_TCTI chooses another TCTI."
            : "Check that the TPM named by TOKENSTORE_TPM_TCTI is running and reachable."
    }
}

extension String {
    fileprivate var capitalizedFirst: String { prefix(1).uppercased() + dropFirst() }
}
