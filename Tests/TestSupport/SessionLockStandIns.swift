import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Stand-ins for what tells a process that the desktop session locked, on private buses.
///
/// logind cannot run here (it needs systemd as PID 1), so python3-dbusmock's `logind` template
/// stands in for it on a private *system* bus: a `dbus-daemon` of this process's own with a
/// system-like configuration, its address given only to the children of the test
/// (`DBUS_SYSTEM_BUS_ADDRESS`). A screensaver (`org.freedesktop.ScreenSaver`,
/// Tests/DBusMock/freedesktop_screensaver.py) runs on a private *session* bus of its own, never
/// on scripts/with-keyring's: every test process and child shares that one, and a screensaver
/// there is a lock source for all of them (a process keeps the first source it finds), so the
/// tests that need none would see it.
public final class PrivateBus: @unchecked Sendable {  // immutable after init
    public let type: DBusMock.Bus
    public let address: String
    private let directory: TemporaryDirectory
    private let daemon: ChildProcess

    /// `openToOtherUsers`: the bus's folder is 0755, so that a daemon or a child that drops to
    /// another user (polkitd, a reader as uid 65534) reaches its socket.
    public init(_ type: DBusMock.Bus = .system, openToOtherUsers: Bool = false) throws {
        self.type = type
        // Short names: a Unix socket's path has 107 bytes at most, and the folder may already
        // be deep (tokenbench's TMPDIR is two levels under /tmp).
        directory = try TemporaryDirectory(prefix: "ts-\(type.rawValue)")
        if openToOtherUsers { chmod(directory.path, 0o755) }
        let socket = directory.appending("bus").path
        let config = directory.appending("\(type.rawValue).conf")
        try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>\(type.rawValue)</type>
              <listen>unix:path=\(socket)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow user="*"/>
                <allow own="*"/>
                <allow send_destination="*"/>
                <allow receive_sender="*"/>
              </policy>
            </busconfig>
            """.write(to: config, atomically: true, encoding: .utf8)
        address = "unix:path=\(socket)"
        daemon = try ChildProcess.start("/usr/bin/dbus-daemon", ["--config-file=\(config.path)", "--nofork", "--nosyslog"])
        try Self.waitUntil("the private \(type.rawValue) bus did not start: \(String(decoding: daemon.captured("stderr"), as: UTF8.self))") {
            FileManager.default.fileExists(atPath: socket)
        }
    }

    deinit { _ = daemon.stop(grace: .seconds(1)) }

    /// Ends the bus (every connection to it closes).
    public func stop() { _ = daemon.stop(grace: .seconds(1)) }

    /// The environment that puts a child on this bus.
    public var environment: [String: String] { [type == .system ? "DBUS_SYSTEM_BUS_ADDRESS" : "DBUS_SESSION_BUS_ADDRESS": address] }

    /// Whether `name` has an owner on the bus `environment` names (`gdbus call … NameHasOwner`).
    static func nameHasOwner(_ name: String, bus: DBusMock.Bus, environment: [String: String]) throws -> Bool {
        let owned = try runChild(
            URL(fileURLWithPath: "/usr/bin/gdbus"),
            ["call", "--\(bus.rawValue)", "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus", "--method",
             "org.freedesktop.DBus.NameHasOwner", name],
            environment: environment, timeout: 10)
        return owned.stdout.contains("true")
    }

    static func waitUntil(_ what: @autoclosure () -> String, timeout: Duration = .seconds(20), _ done: () throws -> Bool) throws {
        let deadline = ContinuousClock.now + timeout
        while try !done() {
            guard ContinuousClock.now < deadline else { throw StandInFailed(what: what()) }
            usleep(20_000)
        }
    }
}

public struct StandInFailed: Error, CustomStringConvertible {
    public let what: String
    public init(what: String) { self.what = what }
    public var description: String { what }
}

/// A python3-dbusmock process owning `name` on a bus, and `gdbus` calls to it.
public final class DBusMock: @unchecked Sendable {  // immutable after init
    public enum Bus: String, Sendable { case system, session }

    public let bus: Bus
    private let environment: [String: String]
    private let process: ChildProcess

    /// Starts `python3 -m dbusmock --template TEMPLATE` (a template name or a file) and waits
    /// until `name` is owned. `environment` names the bus (`DBUS_SYSTEM_BUS_ADDRESS` /
    /// `DBUS_SESSION_BUS_ADDRESS`).
    public init(template: String, name: String, bus: Bus, parameters: String? = nil, environment: [String: String]) throws {
        self.bus = bus
        self.environment = environment
        var arguments = ["-m", "dbusmock", "--\(bus.rawValue)", "--template", template]
        if let parameters { arguments += ["--parameters", parameters] }
        // The system's python3 (python3-dbusmock is a Debian package), not a python3 earlier on PATH.
        process = try ChildProcess.start("/usr/bin/python3", arguments, environment: childEnvironment(environment))
        try PrivateBus.waitUntil("dbusmock \(template) did not take \(name): \(String(decoding: process.captured("stderr"), as: UTF8.self))") {
            if process.poll() != nil { throw StandInFailed(what: "dbusmock \(template) exited: \(String(decoding: process.captured("stderr"), as: UTF8.self))") }
            let owned = try call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner", [name])
            return owned.contains("true")
        }
    }

    deinit { _ = process.stop(grace: .seconds(1)) }

    /// `gdbus call` on the mock's bus; its output. Throws when gdbus fails.
    @discardableResult
    public func call(_ destination: String, _ path: String, _ method: String, _ arguments: [String] = []) throws -> String {
        let result = try runChild(
            URL(fileURLWithPath: "/usr/bin/gdbus"),
            ["call", "--\(bus.rawValue)", "--dest", destination, "--object-path", path, "--method", method] + arguments,
            environment: environment, timeout: 20)
        guard result.status == 0 else { throw StandInFailed(what: "gdbus call \(method): \(result.stderr)") }
        return result.stdout
    }
}
