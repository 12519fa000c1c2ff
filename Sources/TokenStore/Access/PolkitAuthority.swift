internal import CGIO
import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The user-presence check of ``AccessPolicy/userPresence(_:)``: one polkit
/// `org.freedesktop.PolicyKit1.Authority.CheckAuthorization` on the system bus, for this
/// process (`unix-process`: pid, start time, uid), the app's action (``actionID(appID:)``),
/// with `AllowUserInteraction`, so that polkit's authentication agent asks the user
/// (`auth_self`: the user's own password, or a fingerprint through PAM).
///
/// The call is synchronous on the calling thread, over a D-Bus connection of its own (not
/// GIO's shared one), with a time-out; the store calls it outside their transaction and
/// outside the store's lock, and the async store calls run it on ``BlockingExecutor`` (never on
/// the cooperative pool). A call that times out, or whose async store call is cancelled
/// (``PresenceCancellation``), is cancelled at polkit (`CancelCheckAuthorization` with the
/// cancellation id it was asked with), so the agent's dialog goes away.
enum PolkitAuthority {
    enum Answer: Equatable {
        /// polkit authorized the action (the user authenticated, or a rule said yes).
        case authorized
        /// Not authorized: the user dismissed the dialog or failed, a rule said no, or no agent
        /// could ask (`challenge`: polkit would have allowed it after authentication).
        case denied(challenge: Bool)
    }

    static let busName = "org.freedesktop.PolicyKit1"
    static let objectPath = "/org/freedesktop/PolicyKit1/Authority"
    static let interface = "org.freedesktop.PolicyKit1.Authority"

    /// The polkit action an app's store asks for: `<app id>.tokenstore.read`, the app id
    /// lowercased and every byte that polkit does not allow in an action id (anything but
    /// `a-z`, `0-9`, `.`, `-`) replaced by `-`. `com.Example.My_App` → `com.example.my-app.tokenstore.read`.
    /// Two app ids that differ only there share the action.
    static func actionID(appID: String) -> String {
        let mapped = appID.lowercased().unicodeScalars.map { scalar -> Character in
            switch scalar {
            case "a"..."z", "0"..."9", ".", "-": return Character(scalar)
            default: return "-"
            }
        }
        return String(mapped) + ".tokenstore.read"
    }

    private static let cancellationCounter = Atomic<UInt64>(0)

    /// Asks polkit whether this process may `actionID`, letting it ask the user.
    /// - Parameters:
    ///   - address: the system bus's address; nil: GIO's (`DBUS_SYSTEM_BUS_ADDRESS`, else the
    ///     system's socket).
    ///   - timeout: how long the user has to answer.
    /// - Throws: `lockSourceUnavailable` when no polkit answers on the system bus (no bus, or
    ///   nobody owns `org.freedesktop.PolicyKit1`); `timedOut` when polkit gave no answer in
    ///   time, `cancelled` when the thread's ``PresenceCancellation`` was cancelled (the check
    ///   is then cancelled at polkit).
    static func check(actionID: String, address: String?, timeout: Duration) throws -> Answer {
        let cancellation = PresenceCancellation.current
        if cancellation?.isCancelled == true { throw cancelled() }
        let connection = try connect(address)
        defer { g_object_unref(UnsafeMutableRawPointer(connection)) }
        let cancellationID = "tokenstore-\(getpid())-\(cancellationCounter.add(1, ordering: .relaxed).newValue)"
        let parameters = checkParameters(actionID: actionID, cancellationID: cancellationID)
        var error: UnsafeMutablePointer<GError>?
        let milliseconds = Int32(clamping: max(1, timeout.roundedUpMilliseconds))
        let reply = withVariantType("((bba{ss}))") { type in
            g_dbus_connection_call_sync(
                connection, busName, objectPath, interface, "CheckAuthorization", parameters, type, G_DBUS_CALL_FLAGS_NONE,
                milliseconds, cancellation?.cancellable.pointer, &error)
        }
        guard let reply else {
            let domain = error?.pointee.domain, code = error?.pointee.code ?? 0
            let message = error.map { String(cString: $0.pointee.message) } ?? "no reply"
            g_clear_error(&error)
            if domain == g_io_error_quark(), code == Int32(G_IO_ERROR_CANCELLED.rawValue) {
                cancel(connection, cancellationID)
                throw cancelled()
            }
            if domain == g_io_error_quark(), code == Int32(G_IO_ERROR_TIMED_OUT.rawValue) {
                cancel(connection, cancellationID)
                throw TokenStoreError(
                    .timedOut, "polkit did not answer the user-presence check in time (\(timeout)); nothing was read.",
                    hint: "Try again; the authentication dialog was dismissed.")
            }
            if domain == g_dbus_error_quark(),
                code == Int32(G_DBUS_ERROR_SERVICE_UNKNOWN.rawValue) || code == Int32(G_DBUS_ERROR_NAME_HAS_NO_OWNER.rawValue)
            {
                throw unavailable("nobody owns org.freedesktop.PolicyKit1 on the system bus")
            }
            throw TokenStoreError(
                .lockSourceUnavailable, "The user-presence check failed at polkit: \(message). Nothing was read.",
                hint: "Check that polkit runs and that the app's polkit action (\(actionID)) is installed.")
        }
        defer { g_variant_unref(reply) }
        guard let result = g_variant_get_child_value(reply, 0) else { return .denied(challenge: false) }
        defer { g_variant_unref(result) }
        func flag(_ index: gsize) -> Bool {
            guard let child = g_variant_get_child_value(result, index) else { return false }
            defer { g_variant_unref(child) }
            return g_variant_get_boolean(child) != 0
        }
        return flag(0) ? .authorized : .denied(challenge: flag(1))
    }

    /// The `((sa{sv})sa{ss}us)` arguments of `CheckAuthorization` for this process.
    private static func checkParameters(actionID: String, cancellationID: String) -> OpaquePointer? {
        func entry(_ key: String, _ value: OpaquePointer?) -> OpaquePointer? {
            g_variant_new_dict_entry(g_variant_new_string(key), g_variant_new_variant(value))
        }
        let subjectDetails: [OpaquePointer?] = [
            entry("pid", g_variant_new_uint32(UInt32(getpid()))),
            entry("start-time", g_variant_new_uint64(guint64(processStartTime()))),
            entry("uid", g_variant_new_int32(Int32(bitPattern: getuid()))),
        ]
        let details = withVariantType("{sv}") { type in
            subjectDetails.withUnsafeBufferPointer { g_variant_new_array(type, $0.baseAddress, gsize($0.count)) }
        }
        let subjectParts: [OpaquePointer?] = [g_variant_new_string("unix-process"), details]
        let subject = subjectParts.withUnsafeBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) }
        let arguments: [OpaquePointer?] = [
            subject, g_variant_new_string(actionID), withVariantType("{ss}") { g_variant_new_array($0, nil, 0) },
            g_variant_new_uint32(1),  // AllowUserInteraction
            g_variant_new_string(cancellationID),
        ]
        return arguments.withUnsafeBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) }
    }

    /// `body` with a GVariant type of its own (`g_variant_type_checked_` would keep a pointer
    /// into a temporary C string).
    private static func withVariantType<R>(_ text: String, _ body: (OpaquePointer?) -> R) -> R {
        let type = g_variant_type_new(text)
        defer { g_variant_type_free(type) }
        return body(type)
    }

    /// Field 22 of `/proc/self/stat` (the start time in clock ticks since boot), as polkit's
    /// own `unix-process` subjects carry it (so a recycled pid is not another process's proof).
    static func processStartTime() -> UInt64 {
        let descriptor = open("/proc/self/stat", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return 0 }  // 0: polkit looks the start time up itself
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = read(descriptor, &buffer, buffer.count)
        guard count > 0, let close = buffer[..<count].lastIndex(of: UInt8(ascii: ")")) else { return 0 }
        // The fields after the command (which may hold spaces and parentheses): field 3 onwards.
        let rest = buffer[(close + 1)..<count].split(separator: UInt8(ascii: " "))
        guard rest.count > 19 else { return 0 }
        return UInt64(String(decoding: rest[19], as: UTF8.self)) ?? 0
    }

    private static func cancelled() -> TokenStoreError {
        TokenStoreError(.cancelled, "The user-presence check was cancelled (polkit's dialog was closed); nothing was read.")
    }

    private static func unavailable(_ why: String) -> TokenStoreError {
        TokenStoreError(
            .lockSourceUnavailable,
            "The store's access policy is userPresence, but polkit cannot be asked (\(why)). Nothing was read.",
            hint: "Run it where polkit answers on the system bus (polkitd, with the app's action installed).")
    }

    /// A connection of its own to the system bus.
    private static func connect(_ address: String?) throws -> OpaquePointer {
        var error: UnsafeMutablePointer<GError>?
        let resolved: String
        if let address {
            resolved = address
        } else {
            guard let found = g_dbus_address_get_for_bus_sync(G_BUS_TYPE_SYSTEM, nil, &error) else {
                g_clear_error(&error)
                throw unavailable("no system bus address")
            }
            resolved = String(cString: found)
            g_free(found)
        }
        let flags = GDBusConnectionFlags(
            rawValue: G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT.rawValue | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION.rawValue)
        guard let connection = g_dbus_connection_new_for_address_sync(resolved, flags, nil, nil, &error) else {
            g_clear_error(&error)
            throw unavailable("the system bus does not answer")
        }
        g_dbus_connection_set_exit_on_close(connection, 0)
        return connection
    }

    /// Best effort after a time-out or a cancellation: polkit drops the check and its agent's
    /// dialog. A failure changes nothing for the caller, who already has `timedOut` / `cancelled`.
    private static func cancel(_ connection: OpaquePointer, _ cancellationID: String) {
        let arguments: [OpaquePointer?] = [g_variant_new_string(cancellationID)]
        let parameters = arguments.withUnsafeBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) }
        var error: UnsafeMutablePointer<GError>?
        if let reply = g_dbus_connection_call_sync(
            connection, busName, objectPath, interface, "CancelCheckAuthorization", parameters, nil, G_DBUS_CALL_FLAGS_NONE,
            1_000, nil, &error)
        {
            g_variant_unref(reply)
        }
        g_clear_error(&error)
    }
}
