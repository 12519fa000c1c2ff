import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The real polkitd (Debian's polkitd 122) on a private system bus of its own, answering one
/// action through a rules file.
///
/// polkitd reads actions and rules only from the system's directories
/// (`/usr/share/polkit-1/actions`, `/etc/polkit-1/rules.d`): it runs in a mount namespace of its
/// own (`unshare -m`) where a test folder is bind-mounted over each, so nothing of the machine's
/// is changed. Needs root (the bind mounts; polkitd drops to its own user). polkit authorizes
/// root for every action without asking, so the processes whose presence is checked run as
/// another uid (65534, `setpriv`). The rule answers what `state/answer` says (`yes` / anything
/// else: no) and appends the subject's pid to `state/calls` for each check (`polkit.spawn`).
/// No authentication agent: the rule answers, as a site's rules file may (`auth_self` itself
/// needs a user typing a password).
public final class RealPolkit: @unchecked Sendable {  // immutable after init
    public let directory: String
    public let busAddress: String
    private let bus: PrivateBus
    private let daemon: ChildProcess

    /// Why the real polkitd cannot run here, or nil.
    public static var unavailableReason: String? {
        if getuid() != 0 { return "not root: polkitd's directories cannot be bind-mounted" }
        if access("/usr/lib/polkit-1/polkitd", X_OK) != 0 { return "no /usr/lib/polkit-1/polkitd" }
        guard let probe = try? runChild(URL(fileURLWithPath: "/usr/bin/unshare"), ["-m", "--propagation", "private", "true"]),
            probe.status == 0
        else { return "unshare -m is not allowed here" }
        return nil
    }

    /// `actionFile`: the policyconfig document that declares `action` (the library's own
    /// template, `PolkitActionFile`, so that the real polkitd parses what apps ship).
    public init(action: String, actionFile: String) throws {
        directory = "/tmp/tokenstore-polkit-\(UUID().uuidString)"
        for sub in ["", "/actions", "/rules", "/state", "/home", "/home/run"] {
            try FileManager.default.createDirectory(atPath: directory + sub, withIntermediateDirectories: false)
        }
        chmod(directory, 0o755)
        chmod(directory + "/state", 0o777)  // polkitd's rule (as user polkitd) appends the calls here
        chown(directory + "/home", 65534, 65534)
        chown(directory + "/home/run", 65534, 65534)
        chmod(directory + "/home/run", 0o700)
        try actionFile.write(toFile: "\(directory)/actions/\(action).policy", atomically: true, encoding: .utf8)
        try """
            polkit.addRule(function(action, subject) {
                if (action.id != "\(action)") { return polkit.Result.NOT_HANDLED; }
                polkit.spawn(["/bin/sh", "-c", "echo " + subject.pid + " " + subject.user + " >> \(directory)/state/calls"]);
                var answer = polkit.spawn(["/bin/cat", "\(directory)/state/answer"]);
                return answer.trim() == "yes" ? polkit.Result.YES : polkit.Result.NO;
            });
            """.write(toFile: "\(directory)/rules/50-tokenstore-test.rules", atomically: true, encoding: .utf8)
        for file in ["actions", "rules"] { chmod("\(directory)/\(file)", 0o755) }
        bus = try PrivateBus(.system, openToOtherUsers: true)
        busAddress = bus.address
        try "yes\n".write(toFile: "\(directory)/state/answer", atomically: true, encoding: .utf8)
        chmod("\(directory)/state/answer", 0o644)
        let script = """
            mount --bind "$1/actions" /usr/share/polkit-1/actions && mount --bind "$1/rules" /etc/polkit-1/rules.d \
            && exec /usr/lib/polkit-1/polkitd --no-debug
            """
        let daemon = try ChildProcess.start(
            "/usr/bin/unshare", ["-m", "--propagation", "private", "/bin/sh", "-c", script, "sh", directory],
            environment: childEnvironment(["DBUS_SYSTEM_BUS_ADDRESS": busAddress]))
        self.daemon = daemon
        let busAddress = busAddress
        try PrivateBus.waitUntil("polkitd did not take org.freedesktop.PolicyKit1: \(String(decoding: daemon.captured("stderr"), as: UTF8.self))") {
            if daemon.poll() != nil { throw StandInFailed(what: "polkitd exited: \(String(decoding: daemon.captured("stderr"), as: UTF8.self))") }
            return try PrivateBus.nameHasOwner("org.freedesktop.PolicyKit1", bus: .system, environment: ["DBUS_SYSTEM_BUS_ADDRESS": busAddress])
        }
    }

    deinit {
        _ = daemon.stop(grace: .seconds(1))
        bus.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// What the rule answers from now on.
    public func answer(_ yes: Bool) throws {
        try (yes ? "yes\n" : "no\n").write(toFile: "\(directory)/state/answer", atomically: true, encoding: .utf8)
        chmod("\(directory)/state/answer", 0o644)
    }

    /// The checks polkitd's rule saw so far: one line each, "PID USER".
    public func checks() -> [String] {
        ((try? String(contentsOfFile: "\(directory)/state/calls", encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// Runs `executable` as uid/gid 65534 on this bus, with a home and a runtime directory of
    /// that user's, the file `passphraseFile` open as fd 3, and no session bus.
    public func runAsOtherUser(_ executable: URL, _ arguments: [String], passphraseFile: String, stdin: Data? = nil) throws -> ChildResult {
        // A copy uid 65534 may run: the build folder can lie under a directory only root enters
        // (CI's clone is in a 0700 folder: exit 126). tokenctl's libraries are the toolchain's.
        let copy = "\(directory)/\(executable.lastPathComponent)"
        if !FileManager.default.fileExists(atPath: copy) {
            try FileManager.default.copyItem(atPath: executable.path, toPath: copy)
            chmod(copy, 0o755)
        }
        // A sanitizer build's runtime opens its log_path (under the 0700 clone) at start, which
        // this user cannot: its reports go to the child's stderr instead, where a failing
        // expectation shows them.
        var sanitizerOptions: [String: String] = [:]
        for name in ["ASAN_OPTIONS", "TSAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"] {
            if let value = ProcessInfo.processInfo.environment[name] { sanitizerOptions[name] = value + ":log_path=stderr" }
        }
        return try runChild(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            ["--reuid", "65534", "--regid", "65534", "--clear-groups", "/bin/sh", "-c", "exec \"$0\" \"$@\" 3<\"$TS_PASSPHRASE_FILE\"", copy] + arguments,
            environment: [
                "DBUS_SYSTEM_BUS_ADDRESS": busAddress, "DBUS_SESSION_BUS_ADDRESS": "unix:path=\(directory)/no-session-bus",
                "HOME": "\(directory)/home", "XDG_RUNTIME_DIR": "\(directory)/home/run", "TS_PASSPHRASE_FILE": passphraseFile,
                "XDG_DATA_HOME": "\(directory)/home/data", "XDG_CONFIG_HOME": "\(directory)/home/config", "XDG_CACHE_HOME": "\(directory)/home/cache",
                "TMPDIR": "\(directory)/home",
            ].merging(sanitizerOptions) { _, sanitizer in sanitizer },
            stdin: stdin)
    }
}
