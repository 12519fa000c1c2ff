internal import CTSS2

/// Which TPM a TCTI reaches, as far as the tier needs it: a TPM the kernel serves (a chip or the
/// firmware's) is the `hardware` tier; a software TPM is `softwareTPM`. Decided by the TCTI
/// first (only the kernel's device, `device:` or the default `/dev/tpmrm0`, can be hardware:
/// swtpm, mssim, tabrmd, cmd and every other TCTI may put anything behind it), then, for a
/// device, by what the TPM reports: libtpms (swtpm, and the virtual TPM QEMU gives a guest
/// through swtpm) says manufacturer `IBM`, vendor `SW   TPM`.
struct TPMIdentity: Sendable, Equatable, CustomStringConvertible {
    /// TPM2_PT_MANUFACTURER as text, trimmed ("IBM", "IFX", "NTC", "AMD", "INTC", "MSFT").
    let manufacturer: String
    /// TPM2_PT_VENDOR_STRING_1..4 as text, trimmed ("SW   TPM" for libtpms).
    let vendor: String

    var description: String { "manufacturer \(manufacturer), vendor \(vendor)" }

    /// Whether the manufacturer or vendor is a software TPM's: libtpms (swtpm) or IBM's simulator
    /// both say manufacturer "IBM" and vendor "SW TPM"; no TPM chip or firmware TPM of a PC does.
    var isSimulatorManufacturer: Bool {
        manufacturer == "IBM" || vendor.split(separator: " ").joined(separator: " ") == "SW TPM"
    }

    /// The module part of a TCTI configuration (`device` of `device:/dev/tpmrm0`).
    static func module(of tcti: String) -> Substring {
        tcti.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
    }

    /// Whether `tcti` is the kernel's TPM device (`device`, `device:PATH`, or that TCTI's library by name).
    static func isKernelDevice(_ tcti: String) -> Bool {
        ["device", "libtss2-tcti-device.so.0", "libtss2-tcti-device.so"].contains(module(of: tcti))
    }

    /// Whether `tcti` reaches the TPM through a resource manager: the kernel's (`device:/dev/tpmrmN`)
    /// or tpm2-abrmd's (`tabrmd`). Each connection then has transient objects of its own, which
    /// the resource manager flushes when the connection closes, even when the process dies
    /// (the kernel at the descriptor's release, tpm2-abrmd at the client's disconnect); swtpm,
    /// mssim and `/dev/tpm0` keep an object until it is flushed or the TPM restarts.
    static func isResourceManaged(_ tcti: String) -> Bool {
        let module = module(of: tcti)
        if ["tabrmd", "libtss2-tcti-tabrmd.so.0", "libtss2-tcti-tabrmd.so"].contains(module) { return true }
        guard isKernelDevice(tcti), let path = tcti.split(separator: ":", maxSplits: 1).dropFirst().first else { return false }
        let name = path.split(separator: "/").last ?? ""
        return path.hasPrefix("/dev/") && name.hasPrefix("tpmrm") && name.dropFirst(5).allSatisfy(\.isNumber) && name.count > 5
    }

    /// Whether `tcti` names its module by a path: the TCTI loader would `dlopen` that file.
    static func namesAPath(_ tcti: String) -> Bool { module(of: tcti).contains("/") }

    /// What the TPM at `tcti` reports (one session: TPM2_Startup, TPM2_GetCapability).
    /// - Throws: `tpmUnavailable`.
    static func read(tcti: String) throws(TokenStoreError) -> TPMIdentity {
        try TPMSession.with(tcti: tcti) { session throws(TokenStoreError) in try session.identity() }
    }

    /// Whether the TPM at `tcti` is a software TPM: by the TCTI, else (a device) by what it
    /// reports, asked once per device and process.
    /// - Throws: `tpmUnavailable` when a device must be asked and does not answer.
    static func isSimulator(tcti: String) throws(TokenStoreError) -> Bool {
        guard isKernelDevice(tcti) else { return true }
        if let known = devices.withLock({ $0[tcti] }) { return known }
        let simulator = try read(tcti: tcti).isSimulatorManufacturer
        devices.withLock { $0[tcti] = simulator }
        return simulator
    }

    /// What each device TCTI asked in this process answered (the TPM behind a device does not change).
    private static let devices = Locked([String: Bool]())

    /// Four big-endian bytes of a TPM property as text, NULs and spaces trimmed.
    static func text(_ values: ArraySlice<UInt32>) -> String {
        let bytes = values.flatMap { value in (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) } }
        let printable = bytes.map { $0 >= 0x20 && $0 < 0x7F ? $0 : 0x20 }
        return String(decoding: printable, as: UTF8.self).trimmed(" ")
    }
}

extension TPMSession {
    /// TPM2_GetCapability of the manufacturer and vendor strings.
    func identity() throws(TokenStoreError) -> TPMIdentity {
        let esys = try context()
        var values = [UInt32](repeating: 0, count: 5)
        commands += 1
        var api = self.api
        let rc = values.withUnsafeMutableBufferPointer { tokenstore_tpm_read_vendor(&api, esys, $0.baseAddress) }
        guard rc == TSS2_RC_SUCCESS else { throw TPMDiagnosis.failed("TPM2_GetCapability", tcti: tcti, rc: rc) }
        return TPMIdentity(manufacturer: TPMIdentity.text(values[0..<1]), vendor: TPMIdentity.text(values[1..<5]))
    }
}

extension String {
    /// The string without `character` at either end.
    fileprivate func trimmed(_ character: Character) -> String {
        var slice = Substring(self)
        while slice.first == character { slice.removeFirst() }
        while slice.last == character { slice.removeLast() }
        return String(slice)
    }
}
