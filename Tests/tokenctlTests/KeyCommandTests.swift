import Foundation
import TestTraits
import Testing
import TestSupport

/// rotate-key, reset --yes, destroy --yes and --passphrase-fd through the binary.
@Suite("tokenctl key commands", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct KeyCommandTests {
    @Test("rotate-key: a new key id, every item still opens, verify is clean; JSON keys")
    func rotateKey() throws {
        let store = try TokenctlStore()
        let canary = makeCanary()
        try store.put(canary)
        try store.put(makeCanary(), account: "bob")
        let before = try #require(try store.json(["status"]).object["keyID"] as? String)

        let rotation = try store.json(["rotate-key"])
        #expect(rotation.result.exitCode == 0, "\(rotation.result.standardError)")
        expectKeys(rotation.object, ["previousKeyID", "newKeyID", "rowsResealed", "batches", "resumed"])
        #expect(rotation.object["previousKeyID"] as? String == before)
        let after = try #require(rotation.object["newKeyID"] as? String)
        #expect(after != before)
        #expect((rotation.object["rowsResealed"] as? Int ?? 0) >= 2)

        #expect(try store.json(["status"]).object["keyID"] as? String == after)
        let get = try store.json(["get", "--account", "alice", "--kind", "generic", "--reveal"])
        #expect(get.object["secret"] as? String == canary)
        #expect(try store.run(["verify"]).exitCode == 0)
        let text = try store.run(["rotate-key"])
        #expect(text.exitCode == 0)
        #expect(text.standardOutput.contains("new key id"))
        #expect(!text.standardOutput.contains(canary))
    }

    @Test("reset --yes after the key was lost: the sealed items go, the store opens again; JSON keys")
    func resetAfterLostKey() throws {
        let store = try TokenctlStore()
        let canary = makeCanary()
        try store.put(canary)
        let storeID = try #require(try store.json(["status"]).object["storeID"] as? String)
        try PrivateKeyring.clearItems(storeID: storeID)
        #expect(try store.run(["list"]).exitCode == 65)

        let reset = try store.json(["reset", "--yes"])
        #expect(reset.result.exitCode == 0, "\(reset.result.standardError)")
        expectKeys(reset.object, [
            "itemsDestroyed", "credentialStatesRevoked", "pendingRevocationsLost", "discardedKeyIDs", "keptKeyIDs", "newKeyID",
        ])
        #expect(reset.object["itemsDestroyed"] as? Int == 1)
        let list = try store.json(["list"])
        #expect(list.result.exitCode == 0)
        #expect(list.object["count"] as? Int == 0)
        #expect(try store.json(["status"]).object["keyState"] as? String == "present")
        #expect(try store.run(["reset"]).exitCode == 64)  // --yes is required
        #expect(!reset.result.standardOutput.contains(canary))
    }

    @Test("destroy --yes: the database files and the key item are gone")
    func destroy() throws {
        let store = try TokenctlStore()
        try store.put(makeCanary())
        let storeID = try #require(try store.json(["status"]).object["storeID"] as? String)
        #expect(try PrivateKeyring.itemCount(attributes: ["store-id": storeID]) == 1)

        let destroyed = try store.json(["destroy", "--yes"])
        #expect(destroyed.result.exitCode == 0, "\(destroyed.result.standardError)")
        expectKeys(destroyed.object, ["destroyed", "path"])
        for suffix in ["", "-wal", "-shm"] {
            #expect(!FileManager.default.fileExists(atPath: store.path + suffix), "\(suffix) left")
        }
        #expect(try PrivateKeyring.itemCount(attributes: ["store-id": storeID]) == 0)
        #expect(try store.run(["status"]).exitCode == 66)  // no store any more (EX_NOINPUT since issue 24, was 1)
    }

    @Test("--passphrase-fd: right passphrase round-trips, wrong one is refused and shows nothing")
    func passphraseProvider() throws {
        let store = try TokenctlStore()
        let canary = makeCanary()
        let right = store.directory.appending("right")
        let wrong = store.directory.appending("wrong")
        try Data("correct horse battery staple\n".utf8).write(to: right)
        try Data("not the passphrase\n".utf8).write(to: wrong)

        /// Runs tokenctl with the passphrase file open as descriptor 3, and stdin from `input`.
        func run(_ passphrase: URL, _ arguments: String, input: String = "") throws -> PrivateKeyring.ProcessResult {
            try PrivateKeyring.run(
                "/bin/sh",
                ["-c", "XDG_STATE_HOME=\"$3\" exec \"$0\" --store \"$1\" --passphrase-fd 3 \(arguments) 3<\"$2\"",
                 TokenctlBinary.url.path, store.path, passphrase.path, store.directory.appending("state").path],
                input: Data(input.utf8), timeout: .seconds(120))
        }

        let put = try run(right, "put --account alice --kind generic", input: canary + "\n")
        #expect(put.status == 0, "\(put)")
        let get = try run(right, "--json get --account alice --kind generic --reveal")
        #expect(get.status == 0, "\(get)")
        #expect(get.standardOutput.contains(canary))
        let status = try run(right, "--json status")
        #expect(status.standardOutput.contains("\"keyProvider\": \"passphrase\""))
        // The wrapped key lives under $XDG_STATE_HOME, not beside the database (review finding 15).
        let keyFiles = try FileManager.default.contentsOfDirectory(atPath: store.directory.appending("state/tokenstore/keys").path)
        #expect(keyFiles.filter { $0.hasSuffix(".key") }.count == 1)
        let storeFiles = try FileManager.default.contentsOfDirectory(atPath: (store.path as NSString).deletingLastPathComponent)
        #expect(storeFiles.filter { $0.hasSuffix(".key") }.isEmpty)

        let refused = try run(wrong, "get --account alice --kind generic --reveal")
        #expect(refused.status == 77, "\(refused)")
        #expect(refused.standardError.contains("[wrongPassphrase]"))
        #expect(refused.standardOutput == "")
        #expect(!refused.standardError.contains(canary))

        let unreadable = try TokenctlBinary.run(["--store", store.path, "--passphrase-fd", "9", "list"])
        #expect(unreadable.exitCode == 64)
        #expect(unreadable.standardError.contains("cannot read the passphrase from file descriptor 9"))
    }
}
