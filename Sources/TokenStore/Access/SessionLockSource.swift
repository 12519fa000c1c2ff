internal import CGIO
import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Follows the desktop session's lock for the stores whose policy is ``AccessPolicy/whenUnlocked``:
/// one per process, on a thread of its own running its own `GMainContext` (never the Swift
/// cooperative pool), with its own D-Bus connections.
///
/// The source, in order:
/// - **logind** (`org.freedesktop.login1` on the system bus): the caller's session, found as
///   logind's own clients find it (`XDG_SESSION_ID` → `GetSession`, else `GetSessionByPID`, else the
///   user's `Display` session through `GetUser`); its `Lock` / `Unlock` signals and its `LockedHint`
///   (read at start, followed through `PropertiesChanged`).
/// - else a **screensaver** on the session bus (`org.freedesktop.ScreenSaver`, then
///   `org.gnome.ScreenSaver`): `GetActive` at start, then `ActiveChanged(bool)`.
///
/// GIO picks the buses' addresses (`DBUS_SYSTEM_BUS_ADDRESS`, `DBUS_SESSION_BUS_ADDRESS`).
/// A lock sets ``isLocked`` (one atomic) and wipes the key of every store following it. A bus
/// connection that closes locks them for good (nothing could unlock them any more).
final class SessionLockSource: @unchecked Sendable {  // `subscribers` is behind its mutex; the rest is immutable or atomic
    enum Kind: String, Sendable {
        case logind
        case screensaver
    }

    /// Where the events come from (`status`'s `lockSource`).
    let kind: Kind
    private let locked: Atomic<Bool>
    /// Its bus connection closed: locked for good.
    private let ended = Atomic<Bool>(false)
    private let subscribers = Mutex<[WeakConnection]>([])

    private init(kind: Kind, locked: Bool) {
        self.kind = kind
        self.locked = Atomic(locked)
    }

    /// Whether the session is locked, as the last event said.
    var isLocked: Bool { locked.load(ordering: .acquiring) }

    // MARK: - One per process

    private static let started = Mutex<SessionLockSource?>(nil)

    /// The process's source, started at the first call that finds one (a call that finds none
    /// tries again next time); nil when neither logind nor a screensaver answers.
    static func shared() -> SessionLockSource? {
        started.withLock { current in
            if let current { return current }
            current = start()
            return current
        }
    }

    /// Starts the thread, which looks for a source and reports it (or nil, and ends) before it
    /// runs its loop.
    private static func start() -> SessionLockSource? {
        let found = Locked<(done: Bool, source: SessionLockSource?)>((false, nil))
        let condition = Condition()
        let started = DetachedThread.start(name: "ts-session-lock") {
            let context = g_main_context_new()
            g_main_context_push_thread_default(context)
            let source = Discovery.run()
            condition.signal { found.withLock { $0 = (true, source) } }
            guard source != nil else {
                g_main_context_pop_thread_default(context)
                g_main_context_unref(context)
                return
            }
            let loop = g_main_loop_new(context, 0)
            g_main_loop_run(loop)  // for the life of the process
        }
        guard started else { return nil }
        condition.wait { found.withLock { $0.done } }
        return found.withLock { $0.source }
    }

    // MARK: - Subscribers

    private final class WeakConnection {
        weak var connection: StoreConnection?
        init(_ connection: StoreConnection) { self.connection = connection }
    }

    /// Adds `connection` to the stores a lock or an unlock reaches (it applies ``isLocked`` itself
    /// after this returns, so no event falls between).
    func add(_ connection: StoreConnection) {
        subscribers.withLock { list in
            list.removeAll { $0.connection == nil }
            if !list.contains(where: { $0.connection === connection }) { list.append(WeakConnection(connection)) }
        }
    }

    /// On the source's thread: the session locked or unlocked. The state is set first, then each
    /// store applies the state as it then is (so the last event wins, whatever the interleaving).
    fileprivate func update(locked value: Bool, final: Bool = false) {
        if final { ended.store(true, ordering: .releasing) }
        guard !ended.load(ordering: .acquiring) || final else { return }
        guard locked.exchange(value, ordering: .acquiringAndReleasing) != value else { return }
        let connections = subscribers.withLock { list in
            list.removeAll { $0.connection == nil }
            return list.compactMap(\.connection)
        }
        for connection in connections { connection.followSessionLock() }
    }

    // MARK: - Discovery (on the source's thread, with its context pushed)

    /// What the thread found, and the D-Bus calls it made to find it.
    private enum Discovery {
        static let timeoutMilliseconds: Int32 = 1_500

        static func run() -> SessionLockSource? {
            if let system = connect(G_BUS_TYPE_SYSTEM) {
                if let source = logind(system) { return source }
                g_object_unref(UnsafeMutableRawPointer(system))
            }
            if let session = connect(G_BUS_TYPE_SESSION) {
                if let source = screensaver(session) { return source }
                g_object_unref(UnsafeMutableRawPointer(session))
            }
            return nil
        }

        /// A connection of its own to the bus (not GIO's shared one), or nil.
        static func connect(_ type: GBusType) -> OpaquePointer? {
            var error: UnsafeMutablePointer<GError>?
            guard let address = g_dbus_address_get_for_bus_sync(type, nil, &error) else {
                g_clear_error(&error)
                return nil
            }
            defer { g_free(address) }
            let flags = GDBusConnectionFlags(
                rawValue: G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT.rawValue | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION.rawValue)
            let connection = g_dbus_connection_new_for_address_sync(address, flags, nil, nil, &error)
            g_clear_error(&error)
            if let connection { g_dbus_connection_set_exit_on_close(connection, 0) }
            return connection
        }

        /// One method call; the reply's children, or nil on any error.
        static func call(
            _ connection: OpaquePointer, _ name: String, _ path: String, _ interface: String, _ method: String,
            _ arguments: [OpaquePointer?] = []
        ) -> OpaquePointer? {
            let parameters = arguments.withUnsafeBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) }
            var error: UnsafeMutablePointer<GError>?
            let reply = g_dbus_connection_call_sync(
                connection, name, path, interface, method, parameters, nil, G_DBUS_CALL_FLAGS_NO_AUTO_START,
                timeoutMilliseconds, nil, &error)
            g_clear_error(&error)
            return reply
        }

        /// The first child of a reply, unreffed with it; `read` sees it.
        static func first<T>(_ reply: OpaquePointer?, _ read: (OpaquePointer) -> T?) -> T? {
            guard let reply else { return nil }
            defer { g_variant_unref(reply) }
            guard g_variant_n_children(reply) >= 1, let child = g_variant_get_child_value(reply, 0) else { return nil }
            defer { g_variant_unref(child) }
            return read(child)
        }

        static func objectPath(_ reply: OpaquePointer?) -> String? {
            first(reply) { child in
                g_variant_is_of_type(child, g_variant_type_checked_("o")) != 0 ? String(cString: g_variant_get_string(child, nil)) : nil
            }
        }

        /// A property's value through `org.freedesktop.DBus.Properties.Get`.
        static func property<T>(
            _ connection: OpaquePointer, _ name: String, _ path: String, _ interface: String, _ property: String,
            _ read: (OpaquePointer) -> T?
        ) -> T? {
            let reply = call(
                connection, name, path, "org.freedesktop.DBus.Properties", "Get",
                [g_variant_new_string(interface), g_variant_new_string(property)])
            return first(reply) { boxed in
                guard let value = g_variant_get_variant(boxed) else { return nil }
                defer { g_variant_unref(value) }
                return read(value)
            }
        }

        static func boolean(_ value: OpaquePointer) -> Bool? { variantBoolean(value) }

        // MARK: logind

        static let login1 = "org.freedesktop.login1"
        static let sessionInterface = "org.freedesktop.login1.Session"

        /// The caller's session object, as logind's clients find it.
        static func sessionPath(_ system: OpaquePointer) -> String? {
            let manager = "/org/freedesktop/login1", interface = "org.freedesktop.login1.Manager"
            func exists(_ path: String?) -> String? {
                guard let path, path != "/" else { return nil }
                return property(system, login1, path, sessionInterface, "LockedHint", boolean) != nil ? path : nil
            }
            if let id = getenv("XDG_SESSION_ID").map({ String(cString: $0) }), !id.isEmpty,
                let path = exists(objectPath(call(system, login1, manager, interface, "GetSession", [g_variant_new_string(id)])))
            {
                return path
            }
            if let path = exists(objectPath(call(system, login1, manager, interface, "GetSessionByPID", [g_variant_new_uint32(UInt32(getpid()))]))) {
                return path
            }
            guard let user = objectPath(call(system, login1, manager, interface, "GetUser", [g_variant_new_uint32(getuid())])) else { return nil }
            let display: String? = property(system, login1, user, "org.freedesktop.login1.User", "Display") { value in
                guard g_variant_is_of_type(value, g_variant_type_checked_("(so)")) != 0, g_variant_n_children(value) == 2,
                    let path = g_variant_get_child_value(value, 1)
                else { return nil }
                defer { g_variant_unref(path) }
                return String(cString: g_variant_get_string(path, nil))
            }
            return exists(display)
        }

        static func logind(_ system: OpaquePointer) -> SessionLockSource? {
            guard let path = sessionPath(system) else { return nil }
            let source = SessionLockSource(kind: .logind, locked: false)
            let data = Unmanaged.passRetained(source).toOpaque()  // for the life of the process
            let lockID = g_dbus_connection_signal_subscribe(
                system, login1, sessionInterface, nil, path, nil, G_DBUS_SIGNAL_FLAGS_NONE,
                { _, _, _, _, member, _, data in
                    guard let member, let data else { return }
                    let source = Unmanaged<SessionLockSource>.fromOpaque(data).takeUnretainedValue()
                    switch String(cString: member) {
                    case "Lock": source.update(locked: true)
                    case "Unlock": source.update(locked: false)
                    default: break
                    }
                }, data, nil)
            let hintID = g_dbus_connection_signal_subscribe(
                system, login1, "org.freedesktop.DBus.Properties", "PropertiesChanged", path, sessionInterface,
                G_DBUS_SIGNAL_FLAGS_NONE,
                { _, _, _, _, _, parameters, data in
                    guard let parameters, let data, g_variant_n_children(parameters) >= 2,
                        let changed = g_variant_get_child_value(parameters, 1)
                    else { return }
                    defer { g_variant_unref(changed) }
                    guard let hint = g_variant_lookup_value(changed, "LockedHint", nil) else { return }
                    defer { g_variant_unref(hint) }
                    if let value = variantBoolean(hint) { Unmanaged<SessionLockSource>.fromOpaque(data).takeUnretainedValue().update(locked: value) }
                }, data, nil)
            // Read after subscribing, so no change falls between.
            guard let hint = property(system, login1, path, sessionInterface, "LockedHint", boolean) else {
                g_dbus_connection_signal_unsubscribe(system, lockID)
                g_dbus_connection_signal_unsubscribe(system, hintID)
                Unmanaged<SessionLockSource>.fromOpaque(data).release()
                return nil
            }
            source.locked.store(hint, ordering: .releasing)
            lockWhenClosed(system, data)
            return source
        }

        /// A bus connection that closes (the bus went away) says nothing more about the session:
        /// the source then counts it locked, for good (fail closed: no event can unlock it).
        static func lockWhenClosed(_ connection: OpaquePointer, _ data: UnsafeMutableRawPointer) {
            let closed: @convention(c) (OpaquePointer?, gboolean, UnsafeMutablePointer<GError>?, gpointer?) -> Void = { _, _, _, data in
                guard let data else { return }
                Unmanaged<SessionLockSource>.fromOpaque(data).takeUnretainedValue().update(locked: true, final: true)
            }
            g_signal_connect_data(
                UnsafeMutableRawPointer(connection), "closed", unsafeBitCast(closed, to: GCallback.self), data, nil,
                GConnectFlags(rawValue: 0))
        }

        // MARK: screensaver

        static func screensaver(_ session: OpaquePointer) -> SessionLockSource? {
            for (name, path) in [("org.freedesktop.ScreenSaver", "/org/freedesktop/ScreenSaver"), ("org.gnome.ScreenSaver", "/org/gnome/ScreenSaver")] {
                let source = SessionLockSource(kind: .screensaver, locked: false)
                let data = Unmanaged.passRetained(source).toOpaque()
                let id = g_dbus_connection_signal_subscribe(
                    session, name, name, "ActiveChanged", path, nil, G_DBUS_SIGNAL_FLAGS_NONE,
                    { _, _, _, _, _, parameters, data in
                        guard let parameters, let data, g_variant_n_children(parameters) >= 1,
                            let active = g_variant_get_child_value(parameters, 0)
                        else { return }
                        defer { g_variant_unref(active) }
                        if let value = variantBoolean(active) { Unmanaged<SessionLockSource>.fromOpaque(data).takeUnretainedValue().update(locked: value) }
                    }, data, nil)
                if let active = first(call(session, name, path, name, "GetActive"), boolean) {
                    source.locked.store(active, ordering: .releasing)
                    lockWhenClosed(session, data)
                    return source
                }
                g_dbus_connection_signal_unsubscribe(session, id)
                Unmanaged<SessionLockSource>.fromOpaque(data).release()
            }
            return nil
        }
    }
}

/// A boolean GVariant's value, else nil (a free function: the signal callbacks are C function pointers).
private func variantBoolean(_ value: OpaquePointer) -> Bool? {
    g_variant_is_of_type(value, g_variant_type_checked_("b")) != 0 ? g_variant_get_boolean(value) != 0 : nil
}

/// A one-shot wait for the source's thread (a pthread condition).
private final class Condition: @unchecked Sendable {  // the pthread mutex is the synchronization
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(cond, nil)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        cond.deallocate()
    }

    func signal(_ change: () -> Void) {
        pthread_mutex_lock(mutex)
        change()
        pthread_cond_broadcast(cond)
        pthread_mutex_unlock(mutex)
    }

    func wait(until done: () -> Bool) {
        pthread_mutex_lock(mutex)
        while !done() { pthread_cond_wait(cond, mutex) }
        pthread_mutex_unlock(mutex)
    }
}
