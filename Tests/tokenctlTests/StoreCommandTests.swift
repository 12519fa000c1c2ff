import Foundation
import TestTraits
import Testing
import TestSupport

/// The store commands run as a user runs them: the built binary, a store in a temporary
/// directory, the real Secret Service of the private keyring, the `sqlite3` shell for tampering.
@Suite("tokenctl store commands", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct StoreCommandTests {
    static let itemKeys: Set<String> = [
        "service", "account", "kind", "label", "createdAt", "updatedAt", "expiresAt", "scopes", "fingerprint", "byteCount",
    ]

    @Test("put from stdin, then get --reveal gives the same secret back; one trailing newline is stripped")
    func putThenGetRoundTrip() throws {
        let store = try TokenctlStore()
        let canary = makeCanary()
        let put = try store.run(["put", "--account", "alice", "--kind", "generic", "--label", "note"], stdin: canary + "\n")
        #expect(put.exitCode == 0, "\(put.standardError)")
        #expect(!put.standardOutput.contains(canary))

        let get = try store.run(["get", "--account", "alice", "--kind", "generic", "--reveal"])
        #expect(get.exitCode == 0)
        #expect(get.standardOutput.contains("secret       \(canary)\n"), "\(get.standardOutput)")
        #expect(get.standardError == "")  // stdout is a file: no terminal warning

        let json = try store.json(["get", "--account", "alice", "--kind", "generic", "--reveal"])
        #expect(json.result.exitCode == 0)
        expectKeys(json.object, Self.itemKeys.union(["secret", "secretBase64"]))
        #expect(json.object["secret"] as? String == canary)
        #expect(json.object["byteCount"] as? Int == canary.utf8.count)
        #expect(json.object["label"] as? String == "note")

        // Only one newline goes: a secret ending in a newline keeps the rest.
        let twoNewlines = try store.run(["put", "--account", "bob", "--kind", "generic"], stdin: "x\n\n")
        #expect(twoNewlines.exitCode == 0)
        let bob = try store.json(["get", "--account", "bob", "--kind", "generic", "--reveal"])
        #expect(bob.object["secret"] as? String == "x\n")
    }

    @Test("store commands never load libcurl (it is loaded at the first HTTP request), nor full Foundation or ICU")
    func storeCommandsLoadNoHTTPClientNorICU() throws {
        let store = try TokenctlStore()
        let put = try store.run(["put", "--account", "alice", "--kind", "generic"], stdin: "secret")
        #expect(put.exitCode == 0, "\(put.standardError)")
        // The dynamic loader names every library it loads (on stderr) under LD_DEBUG=libs.
        for arguments in [["--version"], ["get", "--account", "alice", "--kind", "generic", "--reveal"]] {
            let result = try store.run(arguments, environment: ["LD_DEBUG": "libs"])
            #expect(result.exitCode == 0)
            let loaded = result.standardError.split(separator: "\n").filter { $0.contains("calling init:") }
            #expect(loaded.contains { $0.contains("libc.so") }, "LD_DEBUG shows no loads: \(result.standardError.prefix(300))")
            if arguments.count > 1 { #expect(loaded.contains { $0.contains("libsecret") }) }
            for library in ["libcurl", "libFoundation.so", "libFoundationInternationalization", "_FoundationICU"] {
                #expect(!loaded.contains { $0.contains(library) }, "tokenctl \(arguments[0]) loaded \(library)")
            }
        }
    }

    /// New-user trial 2: a storage-only app's generic items showed the service `auth0` in `list`.
    @Test("the default service shows as '(default)' in list, get and accounts text; JSON keeps its stored name; lookups unchanged")
    func defaultServiceIsNotShownAsAuth0() throws {
        let store = try TokenctlStore()
        try store.put("plain", account: "alice")
        let bench = try store.run(["put", "--service", "bench", "--account", "carol", "--kind", "generic"], stdin: "b\n")
        #expect(bench.exitCode == 0, "\(bench.standardError)")
        let list = try store.run(["list"])
        let rows = list.standardOutput.split(separator: "\n").dropFirst().map { $0.split(separator: " ").map(String.init) }
        #expect(rows.map { $0.first } == ["(default)", "bench"], "\(list.standardOutput)")
        #expect(!list.standardOutput.contains("auth0"), "\(list.standardOutput)")
        let get = try store.run(["get", "--account", "alice", "--kind", "generic"])
        #expect(get.standardOutput.contains("service      (default)\n"), "\(get.standardOutput)")
        // JSON keeps the stored name, which --service also takes: the same item either way.
        let items = try store.json(["list"]).object["items"] as? [[String: Any]] ?? []
        #expect(items.compactMap { $0["service"] as? String }.sorted() == ["auth0", "bench"])
        let explicit = try store.run(["get", "--service", "auth0", "--account", "alice", "--kind", "generic", "--raw"])
        #expect(explicit.exitCode == 0 && explicit.standardOutput == "plain", "\(explicit.standardError)")
        let help = try TokenctlBinary.run(["help", "get"])
        #expect(help.standardOutput.contains("'(default)'; stored as 'auth0'"), "\(help.standardOutput)")
    }

    @Test("get without --reveal, list and status never show the secret; text and JSON keys are stable")
    func inspectionNeverShowsTheSecret() throws {
        let store = try TokenctlStore()
        let canary = makeCanary()
        try store.put(canary, account: "alice")
        try store.put(makeCanary(), account: "bob", kind: "refresh-token")

        let get = try store.run(["get", "--account", "alice", "--kind", "generic"])
        #expect(get.exitCode == 0)
        #expect(get.standardOutput.contains("fingerprint"))
        let getJSON = try store.json(["get", "--account", "alice", "--kind", "generic"])
        expectKeys(getJSON.object, Self.itemKeys)

        let list = try store.run(["list"])
        #expect(list.exitCode == 0)
        #expect(list.standardOutput.split(separator: "\n").first?.split(separator: " ").prefix(3) == ["SERVICE", "ACCOUNT", "KIND"])
        #expect(list.standardOutput.split(separator: "\n").count == 3)
        let listJSON = try store.json(["list"])
        expectKeys(listJSON.object, ["count", "items"])
        #expect(listJSON.object["count"] as? Int == 2)
        let items = listJSON.object["items"] as? [[String: Any]] ?? []
        #expect(items.count == 2)
        for item in items { expectKeys(item, Self.itemKeys) }
        #expect(items.map { $0["account"] as? String } == ["alice", "bob"])

        let status = try store.run(["status"])
        #expect(status.exitCode == 0)
        #expect(status.standardOutput.contains("key state            present"))
        #expect(status.standardOutput.contains("dir 0700  db 0600"))
        let statusJSON = try store.json(["status"])
        #expect(statusJSON.object["recordedKeyProvider"] as? String == "secret-service")
        expectKeys(statusJSON.object, [
            "path", "appID", "schemaVersion", "supportedSchemaVersion", "pendingMigrations", "storeID", "keyID", "keyProvider",
            "recordedKeyProvider", "discovery", "keyState", "keyStateExplanation", "epoch", "counts", "fileModes", "processDumpable", "provider",
            "protection", "protectionReason", "tpm", "accessPolicy", "locked", "lockSource", "keySlots", "tpmLockout",
        ])
        #expect(statusJSON.object["accessPolicy"] as? String == "afterFirstUnlock")
        #expect(statusJSON.object["locked"] as? Bool == false)
        #expect(statusJSON.object["lockSource"] as? String == "explicit")
        // The key slots (issue 37): the one a new store has, its provider's; never a secret.
        let slots = statusJSON.object["keySlots"] as? [[String: Any]]
        #expect(slots?.count == 1 && slots?.first?["kind"] as? String == "keyring" && slots?.first?["id"] as? Int == 1, "\(slots ?? [])")
        #expect(status.standardOutput.contains("key slots            1 keyring"), "\(status.standardOutput)")
        // The program serving the keys, named after the owner of org.freedesktop.secrets.
        let expectedProvider = ["gnome-keyring": "gnome-keyring", "keepassxc": "KeePassXC", "kwallet": "KWallet"][
            PrivateKeyring.provider]
        let providerObject = statusJSON.object["provider"] as? [String: Any]
        #expect(providerObject?["name"] as? String == expectedProvider, "\(providerObject ?? [:])")
        #expect(providerObject.map { Set($0.keys) } == ["name", "version", "executable"])
        #expect(status.standardOutput.contains("key provider         secret-service (\(expectedProvider ?? "?")"))
        // Finding 11: tokenctl turns core dumps and ptrace off for itself (PR_SET_DUMPABLE 0).
        #expect(statusJSON.object["processDumpable"] as? Bool == false)
        #expect(statusJSON.object["keyState"] as? String == "present")
        #expect(statusJSON.object["keyProvider"] as? String == "secret-service")
        let counts = statusJSON.object["counts"] as? [String: Any] ?? [:]
        expectKeys(counts, ["items", "accounts", "pendingRevocations", "failedRevocations", "credentialStates", "historyEntries"])
        #expect(counts["items"] as? Int == 2)
        #expect(counts["accounts"] as? Int == 2)
        let modes = statusJSON.object["fileModes"] as? [String: Any] ?? [:]
        expectKeys(modes, ["directory", "database", "wal", "shm"])
        #expect(modes["database"] as? String == "0600")
        #expect(modes["directory"] as? String == "0700")

        for output in [get, getJSON.result, list, listJSON.result, status, statusJSON.result] {
            #expect(!output.standardOutput.contains(canary))
            #expect(!output.standardError.contains(canary))
        }
    }

    @Test("delete, state, history and pending on a store with no session; text and JSON")
    func deleteStateHistoryPending() throws {
        let store = try TokenctlStore()
        try store.put(makeCanary())
        let deleted = try store.json(["delete", "--account", "alice", "--kind", "generic"])
        #expect(deleted.result.exitCode == 0)
        expectKeys(deleted.object, ["deleted", "service", "account", "kind"])
        #expect(deleted.object["deleted"] as? Bool == true)
        let again = try store.run(["delete", "--account", "alice", "--kind", "generic"])
        #expect(again.exitCode == 0)
        #expect(again.standardOutput == "Nothing to delete: no such item.\n")
        let gone = try store.run(["get", "--account", "alice", "--kind", "generic"])
        #expect(gone.exitCode == 1)
        #expect(gone.standardError.hasPrefix("tokenctl: error: no item"))

        let state = try store.run(["state", "never.seen.user"])
        #expect(state.exitCode == 0)
        #expect(state.standardOutput == "notFound\n")
        let stateJSON = try store.json(["state", "never.seen.user"])
        expectKeys(stateJSON.object, ["state"])
        let history = try store.json(["history", "never.seen.user"])
        #expect(history.result.exitCode == 0)
        expectKeys(history.object, ["state", "transitions"])
        #expect((history.object["transitions"] as? [Any])?.isEmpty == true)
        let pending = try store.run(["pending"])
        #expect(pending.exitCode == 0)
        #expect(pending.standardOutput == "No pending revocations.\n")
        let pendingJSON = try store.json(["pending"])
        expectKeys(pendingJSON.object, ["count", "entries", "unreadable"])
        #expect(pendingJSON.object["count"] as? Int == 0)
    }

    @Test("verify finds a row tampered through the sqlite3 shell, names it, exits 65; the secret never shows")
    func verifyFindsTamperedRow() throws {
        let store = try TokenctlStore()
        let canary = makeCanary()
        try store.put(canary, account: "alice")
        try store.put(makeCanary(), account: "bob")
        let clean = try store.json(["verify"])
        #expect(clean.result.exitCode == 0)
        expectKeys(clean.object, ["healthy", "integrityCheck", "rowsChecked", "badRows", "schemaDifferences", "epoch"])
        #expect(clean.object["healthy"] as? Bool == true)
        #expect(clean.object["rowsChecked"] as? Int == 2)

        // Flip one byte of one sealed blob with the sqlite3 shell.
        let row = try store.sqlite("SELECT hex(lookup) || '|' || hex(sealed) FROM items LIMIT 1").split(separator: "|")
        let lookup = String(row[0]), sealed = Array(String(row[1]))
        var tampered = sealed
        let index = sealed.count / 2
        tampered[index] = tampered[index] == "0" ? "1" : "0"
        _ = try store.sqlite("UPDATE items SET sealed = X'\(String(tampered))' WHERE hex(lookup) = '\(lookup)'")
        let rowID = String(lookup.lowercased().prefix(12))

        let verify = try store.run(["verify"])
        #expect(verify.exitCode == 65)
        #expect(verify.standardOutput.contains("bad rows         1"))
        #expect(verify.standardOutput.contains("items  \(rowID)  integrityCheckFailed"), "\(verify.standardOutput)")
        #expect(verify.standardError.hasPrefix("tokenctl: error: the store failed verification: 1 bad row(s)"))
        let json = try store.json(["verify"])
        #expect(json.result.exitCode == 65)
        #expect(json.object["healthy"] as? Bool == false)
        let bad = json.object["badRows"] as? [[String: Any]] ?? []
        #expect(bad.count == 1)
        #expect(bad.first?["table"] as? String == "items")
        #expect(bad.first?["rowID"] as? String == rowID)
        #expect((bad.first?["reason"] as? String)?.hasPrefix("integrityCheckFailed") == true)

        // Reading through the damaged row is a data error, with the way forward.
        let list = try store.run(["list"])
        #expect(list.exitCode == 65)
        #expect(list.standardOutput == "")
        #expect(list.standardError.contains("tokenctl: hint: run 'tokenctl verify'"))
        for output in [verify, json.result, list] {
            #expect(!output.standardOutput.contains(canary) && !output.standardError.contains(canary))
        }
    }

    @Test("bad option, empty stdin, missing store, unsafe layout: 64, 65, 1, 77 — and no secret in any error")
    func errorExitCodes() throws {
        let store = try TokenctlStore()
        let canary = makeCanary()
        try store.put(canary)

        let badOption = try store.run(["get", "--acount", "alice", "--kind", "generic"])
        #expect(badOption.exitCode == 64)
        #expect(badOption.standardError.contains("Usage: tokenctl get"))
        let badKind = try store.run(["get", "--account", "alice", "--kind", "password"])
        #expect(badKind.exitCode == 64)

        let empty = try store.run(["put", "--account", "alice", "--kind", "generic"], stdin: "\n")
        #expect(empty.exitCode == 65)
        #expect(empty.standardError.hasPrefix("tokenctl: error: the secret read from stdin is empty\n"))

        let missing = try TokenctlBinary.run(
            ["--store", store.directory.appending("nowhere/tokens.sqlite").path, "list"],
            environment: TokenctlStore.keyringEnvironment)
        #expect(missing.exitCode == 66)  // EX_NOINPUT since issue 24 (was 1)
        #expect(missing.standardError.hasPrefix("tokenctl: error: no store at the given path\n"))
        #expect(!FileManager.default.fileExists(atPath: store.directory.appending("nowhere").path))

        let noStore = try TokenctlBinary.run(["list"])
        #expect(noStore.exitCode == 64)

        // A store directory others may write to is refused: 77.
        let storeDirectory = store.directory.appending("store").path
        try FileManager.default.setAttributes([.posixPermissions: 0o770], ofItemAtPath: storeDirectory)
        let unsafe = try store.run(["list"])
        #expect(unsafe.exitCode == 77)
        #expect(unsafe.standardError.contains("writable by other users"))
        #expect(unsafe.standardError.contains("tokenctl: hint: "))
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: storeDirectory)

        for output in [badOption, badKind, empty, missing, noStore, unsafe] {
            #expect(output.standardOutput == "")
            #expect(!output.standardError.contains(canary))
        }
    }

    @Test("migrate --dry-run and migrate: nothing pending on a fresh store; JSON keys")
    func migrate() throws {
        let store = try TokenctlStore()
        try store.put(makeCanary())
        let dryRun = try store.json(["migrate", "--dry-run"])
        #expect(dryRun.result.exitCode == 0)
        expectKeys(dryRun.object, ["dryRun", "fromVersion", "toVersion", "supportedSchemaVersion", "migrations"])
        #expect(dryRun.object["dryRun"] as? Bool == true)
        #expect((dryRun.object["migrations"] as? [Any])?.isEmpty == true)
        #expect(dryRun.object["fromVersion"] as? Int == dryRun.object["supportedSchemaVersion"] as? Int)
        let text = try store.run(["migrate"])
        #expect(text.exitCode == 0)
        #expect(text.standardOutput.hasSuffix("nothing to migrate.\n"))
    }
}
