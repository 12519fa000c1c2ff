import Foundation

/// A persistent key at the storage root key's handle (0x81000001) of a ``SoftwareTPM``, made with
/// tpm2-tools as a machine's owner makes it (systemd-tpm2-setup at boot, or by hand):
/// `tpm2_createprimary`, `tpm2_evictcontrol`, then `tpm2_flushcontext -t` (swtpm has no resource
/// manager: the tools' transient copy would stay loaded). TokenStore itself never makes or evicts
/// a persistent key; only tests and the benchmark do, here.
///
/// ```swift
/// let name = try PersistentSRK.provision(tpm)          // the TCG SRK template: TokenStore's primary
/// let other = try PersistentSRK.provision(tpm, .endorsementECC)  // same template, another seed
/// ```
public enum PersistentSRK {
    /// The handle systemd and tpm2-tools keep the SRK at.
    public static let handle = "0x81000001"

    /// What to make persistent at ``handle``.
    public enum Kind: Sendable {
        /// The TCG "SRK" template in the owner hierarchy, as systemd makes it: ECC P-256,
        /// AES-128-CFB, restricted decrypt, fixedTPM, fixedParent, sensitiveDataOrigin,
        /// userWithAuth, noDA, no unique data. The key TokenStore's TPM2_CreatePrimary derives.
        case storageRootKey
        /// The same template in the endorsement hierarchy: every field of its public area is the
        /// SRK template's, but it is derived from another seed (another key, another Name).
        case endorsementECC
        /// An RSA 2048 storage key in the owner hierarchy.
        case ownerRSA
        /// The SRK template with a password on the key (its public area, so its Name, is the SRK's;
        /// loading under it with the empty password fails).
        case storageRootKeyWithPassword
    }

    /// Makes `kind` persistent at ``handle`` (evicting whatever is there first) and returns its
    /// TPM Name (`tpm2_readpublic -n`). Leaves no transient object loaded.
    /// - Throws: ``SoftwareTPM/Unavailable`` when a tool fails (tpm2-tools missing or refused).
    @discardableResult
    public static func provision(_ tpm: SoftwareTPM, _ kind: Kind = .storageRootKey) throws -> [UInt8] {
        try provision(tcti: tpm.tcti, kind)
    }

    /// ``provision(_:_:)`` for the TPM `tcti` names (tokenbench: scripts/with-swtpm's).
    @discardableResult
    public static func provision(tcti: String, _ kind: Kind = .storageRootKey) throws -> [UInt8] {
        let directory = try TemporaryDirectory(prefix: "tokenstore-srk")
        let context = directory.appending("primary.ctx").path
        if try persistentHandles(tcti: tcti).contains(handle) { try remove(tcti: tcti) }
        let attributes = "fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|restricted|decrypt"
        var arguments = ["-T", tcti, "-g", "sha256", "-a", attributes, "-c", context]
        switch kind {
        case .storageRootKey: arguments += ["-C", "o", "-G", "ecc256:aes128cfb"]
        case .endorsementECC: arguments += ["-C", "e", "-G", "ecc256:aes128cfb"]
        case .ownerRSA: arguments += ["-C", "o", "-G", "rsa2048:aes128cfb"]
        case .storageRootKeyWithPassword: arguments += ["-C", "o", "-G", "ecc256:aes128cfb", "-p", "srk-password"]
        }
        try tool("tpm2_createprimary", arguments)
        try tool("tpm2_evictcontrol", ["-T", tcti, "-C", "o", "-c", context, handle])
        try tool("tpm2_flushcontext", ["-T", tcti, "-t"])
        return try name(tcti: tcti)
    }

    /// The Name of the key at ``handle`` (`tpm2_readpublic -n`).
    public static func name(_ tpm: SoftwareTPM) throws -> [UInt8] { try name(tcti: tpm.tcti) }

    /// The Name of the key at ``handle`` of the TPM `tcti` names.
    public static func name(tcti: String) throws -> [UInt8] {
        let directory = try TemporaryDirectory(prefix: "tokenstore-srk")
        let file = directory.appending("name.bin").path
        try tool("tpm2_readpublic", ["-T", tcti, "-c", handle, "-n", file])
        guard let bytes = FileManager.default.contents(atPath: file) else {
            throw SoftwareTPM.Unavailable(description: "tpm2_readpublic wrote no name")
        }
        return Array(bytes)
    }

    /// Evicts the key at ``handle`` (`tpm2_evictcontrol` of the persistent handle).
    public static func remove(_ tpm: SoftwareTPM) throws { try remove(tcti: tpm.tcti) }

    /// Evicts the key at ``handle`` of the TPM `tcti` names.
    public static func remove(tcti: String) throws {
        try tool("tpm2_evictcontrol", ["-T", tcti, "-C", "o", "-c", handle])
    }

    /// The persistent handles the TPM holds now (`tpm2_getcap handles-persistent`).
    public static func persistentHandles(_ tpm: SoftwareTPM) throws -> [String] { try persistentHandles(tcti: tpm.tcti) }

    /// The persistent handles the TPM `tcti` names holds now.
    public static func persistentHandles(tcti: String) throws -> [String] {
        let result = try ChildProcess.run("tpm2_getcap", ["-T", tcti, "handles-persistent"], timeout: .seconds(30))
        guard result.termination.code == 0 else { throw SoftwareTPM.Unavailable(description: "tpm2_getcap: \(result.standardErrorText)") }
        return result.standardOutputText.split(separator: "\n").compactMap { line in
            line.split(separator: " ").last.map(String.init).flatMap { $0.hasPrefix("0x81") ? $0 : nil }
        }
    }

    private static func tool(_ program: String, _ arguments: [String]) throws {
        let result = try ChildProcess.run(program, arguments, timeout: .seconds(60))
        guard result.termination.code == 0 else {
            throw SoftwareTPM.Unavailable(description: "\(program) failed: \(result.standardErrorText)")
        }
    }
}
