import Foundation
import TestTraits
import Testing
import TestSupport

/// New-user trial 2, section 2: the mistakes rated "unclear", each now a typed error with its
/// cause and a hint. The read-only mount and the small disk are made in a private mount
/// namespace (`unshare -m`, root only); the folder a user cannot write, as uid 65534.
@Suite("tokenctl and the trial's unclear mistakes", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct TrialMistakeCommandTests {
    static let canMount = geteuid() == 0 && access("/usr/bin/unshare", X_OK) == 0

    /// Runs `script` with `sh -c` in a new mount namespace; `$1` is tokenctl, `$2` `directory`.
    private func inMountNamespace(_ script: String, directory: String) throws -> ChildProcess.Result {
        var environment = TokenctlStore.keyringEnvironment
        environment["PATH"] = "/usr/bin:/bin:/usr/sbin:/sbin"
        environment["HOME"] = ProcessInfo.processInfo.environment["HOME"]
        environment["LANG"] = "C.UTF-8"
        return try ChildProcess.run(
            "/usr/bin/unshare", ["-m", "/bin/sh", "-c", script, "sh", TokenctlBinary.url.path, directory], environment: environment)
    }

    @Test("a read-only mount: the reading commands work; put and rotate-key name EROFS with a hint, nothing changed",
          .enabled(if: canMount, "needs root and unshare for a private read-only mount"))
    func readOnlyMount() throws {
        let store = try TokenctlStore()
        try store.put("kept")
        chmod(store.directory.path, 0o755)
        let before = try Data(contentsOf: URL(fileURLWithPath: store.path))
        let script = """
            mount --bind "$2" "$2" && mount -o remount,bind,ro "$2" || exit 90
            S="$2/store/tokens.sqlite"
            "$1" --store "$S" list >/dev/null 2>&1; echo "list $?"
            printf 'x\\n' | "$1" --store "$S" put --account bob --kind generic 2>&1; echo "put $?"
            "$1" --store "$S" rotate-key 2>&1; echo "rotate-key $?"
            """
        let result = try inMountNamespace(script, directory: store.directory.path)
        let output = result.standardOutputText
        #expect(output.contains("list 0\n"), "\(output)\(result.standardErrorText)")
        #expect(output.contains("put 1\n") && output.contains("rotate-key 1\n"), "\(output)")
        #expect(output.components(separatedBy: "tokenctl: error: The store is on a read-only file system (EROFS)").count == 3, "\(output)")
        #expect(output.contains("tokenctl: hint: the commands that only read still work. To write, remount the file system read-write"),
            "\(output)")
        #expect(!output.contains("SQLite failed while preparing a statement"), "\(output)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: store.path)) == before)
    }

    @Test("a store folder its user cannot write (0500): put is 77 'Permission denied' naming the mode, not ioError; with a 0400 file too",
          .enabled(if: geteuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0, "needs root to run tokenctl as uid 65534"))
    func unwritableFolder() throws {
        let directory = try TemporaryDirectory()
        chmod(directory.path, 0o711)
        let home = directory.appending("home").path
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: false)
        let path = directory.appending("store/tokens.sqlite").path
        func asNobody(_ arguments: [String]) throws -> ChildProcess.Result {
            var environment = TokenctlStore.keyringEnvironment
            environment.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")  // the keyring is root's; uid 65534 has none
            environment.merge(["PATH": "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8", "XDG_STATE_HOME": home]) { _, new in new }
            return try ChildProcess.run(
                "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", TokenctlBinary.url.path, "--store", path]
                    + arguments, environment: environment, input: Data("x\n".utf8))
        }
        chown(home, 65534, 65534)
        // A passphrase store of uid 65534 (no keyring needed), then its folder made 0500.
        let passphrase = directory.appending("pass").path
        try Data("correct horse\n".utf8).write(to: URL(fileURLWithPath: passphrase))
        chmod(passphrase, 0o644)
        try FileManager.default.createDirectory(atPath: directory.appending("store").path, withIntermediateDirectories: false)
        chown(directory.appending("store").path, 65534, 65534)
        chmod(directory.appending("store").path, 0o700)
        let made = try ChildProcess.run(
            "/bin/sh", ["-c", "exec /usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups \"$0\" --store \"$1\" --passphrase-fd 3 put --account a --kind generic 3<\"$2\"",
                        TokenctlBinary.url.path, path, passphrase],
            environment: ["PATH": "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8", "XDG_STATE_HOME": home], input: Data("x\n".utf8))
        #expect(made.termination.shellStatus == 0, "\(made.standardErrorText)")
        chmod(directory.appending("store").path, 0o500)
        let put = try asNobody(["put", "--account", "b", "--kind", "generic"])
        #expect(put.termination.shellStatus == 77, "\(put.standardErrorText)")
        #expect(put.standardErrorText.contains("Permission denied: the store directory cannot be written (mode 0500)"), "\(put.standardErrorText)")
        #expect(put.standardErrorText.contains("[unsafeFileLayout]") && !put.standardErrorText.contains("[ioError]"))
        #expect(put.standardErrorText.contains("tokenctl: hint: "))
        chmod(directory.appending("store").path, 0o700)
        chmod(path, 0o400)
        chmod(directory.appending("store").path, 0o500)
        let both = try asNobody(["put", "--account", "b", "--kind", "generic"])
        #expect(both.termination.shellStatus == 77, "\(both.standardErrorText)")
        #expect(both.standardErrorText.contains("The database file is read-only (mode 0400)"), "\(both.standardErrorText)")
        chmod(directory.appending("store").path, 0o700)
    }

    @Test("no session bus but DISPLAY set (ssh -X): secretServiceUnavailable (69) with its hint, not ioError; a new store is not left")
    func displayWithoutSessionBus() throws {
        let store = try TokenctlStore()
        try store.put("kept")
        let environment = ["DISPLAY": ":99", "XDG_RUNTIME_DIR": store.directory.path]
        let list = try TokenctlBinary.run(["--store", store.path, "list"], environment: environment)
        #expect(list.exitCode == 69, "\(list.standardError)")
        #expect(list.standardError.contains("[secretServiceUnavailable]"), "\(list.standardError)")
        #expect(list.standardError.contains("tokenctl: hint: start a Secret Service"))
        let other = store.directory.appending("other/tokens.sqlite").path
        let put = try TokenctlBinary.run(["--store", other, "put", "--account", "a", "--kind", "generic"], environment: environment, stdin: "x\n")
        #expect(put.exitCode == 69, "\(put.standardError)")
        #expect(!FileManager.default.fileExists(atPath: store.directory.appending("other").path))
    }

    @Test("a 5,000-character --store (or TOKENCTL_STORE) is a usage error naming ENAMETOOLONG")
    func overlongStorePath() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/" + String(repeating: "0", count: 5_000)
        for (arguments, environment) in [(["--store", path, "list"], [:]), (["list"], ["TOKENCTL_STORE": path])] as [([String], [String: String])] {
            let result = try TokenctlBinary.run(arguments, environment: environment)
            #expect(result.exitCode == 64, "\(result.standardError)")
            #expect(result.standardError.contains("invalid value for '--store <path>'"), "\(result.standardError)")
            #expect(result.standardError.contains("too long (ENAMETOOLONG)"), "\(result.standardError)")
            #expect(!result.standardError.contains(String(repeating: "0", count: 100)), "the path is not echoed")
        }
        let put = try TokenctlBinary.run(["--store", path, "put", "--account", "a", "--kind", "generic"], stdin: "x\n")
        #expect(put.exitCode == 64, "\(put.standardError)")
        // A name over 255 bytes in a short path too.
        let longName = try TokenctlBinary.run(["--store", directory.path + "/" + String(repeating: "n", count: 300) + "/tokens.sqlite", "list"])
        #expect(longName.exitCode == 64 && longName.standardError.contains("ENAMETOOLONG"), "\(longName.standardError)")
    }

    @Test("a first put on a disk too small for a store (400 KB tmpfs) leaves no file, folder or keyring key behind",
          .enabled(if: canMount, "needs root and unshare for a private tmpfs"))
    func fullDiskFirstPutLeavesNothing() throws {
        let directory = try TemporaryDirectory()
        let appID = "trial-diskfull-\(UUID().uuidString.prefix(8).lowercased())"
        let script = """
            mount -t tmpfs -o size=400k tmpfs "$2" && chmod 755 "$2" || exit 90
            printf 'x\\n' | "$1" --store "$2/\(appID)/tokens.sqlite" put --account bob --kind generic 2>&1; echo "put $?"
            ls -A "$2"; echo "listed"
            """
        let result = try inMountNamespace(script, directory: directory.path)
        let output = result.standardOutputText
        #expect(output.contains("put 1\n"), "\(output)\(result.standardErrorText)")
        #expect(output.contains("[diskFull]"), "\(output)")
        #expect(output.contains("tokenctl: note: the new store this put had made was removed again"), "\(output)")
        #expect(!output.contains("so a new one was made"), "the note of a store that is gone again: \(output)")
        #expect(output.hasSuffix("put 1\nlisted\n"), "something was left on the small disk: \(output)")
        let keys = try PrivateKeyring.run("secret-tool", ["search", "--all", "xdg:schema", "dev.tokenstore.DataKey"])
        #expect(!(keys.standardOutput + keys.standardError).contains(appID), "a data key item of the removed store is left")
    }

    @Test("--json list on an error prints nothing on stdout and fails a pipefail pipeline")
    func jsonPipelineFails() throws {
        let directory = try TemporaryDirectory()
        let result = try ChildProcess.run(
            "/bin/bash", ["-c", "set -o pipefail; \"$0\" --json --store \"$1\" list | cat; echo \"status $?\"", TokenctlBinary.url.path,
                          directory.appending("none/tokens.sqlite").path])
        #expect(result.standardOutputText == "status 66\n", "\(result.standardOutputText)")
    }
}
