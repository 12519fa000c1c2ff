import Foundation
import TestTraits
import Testing
import TestSupport

/// Exit codes produced by real keyring situations. The locked-keyring cases run in a child
/// on its own private keyring (`scripts/with-keyring`), so locking it cannot disturb the
/// tests running beside this one; the shell script drives tokenctl and gdbus like a person.
@Suite("tokenctl keyring faults", .serialized, tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct KeyringFaultTests {
    /// Runs `script` with `sh -c` inside a fresh private keyring; `$1` is tokenctl, `$2` the
    /// store path, `$3` a directory for outputs. Returns the outputs by file name.
    private func runInOwnKeyring(_ script: String, store: TokenctlStore) throws -> [String: String] {
        let outputs = store.directory.appending("out")
        try FileManager.default.createDirectory(at: outputs, withIntermediateDirectories: true)
        let result = try PrivateKeyring.runChild(
            on: .ownPrivateKeyring, executable: "/bin/sh",
            arguments: ["-c", script, "sh", TokenctlBinary.url.path, store.path, outputs.path],
            timeout: .seconds(180))
        #expect(result.status == 0, "script failed: \(result)")
        var files: [String: String] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: outputs.path) {
            files[name] = try String(contentsOf: outputs.appendingPathComponent(name), encoding: .utf8)
        }
        return files
    }

    /// Locks the default collection of the child's keyring through D-Bus and waits for it.
    private static let lockShell = """
        coll=$(gdbus call --session --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets \
            --method org.freedesktop.Secret.Service.ReadAlias default | sed -n "s/^(objectpath '\\(.*\\)',)$/\\1/p")
        [ -n "$coll" ] || { echo "no default collection" >&2; exit 91; }
        answer=$(gdbus call --session --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets \
            --method org.freedesktop.Secret.Service.Lock "['$coll']") || exit 92
        # KeePassXC answers with a prompt, which locks without a dialog when called.
        prompt=$(printf '%s' "$answer" | sed -n "s|.*objectpath '\\(/org/freedesktop/secrets/prompt/[^']*\\)')$|\\1|p")
        if [ -n "$prompt" ]; then
            gdbus call --session --dest org.freedesktop.secrets --object-path "$prompt" \
                --method org.freedesktop.Secret.Prompt.Prompt "" >/dev/null || exit 94
        fi
        tries=0
        until gdbus call --session --dest org.freedesktop.secrets --object-path "$coll" \
                --method org.freedesktop.DBus.Properties.Get org.freedesktop.Secret.Collection Locked | grep -q true; do
            tries=$((tries + 1)); [ "$tries" -lt 100 ] || exit 93; sleep 0.05
        done
        """

    @Test("locked keyring: list exits 75 with the unlock hint, status explains it and exits 0, unlock headless exits 75")
    func lockedKeyring() throws {
        let store = try TokenctlStore()
        let canary = makeCanary()
        let script = """
            set -u
            T=$1; S=$2; O=$3
            printf '%s\\n' '\(canary)' | "$T" --store "$S" put --account alice --kind generic >/dev/null || exit 90
            \(Self.lockShell)
            "$T" --store "$S" list >"$O/list.out" 2>"$O/list.err"; echo $? >"$O/list.rc"
            "$T" --store "$S" get --account alice --kind generic --reveal >"$O/get.out" 2>"$O/get.err"; echo $? >"$O/get.rc"
            "$T" --store "$S" status >"$O/status.out" 2>"$O/status.err"; echo $? >"$O/status.rc"
            "$T" --store "$S" --json status >"$O/status-json.out" 2>"$O/status-json.err"; echo $? >"$O/status-json.rc"
            # KeePassXC and KWallet would wait on an invisible password dialog.
            if [ "${TOKENSTORE_TEST_PROVIDER:-gnome-keyring}" = gnome-keyring ]; then
                "$T" unlock >"$O/unlock.out" 2>"$O/unlock.err"; echo $? >"$O/unlock.rc"
            fi
            exit 0
            """
        let files = try runInOwnKeyring(script, store: store)
        #expect(files["list.rc"] == "75\n", "\(files["list.err"] ?? "")")
        #expect(files["list.out"] == "")
        #expect(files["list.err"]?.hasPrefix("tokenctl: error: The keyring holding the data key is locked") == true, "\(files["list.err"] ?? "")")
        #expect(files["list.err"]?.contains("tokenctl: hint: unlock the keyring: run 'tokenctl unlock'") == true)
        // Issue 24: the operation in words a user knows, not "(load key)".
        #expect(files["list.err"]?.contains("(while reading the store's data key)") == true, "\(files["list.err"] ?? "")")
        #expect(files["list.err"]?.contains("(load key)") == false)
        #expect(files["get.rc"] == "75\n")

        #expect(files["status.rc"] == "0\n", "\(files["status.err"] ?? "")")
        #expect(files["status.out"]?.contains("key state            locked") == true, "\(files["status.out"] ?? "")")
        #expect(files["status.out"]?.contains("Unlock it with 'tokenctl unlock'") == true)
        let json = try JSONSerialization.jsonObject(with: Data((files["status-json.out"] ?? "").utf8)) as? [String: Any]
        #expect(json?["keyState"] as? String == "locked")
        #expect((json?["counts"] as? [String: Any])?["items"] as? Int == 1)

        // No display: gnome-keyring's prompt cannot be shown, which counts as dismissed.
        if PrivateKeyring.canUnlockHeadless {
            #expect(files["unlock.rc"] == "75\n", "\(files["unlock.err"] ?? "")")
            #expect(files["unlock.err"]?.contains("tokenctl: error: The keyring stayed locked") == true)
            // Issue 24: the hint does not send the user back to 'tokenctl unlock'.
            #expect(files["unlock.err"]?.contains("tokenctl: hint: the unlock prompt needs the desktop session") == true,
                "\(files["unlock.err"] ?? "")")
            #expect(files["unlock.err"]?.contains("run 'tokenctl unlock'") == false)
            // Trial 2 saw gcr-prompter's "Gtk-WARNING: cannot open display" beside tokenctl's lines:
            // the session bus starts the prompter for gnome-keyring, and its stderr is the bus
            // daemon's (the terminal of dbus-run-session), never tokenctl's.
            #expect(files["unlock.err"]?.split(separator: "\n").allSatisfy { $0.hasPrefix("tokenctl: ") } == true,
                "\(files["unlock.err"] ?? "")")
        } else {
            #expect(files["unlock.rc"] == nil, "\(PrivateKeyring.noHeadlessUnlockReason): unlock not run")
        }

        for (name, text) in files { #expect(!text.contains(canary), "\(name) shows the secret") }
    }

    @Test("no Secret Service on the bus: put exits 69 with the hint to start one, and leaves no store file or folder")
    func noSecretService() throws {
        let store = try TokenctlStore()
        let script = """
            printf 'x\\n' | "$1" --store "$2" put --account alice --kind generic >"$3/put.out" 2>"$3/put.err"
            echo $? >"$3/put.rc"
            """
        let outputs = store.directory.appending("out")
        try FileManager.default.createDirectory(at: outputs, withIntermediateDirectories: true)
        let result = try PrivateKeyring.runChild(
            on: .withoutSecretService, executable: "/bin/sh",
            arguments: ["-c", script, "sh", TokenctlBinary.url.path, store.path, outputs.path])
        #expect(result.status == 0, "\(result)")
        let rc = try String(contentsOf: outputs.appendingPathComponent("put.rc"), encoding: .utf8)
        let err = try String(contentsOf: outputs.appendingPathComponent("put.err"), encoding: .utf8)
        #expect(rc == "69\n", "\(err)")
        #expect(err.contains("[secretServiceUnavailable]"))
        #expect(err.contains("tokenctl: hint: start a Secret Service"))
        // Issue 24 (trial 3e): the failed first open left an empty 104 KB tokens.sqlite; and no "(store key)" jargon.
        #expect(!FileManager.default.fileExists(atPath: store.path), "a failed put left a store file")
        #expect(!FileManager.default.fileExists(atPath: store.directory.appending("store").path), "a failed put left its folder")
        #expect(!err.contains("(store key)") && !err.contains("(load key)"), "\(err)")
    }

    @Test("data key deleted from the keyring: status says missing and the way forward; list exits 65 with the reset hint")
    func missingKey() throws {
        let store = try TokenctlStore()
        let canary = makeCanary()
        try store.put(canary)
        let storeID = try #require(try store.json(["status"]).object["storeID"] as? String)
        try PrivateKeyring.clearItems(storeID: storeID)

        let status = try store.run(["status"])
        #expect(status.exitCode == 0)
        #expect(status.standardOutput.contains("key state            missing"))
        #expect(status.standardOutput.contains("restore the keyring that held the key"))
        #expect(status.standardOutput.contains("'tokenctl reset --yes'"))
        let json = try store.json(["status"])
        #expect(json.object["keyState"] as? String == "missing")

        let list = try store.run(["list"])
        #expect(list.exitCode == 65)
        #expect(list.standardError.contains("[dataKeyMissing]"))
        #expect(list.standardError.contains("tokenctl: hint: restore the keyring that held the store's data key"))
        #expect(list.standardError.contains("start over with 'tokenctl reset --yes' only when neither can be restored"))
        for output in [status, json.result, list] {
            #expect(!output.standardOutput.contains(canary) && !output.standardError.contains(canary))
        }
    }
}

@Suite("tokenctl: damaged key records", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct DamagedKeyRecordCommandTests {
    /// Reproduces review finding 5 through the binary: a retired status on the active key gave
    /// `dataKeyMissing` with the hint "reset --yes" and status "no data key yet"; `reset` then
    /// deleted the intact key. Now: databaseCorrupt (65), restore-the-file hint, and reset keeps it.
    @Test("status retired by hand: list is databaseCorrupt with the restore hint; reset keeps the key item")
    func retiredStatus() throws {
        let store = try TokenctlStore()
        try store.put(makeCanary())
        let status = try store.json(["status"])
        let storeID = try #require(status.object["storeID"] as? String)
        let keyID = try #require(status.object["keyID"] as? String)
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        _ = try store.sqlite("UPDATE data_keys SET status = 'retired'")

        let list = try store.run(["list"])
        #expect(list.exitCode == 65)
        #expect(list.standardError.contains("[databaseCorrupt]"))
        #expect(list.standardError.contains("restore the database file from a backup"))
        #expect(!list.standardError.contains("reset --yes"))
        let text = try store.run(["status"])
        #expect(!text.standardOutput.contains("no data key yet"))
        #expect(text.standardOutput.contains("do not reset it"))

        let reset = try store.json(["reset", "--yes"])
        #expect(reset.result.exitCode == 0)
        #expect(reset.object["keptKeyIDs"] as? [String] == [keyID])
        #expect(try PrivateKeyring.itemCount(attributes: ["store-id": storeID, "key-id": keyID]) == 1)
    }
}
