import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// tpm2-abrmd, Debian's TPM access broker and resource manager, in front of a TPM (a
/// ``SoftwareTPM`` or a ``TPMRelay`` to one), on this process's D-Bus session bus under a name of
/// its own. Each client connection gets transient objects of its own, swapped out of the TPM
/// after every command and dropped when the connection closes: what the kernel's `/dev/tpmrm0`
/// does for every desktop, which a test here cannot have (no TPM device, no `tpm_vtpm_proxy`).
///
/// ```swift
/// let manager = try TPMResourceManager.start(tcti: relay.tcti)
/// let key = try TPMSigningKey.create(tcti: manager.tcti)
/// ```
public final class TPMResourceManager: @unchecked Sendable {  // immutable after init; stop() is idempotent through ChildProcess
    /// The TCTI configuration reaching the TPM through the manager (`tabrmd:…`).
    public let tcti: String
    private let process: ChildProcess

    /// Whether tpm2-abrmd and its TCTI are installed (scripts/install-deps installs them).
    public static var isInstalled: Bool {
        let libraries: [String] = ["/usr/lib/x86_64-linux-gnu/libtss2-tcti-tabrmd.so.0", "/usr/lib/aarch64-linux-gnu/libtss2-tcti-tabrmd.so.0"]
        return access("/usr/sbin/tpm2-abrmd", X_OK) == 0 && libraries.contains { access($0, R_OK) == 0 }
    }

    /// Starts tpm2-abrmd in front of the TPM `tcti` names, flushing what the TPM holds first.
    /// - Throws: ``SoftwareTPM/Unavailable`` when it is not installed or there is no session bus;
    ///   ``StandInFailed`` when it exits or has not taken its bus name within 10 s.
    public static func start(tcti upstream: String) throws -> TPMResourceManager {
        guard isInstalled else { throw SoftwareTPM.Unavailable(description: "tpm2-abrmd is not installed (run scripts/install-deps)") }
        guard let address = ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] else {
            throw SoftwareTPM.Unavailable(description: "tpm2-abrmd needs a session bus (run inside scripts/with-keyring)")
        }
        let name = "com.intel.tss2.Tabrmd.T" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        var arguments = ["--session", "--dbus-name=\(name)", "--tcti=\(upstream)", "--flush-all"]
        if getuid() == 0 { arguments.append("--allow-root") }  // CI's container runs as root
        let process = try ChildProcess.start("/usr/sbin/tpm2-abrmd", arguments, standardOutput: .discard, standardError: .capture)
        do {
            try PrivateBus.waitUntil("tpm2-abrmd did not take its bus name: \(String(decoding: process.captured("stderr"), as: UTF8.self))", timeout: .seconds(10)) {
                if process.poll() != nil { throw StandInFailed(what: "tpm2-abrmd exited: \(String(decoding: process.captured("stderr"), as: UTF8.self))") }
                return try PrivateBus.nameHasOwner(name, bus: .session, environment: ["DBUS_SESSION_BUS_ADDRESS": address])
            }
        } catch {
            _ = process.stop()
            throw error
        }
        return TPMResourceManager(tcti: "tabrmd:bus_name=\(name),bus_type=session", process: process)
    }

    private init(tcti: String, process: ChildProcess) {
        self.tcti = tcti
        self.process = process
    }

    deinit { _ = process.stop() }

    /// Stops the manager.
    public func stop() { _ = process.stop() }
}
