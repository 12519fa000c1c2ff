import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// When the user last proved their presence for a store (``AccessPolicy/userPresence(_:)``),
/// measured on `CLOCK_BOOTTIME` (it counts suspend, and no one but root can move it).
///
/// - **This process**: one proof per store (by store id), shared by every store object of that
///   store in the process; it ends with the process. `.appLifecycle(seconds:)` counts only it.
/// - **This login session**: `.session(seconds:)` also records the proof in
///   `$XDG_RUNTIME_DIR/tokenstore/presence-<store id>` (the user's tmpfs directory, 0700, removed
///   by logind when the user's last session ends), with the boot's id and a MAC under the store's
///   data key, so other processes of the session (`tokenctl`, a second instance of the app) are
///   not asked again within the window. Only a process that can open the store's key can make
///   one, and such a process can read the store anyway. Without `XDG_RUNTIME_DIR` the proof
///   stays in the process.
///
/// `.always` uses neither: each authorization lets one read through (``StoreConnection/presenceTicket``).
enum PresenceProofs {
    private static let inProcess = Mutex<[[UInt8]: UInt64]>([:])

    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    /// Whether a proof made at `at` still holds for a window of `seconds`, at `now`.
    static func holds(_ at: UInt64, seconds: Int, now: UInt64) -> Bool {
        at <= now && now - at < UInt64(seconds) * 1_000_000_000
    }

    /// Records a proof made now in this process.
    static func record(storeID: [UInt8], at time: UInt64) {
        inProcess.withLock { $0[storeID] = time }
    }

    /// This process's last proof for the store.
    static func inProcessProof(storeID: [UInt8]) -> UInt64? {
        inProcess.withLock { $0[storeID] }
    }

    /// Forgets every proof of the store: this process's, and the session's file (a lock ends
    /// the window).
    static func forget(storeID: [UInt8]) {
        _ = inProcess.withLock { $0.removeValue(forKey: storeID) }
        if let path = filePath(storeID: storeID) { unlink(path) }
    }

    // MARK: - The login session's proof

    private static func filePath(storeID: [UInt8]) -> String? {
        guard let directory = runtimeDirectory() else { return nil }
        return directory + "/presence-" + Hex.encode(storeID)
    }

    /// `$XDG_RUNTIME_DIR/tokenstore`, made 0700 when missing; nil when there is no runtime
    /// directory, or it or the folder is not this user's private directory.
    private static func runtimeDirectory() -> String? {
        guard let base = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), base.hasPrefix("/") else { return nil }
        let directory = base + "/tokenstore"
        mkdir(directory, 0o700)
        var info = stat()
        guard lstat(directory, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == getuid(),
            info.st_mode & 0o077 == 0
        else { return nil }
        return directory
    }

    /// This boot's id; nil when it cannot be read (no session proof is then made or taken).
    private static func bootID() -> String? {
        let descriptor = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = read(descriptor, &buffer, buffer.count)
        guard count > 0 else { return nil }
        let id = String(decoding: buffer[..<count], as: UTF8.self).filter { !$0.isWhitespace }
        return id.isEmpty ? nil : id
    }

    private static func mac(_ envelope: Envelope, boot: String, time: UInt64) -> [UInt8] {
        envelope.mac(.presenceProofMAC, [MACField.name("presence"), envelope.storeID, Array(boot.utf8), MACField.int(Int64(bitPattern: time))])
    }

    /// The session's proof for the store, when its file is there, of this boot, and its MAC
    /// holds under `envelope`; else nil.
    static func sessionProof(_ envelope: Envelope) -> UInt64? {
        guard let path = filePath(storeID: envelope.storeID) else { return nil }
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = read(descriptor, &buffer, buffer.count)
        guard count > 0 else { return nil }
        let fields = String(decoding: buffer[..<count], as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard fields.count == 4, fields[0] == "v1", let boot = bootID(), String(fields[1]) == boot, let time = UInt64(fields[2]),
            let stored = Hex.decode(String(fields[3])),
            MACField.equal(stored, mac(envelope, boot: String(fields[1]), time: time))
        else { return nil }
        return time
    }

    /// Records a proof made at `time` for the session (written to a temporary file, then renamed).
    static func recordForSession(_ envelope: Envelope, at time: UInt64) {
        guard let path = filePath(storeID: envelope.storeID), let boot = bootID() else { return }
        let text = "v1 \(boot) \(time) \(Hex.encode(mac(envelope, boot: boot, time: time)))\n"
        let temporary = path + ".\(getpid()).tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return }
        let written = text.utf8CString.withUnsafeBufferPointer { write(descriptor, $0.baseAddress, $0.count - 1) }
        close(descriptor)
        if written == text.utf8.count, rename(temporary, path) == 0 { return }
        unlink(temporary)
    }
}
