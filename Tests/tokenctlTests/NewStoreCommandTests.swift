import Foundation
import TestTraits
import Testing
import TestSupport

/// New-user trial 2, "--store path typo, put": a put (or login) to a path that is not a store
/// yet made a new store and a new keyring key without a word, and the secret went there.
@Suite("tokenctl put/login to a path that is not a store yet", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct NewStoreCommandTests {
    @Test("put to a new path says on stderr that it made a new store (also with --quiet and --json), exit 0; a second put does not")
    func putSaysItMadeAStore() throws {
        let store = try TokenctlStore()
        let first = try store.run(["put", "--account", "alice", "--kind", "generic"], stdin: "one\n")
        #expect(first.exitCode == 0, "\(first.standardError)")
        #expect(first.standardError.contains("tokenctl: note: no store was at \(store.path), so a new one was made, with its folder"),
            "\(first.standardError)")
        #expect(first.standardOutput.hasPrefix("Stored generic"))
        let second = try store.run(["put", "--account", "bob", "--kind", "generic"], stdin: "two\n")
        #expect(second.exitCode == 0)
        #expect(!second.standardError.contains("new one was made"), "\(second.standardError)")

        for flags in [["--quiet"], ["--json"]] {
            let other = try TokenctlStore()
            let result = try TokenctlBinary.run(
                ["--store", other.path] + flags + ["put", "--account", "alice", "--kind", "generic"],
                environment: TokenctlStore.keyringEnvironment, stdin: "x\n")
            #expect(result.exitCode == 0, "\(flags): \(result.standardError)")
            #expect(result.standardError.contains("so a new one was made"), "\(flags): \(result.standardError)")
            if flags == ["--json"] {
                #expect((try? JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8))) != nil, "stdout stays one document")
            }
        }
    }

    @Test("a mistyped file name beside a store, or a mistyped folder (app id) next to one, names the store that exists")
    func typoNamesTheLikelyStore() throws {
        let store = try TokenctlStore()
        try store.put("kept")
        let folder = store.directory.appending("store").path
        let typo = folder + "/tokens.sqlte"
        let result = try TokenctlBinary.run(
            ["--store", typo, "put", "--account", "alice", "--kind", "generic"], environment: TokenctlStore.keyringEnvironment,
            stdin: "wrong place\n")
        #expect(result.exitCode == 0, "\(result.standardError)")
        #expect(result.standardError.contains("no store was at \(typo), so a new one was made (only put and login"), "\(result.standardError)")
        #expect(result.standardError.contains("note: a store exists at \(store.path): if that is the one you meant"),
            "\(result.standardError)")

        // --app-id with a typo: $XDG_DATA_HOME/<app id>/tokens.sqlite, the folder is new.
        let data = try TemporaryDirectory()
        var environment = TokenctlStore.keyringEnvironment
        environment["XDG_DATA_HOME"] = data.path
        let made = try TokenctlBinary.run(
            ["--app-id", "org.example.notes", "put", "--account", "alice", "--kind", "generic"], environment: environment, stdin: "x\n")
        #expect(made.exitCode == 0, "\(made.standardError)")
        let mistyped = try TokenctlBinary.run(
            ["--app-id", "org.exmple.notes", "put", "--account", "alice", "--kind", "generic"], environment: environment, stdin: "x\n")
        #expect(mistyped.exitCode == 0, "\(mistyped.standardError)")
        #expect(mistyped.standardError.contains("org.exmple.notes/tokens.sqlite, so a new one was made, with its folder"),
            "\(mistyped.standardError)")
        #expect(mistyped.standardError.contains("a store exists at \(data.path)/org.example.notes/tokens.sqlite"),
            "\(mistyped.standardError)")
        // Destroying the mistyped one as the note says leaves the intended store alone.
        let destroyed = try TokenctlBinary.run(["--app-id", "org.exmple.notes", "destroy", "--yes"], environment: environment)
        #expect(destroyed.exitCode == 0, "\(destroyed.standardError)")
        let listed = try TokenctlBinary.run(["--json", "--app-id", "org.example.notes", "list"], environment: environment)
        #expect(listed.standardOutput.contains("\"count\": 1"), "\(listed.standardOutput)")
    }

    @Test("login to a new path says so too")
    func loginSaysItMadeAStore() throws {
        let store = try TokenctlStore()
        let server = try AuthorizationServer()
        let code = try server.appleAuthorizationCode(for: "000444.newstore.apple")
        let result = try store.run(
            ["login", "--account", "alice", "--domain", server.baseURL.absoluteString, "--client-id", AuthorizationServer.publicClientID],
            stdin: code)
        #expect(result.exitCode == 0, "\(result.standardError)")
        #expect(result.standardError.contains("so a new one was made, with its folder"), "\(result.standardError)")
    }
}
