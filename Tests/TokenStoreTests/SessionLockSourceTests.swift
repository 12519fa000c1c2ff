import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// Where a whenUnlocked store's lock comes from: logind's session `Lock` / `Unlock` and
/// `LockedHint`, else a screensaver's `ActiveChanged`. Each test runs a child process
/// (`tokenstore-testchild session-lock`) holding two whenUnlocked stores and reading them every
/// millisecond, on the real gnome-keyring of scripts/with-keyring.
///
/// Stand-ins: logind cannot run here (no systemd as PID 1), so python3-dbusmock's `logind`
/// template stands in for it on a private system bus (a dbus-daemon of the test's own,
/// system-like configuration; its address goes only to the child, as DBUS_SYSTEM_BUS_ADDRESS).
/// The screensaver is a dbusmock object owning `org.freedesktop.ScreenSaver`
/// (Tests/DBusMock/freedesktop_screensaver.py) on a private session bus of the test's own (not
/// with-keyring's, which every test shares: see ``PrivateBus``).
@Suite("Session lock sources (logind and ScreenSaver stand-ins)", keyringTrait, .offPool, .serialized, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct SessionLockSourceTests {
    /// The most a lock may take to reach the next read.
    static let lockBudgetNanoseconds: UInt64 = 200_000_000

    /// Two stores holding the generic item `alice`, closed (the child opens them whenUnlocked).
    private static func twoStores() throws -> [TestStore] {
        let stores = [try TestStore(), try TestStore()]
        for (index, f) in stores.enumerated() {
            try f.store.set(secret("s\(index)"), for: key("alice", .generic))
            f.store.close()
        }
        return stores
    }

    /// A running `session-lock` child and its output.
    private struct Reader {
        let child: ChildProcess
        let directory: TemporaryDirectory
        let stores: [TestStore]  // kept (their folders) while the child reads them

        init(_ stores: [TestStore], environment: [String: String]) throws {
            try self.init(stores: stores, paths: stores.map(\.path), environment: environment) { _ in }
        }

        /// A child reading the stores at `paths`; `prepare` writes into its folder first.
        init(stores: [TestStore] = [], paths: [String], environment: [String: String], prepare: (TemporaryDirectory) throws -> Void) throws {
            self.stores = stores
            directory = try TemporaryDirectory()
            try prepare(directory)
            child = try ChildProcess.start(
                try BuiltProducts.executable("tokenstore-testchild").path,
                ["session-lock", directory.path] + paths, environment: childEnvironment(environment))
        }

        var lines: [String] { String(decoding: child.captured("stdout"), as: UTF8.self).split(separator: "\n").map(String.init) }

        /// The first line from `start` on that matches, with its index; fails after `timeout`.
        func wait(for what: String, from start: Int = 0, timeout: Duration = .seconds(30), _ matches: (String) -> Bool) throws -> (Int, String) {
            let deadline = ContinuousClock.now + timeout
            while true {
                let all = lines
                if start < all.count, let index = all[start...].firstIndex(where: matches) { return (index, all[index]) }
                if child.poll() != nil || ContinuousClock.now > deadline {
                    throw StandInFailed(what: "no \(what); child output: \(all) \(String(decoding: child.captured("stderr"), as: UTF8.self))")
                }
                usleep(2_000)
            }
        }

        /// Waits until store `index` answers `state` (a line after `start`); its line index and time.
        func wait(store index: Int, _ state: String, from start: Int = 0) throws -> (line: Int, nanos: UInt64) {
            let (line, text) = try wait(for: "STATE \(index) \(state)", from: start) { $0.hasPrefix("STATE \(index) \(state) ") }
            return (line, UInt64(text.split(separator: "=").last!)!)
        }

        func quit() {
            _ = FileManager.default.createFile(atPath: directory.appending("quit").path, contents: Data())
            _ = try? child.wait(timeout: .seconds(10))
        }
    }

    /// Locks (`lock`), waits until both stores refuse, unlocks, waits until both read again; returns
    /// the lock-to-refused time of each store.
    private func lockAndUnlock(_ reader: Reader, source: String, lock: () throws -> Void, unlock: () throws -> Void) throws {
        let before = reader.lines.count
        let sent = monotonicNanoseconds()
        try lock()
        let locked = try (0..<2).map { try reader.wait(store: $0, "locked", from: before) }
        let latencies = locked.map { $0.nanos > sent ? $0.nanos - sent : 0 }
        for (index, latency) in latencies.enumerated() {
            print("METRIC lock_source source=\(source) store=\(index) lock_to_refused_ms=\(String(format: "%.1f", Double(latency) / 1e6))")
            #expect(latency <= Self.lockBudgetNanoseconds, "store \(index): \(latency / 1_000_000) ms from the lock to storeLocked")
        }
        let afterLock = reader.lines.count
        let unlockSent = monotonicNanoseconds()
        try unlock()
        let unlocked = try (0..<2).map { try reader.wait(store: $0, "ok", from: afterLock) }
        print("METRIC lock_source source=\(source) unlock_to_read_ms=\(String(format: "%.1f", Double(unlocked.map(\.nanos).max()! - unlockSent) / 1e6))")
    }

    @Test("logind (dbusmock stand-in): Lock → both stores' next read storeLocked within 200 ms; Unlock → they read again; status names logind")
    func logindLockAndUnlock() throws {
        let bus = try PrivateBus()
        let logind = try DBusMock(template: "logind", name: "org.freedesktop.login1", bus: .system, environment: bus.environment)
        let session = "/org/freedesktop/login1/session/c1"
        try logind.call("org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.DBus.Mock.AddSession",
                        ["c1", "seat0", "\(getuid())", "tester", "true"])
        let stores = try Self.twoStores()
        let environment = bus.environment.merging(["XDG_SESSION_ID": "c1"]) { $1 }
        let reader = try Reader(stores, environment: environment)
        defer { reader.quit() }
        let (_, open) = try reader.wait(for: "OPEN") { $0.hasPrefix("OPEN ") }
        #expect(open == "OPEN source=logind locked=false,false")
        _ = try reader.wait(store: 0, "ok")
        _ = try reader.wait(store: 1, "ok")
        let session1 = "org.freedesktop.login1.Session"
        try lockAndUnlock(reader, source: "logind",
                          lock: { try logind.call("org.freedesktop.login1", session, "\(session1).Lock") },
                          unlock: { try logind.call("org.freedesktop.login1", session, "\(session1).Unlock") })
        // LockedHint (what a screen locker sets) is followed too.
        try lockAndUnlock(reader, source: "logind-hint",
                          lock: { try logind.call("org.freedesktop.login1", session, "\(session1).SetLockedHint", ["true"]) },
                          unlock: { try logind.call("org.freedesktop.login1", session, "\(session1).SetLockedHint", ["false"]) })
        let tokenctl = try BuiltProducts.executable("tokenctl")
        let status = try runChild(tokenctl, ["--store", stores[0].path, "--json", "status"], environment: environment)
        #expect(status.stdout.contains("\"lockSource\":\"logind\"") || status.stdout.contains("\"lockSource\": \"logind\""), "\(status.stdout)")
    }

    @Test("logind (dbusmock stand-in): LockedHint true at open → locked from the start (unlock() too); false → reads")
    func lockedHintAtOpen() throws {
        let bus = try PrivateBus()
        let logind = try DBusMock(template: "logind", name: "org.freedesktop.login1", bus: .system, environment: bus.environment)
        let session = "/org/freedesktop/login1/session/c2"
        try logind.call("org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.DBus.Mock.AddSession",
                        ["c2", "seat0", "\(getuid())", "tester", "true"])
        try logind.call("org.freedesktop.login1", session, "org.freedesktop.login1.Session.SetLockedHint", ["true"])
        let stores = try Self.twoStores()
        let environment = bus.environment.merging(["XDG_SESSION_ID": "c2"]) { $1 }
        let tokenctl = try BuiltProducts.executable("tokenctl")
        let get = try runChild(tokenctl, ["--store", stores[0].path, "get", "--account", "alice", "--kind", "generic"], environment: environment)
        #expect(get.status == 0, "an afterFirstUnlock store is not locked by the session: \(get.stderr)")
        let reader = try Reader(stores, environment: environment)
        defer { reader.quit() }
        let (_, open) = try reader.wait(for: "OPEN") { $0.hasPrefix("OPEN ") }
        #expect(open == "OPEN source=logind locked=true,true")
        let first = try reader.wait(store: 0, "locked")
        _ = try reader.wait(store: 1, "locked")
        #expect(!reader.lines.contains { $0.hasPrefix("STATE 0 ok") }, "a read succeeded while the session was locked")
        // Another process (tokenctl) of the whenUnlocked store is refused too, exit 75.
        let locked = try runChild(tokenctl, ["--store", stores[0].path, "get", "--account", "alice", "--kind", "generic"], environment: environment)
        #expect(locked.status == 75 && locked.stderr.contains("storeLocked"), "\(locked.status) \(locked.stderr)")
        let status = try runChild(tokenctl, ["--store", stores[0].path, "--json", "status"], environment: environment)
        #expect(status.stdout.contains("\"locked\":true") || status.stdout.contains("\"locked\": true"), "\(status.stdout)")
        // An explicit unlock() does not get around the session's lock.
        _ = FileManager.default.createFile(atPath: reader.directory.appending("try-unlock").path, contents: Data())
        let (_, unlock) = try reader.wait(for: "UNLOCK") { $0.hasPrefix("UNLOCK ") }
        #expect(unlock == "UNLOCK locked")
        #expect(!reader.lines.contains { $0.hasPrefix("STATE 0 ok") }, "a read succeeded after unlock() while the session was locked")
        try logind.call("org.freedesktop.login1", session, "org.freedesktop.login1.Session.SetLockedHint", ["false"])
        _ = try reader.wait(store: 0, "ok", from: first.line)
        _ = try reader.wait(store: 1, "ok", from: first.line)
    }

    /// A logind stand-in with session `id` of this user, and the environment of a child that has
    /// no `XDG_SESSION_ID` (so the session must be found another way).
    private static func logindWithoutSessionID(_ bus: PrivateBus, session id: String) throws -> (DBusMock, [String: String]) {
        let logind = try DBusMock(template: "logind", name: "org.freedesktop.login1", bus: .system, environment: bus.environment)
        try logind.call("org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.DBus.Mock.AddSession",
                        [id, "seat0", "\(getuid())", "tester", "true"])
        return (logind, bus.environment.merging(["XDG_SESSION_ID": ""]) { $1 })
    }

    /// Reads both stores, locks and unlocks the session `id` through its `Lock` / `Unlock`.
    private func followsSession(_ reader: Reader, _ logind: DBusMock, id: String, source: String) throws {
        let (_, open) = try reader.wait(for: "OPEN") { $0.hasPrefix("OPEN ") }
        #expect(open == "OPEN source=logind locked=false,false")
        _ = try reader.wait(store: 0, "ok")
        _ = try reader.wait(store: 1, "ok")
        let session = "/org/freedesktop/login1/session/\(id)", interface = "org.freedesktop.login1.Session"
        try lockAndUnlock(reader, source: source,
                          lock: { try logind.call("org.freedesktop.login1", session, "\(interface).Lock") },
                          unlock: { try logind.call("org.freedesktop.login1", session, "\(interface).Unlock") })
    }

    @Test("logind (dbusmock stand-in), no XDG_SESSION_ID: the session is found by GetSessionByPID (the reading process's pid); its Lock / Unlock reach both stores")
    func sessionByPID() throws {
        let bus = try PrivateBus()
        let (logind, environment) = try Self.logindWithoutSessionID(bus, session: "p1")
        // The template has no GetSessionByPID: added here, answering p1 for any pid (the pid asked
        // is checked below from the mock's call log). The user's Display stays "/" (none), so no
        // other path finds p1.
        try logind.call("org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.DBus.Mock.AddMethod",
                        ["org.freedesktop.login1.Manager", "GetSessionByPID", "u", "o", "ret = '/org/freedesktop/login1/session/p1'"])
        let reader = try Reader(try Self.twoStores(), environment: environment)
        defer { reader.quit() }
        try followsSession(reader, logind, id: "p1", source: "logind-pid")
        let calls = try logind.call("org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.DBus.Mock.GetMethodCalls", ["GetSessionByPID"])
        #expect(calls.contains("uint32 \(reader.child.pid)"), "GetSessionByPID was not asked for the reader's pid \(reader.child.pid): \(calls)")
    }

    @Test("logind (dbusmock stand-in), no XDG_SESSION_ID and no session for the pid: the user's Display session (GetUser) is followed")
    func userDisplaySession() throws {
        let bus = try PrivateBus()
        let (logind, environment) = try Self.logindWithoutSessionID(bus, session: "d1")
        // A second session of the user, not the display one: following it would miss the locks.
        try logind.call("org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.DBus.Mock.AddSession",
                        ["d2", "seat0", "\(getuid())", "tester", "true"])
        // The template has no GetSessionByPID (the call fails, as for a process outside any
        // session); its GetUser fails (python3-dbusmock 0.28: `str + dbus.UInt32`, a TypeError):
        // replaced by one answering the user's path; the user's Display is ("", "/"): set to d1,
        // as logind sets it.
        try logind.call("org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.DBus.Mock.AddMethod",
                        ["org.freedesktop.login1.Manager", "GetUser", "u", "o", "ret = '/org/freedesktop/login1/user/%d' % args[0]"])
        try logind.call("org.freedesktop.login1", "/org/freedesktop/login1/user/\(getuid())", "org.freedesktop.DBus.Properties.Set",
                        ["org.freedesktop.login1.User", "Display", "<('d1', objectpath '/org/freedesktop/login1/session/d1')>"])
        let reader = try Reader(try Self.twoStores(), environment: environment)
        defer { reader.quit() }
        try followsSession(reader, logind, id: "d1", source: "logind-display")
    }

    @Test("logind (dbusmock stand-in): the system bus goes away → both stores lock, and stay locked (nothing could unlock them)")
    func busGoneLocks() throws {
        let bus = try PrivateBus()
        let logind = try DBusMock(template: "logind", name: "org.freedesktop.login1", bus: .system, environment: bus.environment)
        try logind.call("org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.DBus.Mock.AddSession",
                        ["c3", "seat0", "\(getuid())", "tester", "true"])
        let reader = try Reader(try Self.twoStores(), environment: bus.environment.merging(["XDG_SESSION_ID": "c3"]) { $1 })
        defer { reader.quit() }
        let (_, open) = try reader.wait(for: "OPEN") { $0.hasPrefix("OPEN ") }
        #expect(open == "OPEN source=logind locked=false,false")
        _ = try reader.wait(store: 0, "ok")
        let before = try reader.wait(store: 1, "ok").line
        bus.stop()
        let locked = try (0..<2).map { try reader.wait(store: $0, "locked", from: before) }
        usleep(300_000)
        let after = reader.lines[(locked.map(\.line).max()! + 1)...]
        #expect(!after.contains { $0.contains(" ok ") }, "a store read again after its lock source was gone: \(Array(after))")
    }

    @Test("no logind: the org.freedesktop.ScreenSaver fallback (dbusmock, on a session bus of its own) locks and unlocks both stores")
    func screensaverFallback() throws {
        // The screensaver is on a private session bus that only this test's children use, so the
        // tests that need no lock source never see it; so the stores are passphrase stores (no
        // Secret Service on that bus).
        let absent = try TemporaryDirectory()
        let session = try PrivateBus(.session)
        let environment = session.environment.merging(
            ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(absent.appending("no-system-bus").path)", "XDG_SESSION_ID": ""]) { $1 }
        let template = repositoryRoot.appendingPathComponent("Tests/DBusMock/freedesktop_screensaver.py").path
        let saver = try DBusMock(template: template, name: "org.freedesktop.ScreenSaver", bus: .session, environment: session.environment)
        let shared = try runChild(
            URL(fileURLWithPath: "/usr/bin/gdbus"),
            ["call", "--session", "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
             "--method", "org.freedesktop.DBus.NameHasOwner", "org.freedesktop.ScreenSaver"], environment: [:], timeout: 20)
        #expect(shared.status == 0 && shared.stdout.contains("false"), "a screensaver on the shared session bus: \(shared.stdout) \(shared.stderr)")
        let passphrase = "screensaver test passphrase"
        let stores = try (0..<2).map { index in
            let directory = try TemporaryDirectory()
            let path = directory.appending("store/tokens.sqlite").path
            let provider = PassphraseKeyProvider(
                directory: directory.appending("store/keys").path, passphrase: secret(passphrase), limits: .interactive)
            let store = try TokenStore(path: path, appID: testAppID, keyProvider: provider)
            try store.set(secret("s\(index)"), for: key("alice", .generic))
            store.close()
            return (directory, path)
        }
        let reader = try Reader(paths: stores.map(\.1), environment: environment) {
            try Data(passphrase.utf8).write(to: $0.appending("passphrase"))
        }
        defer { reader.quit() }
        let (_, open) = try reader.wait(for: "OPEN") { $0.hasPrefix("OPEN ") }
        #expect(open == "OPEN source=screensaver locked=false,false")
        _ = try reader.wait(store: 0, "ok")
        _ = try reader.wait(store: 1, "ok")
        let path = "/org/freedesktop/ScreenSaver", name = "org.freedesktop.ScreenSaver"
        try lockAndUnlock(reader, source: "screensaver",
                          lock: { try saver.call(name, path, "\(name).SetActive", ["true"]) },
                          unlock: { try saver.call(name, path, "\(name).SetActive", ["false"]) })
        let tokenctl = try BuiltProducts.executable("tokenctl")
        let status = try runChild(tokenctl, ["--store", stores[0].1, "--json", "status"], environment: environment)
        #expect(status.stdout.contains("\"lockSource\":\"screensaver\"") || status.stdout.contains("\"lockSource\": \"screensaver\""), "\(status.stdout)")
    }

    @Test("neither logind nor a screensaver: whenUnlocked is lockSourceUnavailable (69), nothing opened")
    func noSource() throws {
        let absent = try TemporaryDirectory()
        let environment = ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(absent.appending("no-system-bus").path)", "XDG_SESSION_ID": ""]
        let stores = try Self.twoStores()
        let reader = try Reader(stores, environment: environment)
        defer { reader.quit() }
        let (_, line) = try reader.wait(for: "ERROR") { $0.hasPrefix("ERROR ") || $0.hasPrefix("OPEN ") }
        #expect(line == "ERROR lockSourceUnavailable")
        let tokenctl = try BuiltProducts.executable("tokenctl")
        let put = try runChild(
            tokenctl, ["--store", stores[0].path, "put", "--account", "bob", "--kind", "generic", "--access-policy", "whenUnlocked"],
            environment: environment, stdin: Data("s".utf8))
        #expect(put.status == 69 && put.stderr.contains("lockSourceUnavailable"), "\(put.status) \(put.stderr)")
        let status = try runChild(tokenctl, ["--store", stores[0].path, "--json", "status"], environment: environment)
        #expect(status.stdout.contains("\"lockSource\":\"explicit\"") || status.stdout.contains("\"lockSource\": \"explicit\""), "\(status.stdout)")
    }
}
