internal import CGIO
internal import CLibSecret
import FoundationEssentials
import Glibc

/// Which program serves the key provider: for `tokenstore status`, error hints, and the few
/// places where Secret Services differ (see docs/providers.md).
///
/// For the Secret Service it is the process that owns `org.freedesktop.secrets` on the session
/// bus (`GetConnectionUnixProcessID`, then `/proc/PID/exe`, or `/proc/PID/comm` when the
/// executable link is not readable). The Secret Service API reports no version, so ``version``
/// is set only where the program's name tells it (kwalletd5, kwalletd6).
public struct KeyProviderIdentity: Sendable, Hashable {
    /// The provider's name: `gnome-keyring`, `KeePassXC`, `KWallet`, `passphrase`, or, for a
    /// Secret Service this code does not know, the owner's executable name (`unknown` when
    /// that cannot be read).
    public let name: String
    /// The version, when the provider tells it.
    public let version: String?
    /// The executable's file name (`gnome-keyring-daemon`, `keepassxc`, `kwalletd5`), when read.
    public let executable: String?

    public init(name: String, version: String? = nil, executable: String? = nil) {
        self.name = name
        self.version = version
        self.executable = executable
    }

    public static let gnomeKeyring = "gnome-keyring"
    public static let keePassXC = "KeePassXC"
    public static let kWallet = "KWallet"
    public static let passphrase = "passphrase"

    /// The passphrase provider (no daemon).
    public static let passphraseProvider = KeyProviderIdentity(name: passphrase)
    public static let portal = "portal"
    /// The Flatpak Secret portal's per-app secret (``PortalKeyProvider``; no daemon of ours to name).
    public static let portalProvider = KeyProviderIdentity(name: portal)

    /// `name` or `name version`.
    public var displayName: String { version.map { "\(name) \($0)" } ?? name }

    /// Names the provider from its executable's file name.
    static func identify(executable: String) -> KeyProviderIdentity {
        switch executable {
        case "gnome-keyring-daemon", "gnome-keyring-d":  // comm is cut at 15 characters
            return KeyProviderIdentity(name: gnomeKeyring, executable: executable)
        case "keepassxc", "KeePassXC":
            return KeyProviderIdentity(name: keePassXC, executable: executable)
        case "kwalletd5", "kwalletd6":
            return KeyProviderIdentity(name: kWallet, version: String(executable.suffix(1)), executable: executable)
        default:
            return KeyProviderIdentity(name: executable.isEmpty ? "unknown" : executable, executable: executable)
        }
    }

    /// The Secret Service running on the session bus now, or nil when nothing owns the name.
    /// Never starts anything: asking for the owner's pid does not activate a service.
    /// - Throws: ``TokenStoreError`` `secretServiceUnavailable` (no session bus), `timedOut`.
    public static func secretService(timeout: Duration = .seconds(5)) throws -> KeyProviderIdentity? {
        try GLibWorkerThread.run("identify provider", timeout: timeout) { cancellable throws(TokenStoreError) in
            try secretServiceNow(cancellable, operation: "identify provider")
        }
    }

    /// The owner of `org.freedesktop.secrets`, on the calling (worker) thread.
    static func secretServiceNow(
        _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) -> KeyProviderIdentity? {
        var error: UnsafeMutablePointer<GError>?
        guard let bus = g_bus_get_sync(G_BUS_TYPE_SESSION, cancellable.pointer, &error) else {
            if let error { throw GLibError.classify(error, operation: operation) }
            throw GLibError.unavailable(operation, nil)
        }
        defer { g_object_unref(UnsafeMutableRawPointer(bus)) }
        guard let pid = try ownerPID(bus, cancellable, operation: operation) else { return nil }
        if let path = readLink("/proc/\(pid)/exe") {
            // A replaced binary reads "/usr/bin/x (deleted)".
            let file = path.split(separator: "/").last.map(String.init) ?? path
            return identify(executable: file.hasSuffix(" (deleted)") ? String(file.dropLast(10)) : file)
        }
        if let comm = readSmallFile("/proc/\(pid)/comm") {
            return identify(executable: comm.split(separator: "\n").first.map(String.init) ?? "")
        }
        return KeyProviderIdentity(name: "unknown")
    }

    /// `org.freedesktop.DBus.GetConnectionUnixProcessID("org.freedesktop.secrets")`; nil when
    /// the name has no owner.
    static func ownerPID(
        _ bus: OpaquePointer, _ cancellable: GLibCancellable, operation: String
    ) throws(TokenStoreError) -> UInt32? {
        var error: UnsafeMutablePointer<GError>?
        var children: [OpaquePointer?] = [g_variant_new_string("org.freedesktop.secrets")]
        let parameters = children.withUnsafeMutableBufferPointer { g_variant_new_tuple($0.baseAddress, 1) }
        let reply = g_dbus_connection_call_sync(
            bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
            "GetConnectionUnixProcessID", parameters, nil, G_DBUS_CALL_FLAGS_NONE, -1,
            cancellable.pointer, &error)
        if let error {
            if error.pointee.domain == g_dbus_error_quark(),
                error.pointee.code == Int32(bitPattern: G_DBUS_ERROR_NAME_HAS_NO_OWNER.rawValue)
            {
                g_error_free(error)
                return nil
            }
            throw GLibError.classify(error, operation: operation)
        }
        guard let reply else { return nil }
        defer { g_variant_unref(reply) }
        guard g_variant_n_children(reply) == 1, let value = g_variant_get_child_value(reply, 0) else { return nil }
        defer { g_variant_unref(value) }
        guard g_variant_classify(value) == G_VARIANT_CLASS_UINT32 else { return nil }
        return g_variant_get_uint32(value)
    }

    private static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func readSmallFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = read(fd, &buffer, buffer.count)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count], as: UTF8.self)
    }
}
