internal import CGIO
internal import CLibSecret
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Picks the key provider a store uses when the app names none.
///
/// Outside a sandbox: always the Secret Service (``SecretServiceKeyProvider``); nothing is
/// probed. Inside a Flatpak sandbox (the file `/.flatpak-info` exists): the Secret Service
/// when its name is reachable on the session bus (the app was given
/// `--talk-name=org.freedesktop.secrets`), else the Secret portal (``PortalKeyProvider``),
/// as libsecret itself does in a sandbox. A store that records its key provider (schema
/// version 10, ``KeyProviderKind``) keeps it: `secret-service` is chosen without a probe, and
/// inside a sandbox `portal` too (so a sandboxed app whose Secret Service sometimes answers keeps
/// the provider that made its key). The portal is still never chosen outside a sandbox (the
/// host's portal secret is shared by every host app), nor the passphrase provider (it needs the
/// passphrase): for such a record the choice above is made and the open says `wrongKeyProvider`.
public enum KeyProviderSelection {
    /// The file a Flatpak sandbox has at its root, and xdg-desktop-portal reads the app id from.
    public static let sandboxMarker = "/.flatpak-info"
    /// The Secret Service's well-known bus name.
    static let secretServiceName = "org.freedesktop.secrets"

    /// Whether this process runs in a Flatpak sandbox (`marker` exists).
    public static func isSandboxed(marker: String = sandboxMarker) -> Bool {
        var info = stat()
        return lstat(marker, &info) == 0
    }

    /// The provider for the store at `storePath`, chosen as described above.
    /// - Parameters:
    ///   - storePath: the store's database file, whose recorded key provider is kept.
    ///   - probeTimeout: the bound of the bus question asked inside a sandbox.
    public static func automatic(storePath: String, probeTimeout: Duration = .seconds(3)) -> any KeyProvider {
        automatic(storePath: storePath, probeTimeout: probeTimeout, sandboxed: isSandboxed())
    }

    /// The choice above, with `sandboxed` given (tests choose as inside a sandbox this way).
    static func automatic(storePath: String, probeTimeout: Duration, sandboxed: Bool) -> any KeyProvider {
        automatic(storePath: storePath, recorded: { KeyProviderRecord.recorded(atPath: storePath) }, probeTimeout: probeTimeout, sandboxed: sandboxed)
    }

    /// The choice above, the store's recorded provider read by `recorded` (nil: no store, or it
    /// records none) only inside a sandbox: outside one the record changes nothing (the Secret
    /// Service either way), and no database connection is opened to read it. The open passes
    /// a read on the connection it checks the file with, instead of a connection of its own.
    static func automatic(
        storePath: String, recorded: () -> KeyProviderKind?, probeTimeout: Duration = .seconds(3), sandboxed: Bool = isSandboxed()
    ) -> any KeyProvider {
        guard sandboxed else { return SecretServiceKeyProvider() }
        switch recorded() {
        case .secretService?: return SecretServiceKeyProvider()
        case .portal? where sandboxed: return PortalKeyProvider(storePath: storePath)
        default: break
        }
        return secretServiceReachable(timeout: probeTimeout) ? SecretServiceKeyProvider() : PortalKeyProvider(storePath: storePath)
    }

    /// Whether the session bus can reach `org.freedesktop.secrets`: a process owns the name,
    /// or the bus can start one. No bus, no answer in time, or a bus filter (a Flatpak's
    /// `xdg-dbus-proxy`) that hides the name all count as unreachable. Starts nothing.
    public static func secretServiceReachable(timeout: Duration = .seconds(3)) -> Bool {
        let milliseconds = Int32(clamping: timeout.wholeMilliseconds)
        let answer = try? GLibWorkerThread.run("secret service probe", timeout: timeout) { cancellable throws(TokenStoreError) -> Bool in
            var error: UnsafeMutablePointer<GError>?
            guard let bus = g_bus_get_sync(G_BUS_TYPE_SESSION, cancellable.pointer, &error) else {
                if let error { g_error_free(error) }
                return false
            }
            defer { g_object_unref(UnsafeMutableRawPointer(bus)) }
            if ask(bus, "NameHasOwner", argument: secretServiceName, milliseconds, cancellable) { return true }
            return ask(bus, "ListActivatableNames", argument: nil, milliseconds, cancellable)
        }
        return answer ?? false
    }

    /// `NameHasOwner(name)` → its boolean; `ListActivatableNames()` → whether it lists the name.
    private static func ask(
        _ bus: OpaquePointer, _ method: String, argument: String?, _ milliseconds: Int32, _ cancellable: GLibCancellable
    ) -> Bool {
        var error: UnsafeMutablePointer<GError>?
        var children = argument.map { [g_variant_new_string($0)] } ?? []
        let parameters = children.withUnsafeMutableBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) }
        guard let reply = g_dbus_connection_call_sync(
            bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", method, parameters, nil,
            G_DBUS_CALL_FLAGS_NO_AUTO_START, milliseconds, cancellable.pointer, &error)
        else {
            if let error { g_error_free(error) }
            return false
        }
        defer { g_variant_unref(reply) }
        let value = g_variant_get_child_value(reply, 0)
        defer { g_variant_unref(value) }
        let type = String(cString: g_variant_get_type_string(value))
        if type == "b" { return g_variant_get_boolean(value) != 0 }
        guard type == "as" else { return false }
        for index in 0..<g_variant_n_children(value) {
            let name = g_variant_get_child_value(value, index)
            defer { g_variant_unref(name) }
            if String(cString: g_variant_get_string(name, nil)) == secretServiceName { return true }
        }
        return false
    }
}
