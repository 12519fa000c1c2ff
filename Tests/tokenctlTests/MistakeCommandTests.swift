import Foundation
import TestTraits
import Testing
import TestSupport

/// The new-user trial's mistakes (new-user-trial.md, section 2, and issue 24 items 10–12): a
/// name that is not UTF-8, another program's database, a failed first open, a lenient `status`.
/// Each test drives the built tokenctl as a user would, against the real private keyring.
@Suite("tokenctl and the user's mistakes: bytes, foreign files, layouts", tokenctlKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct MistakeCommandTests {
    /// Every command that opens a store, with the arguments it needs.
    static let storeCommands: [[String]] = [
        ["list"], ["get", "--account", "a", "--kind", "generic"], ["verify"], ["accounts"], ["status"], ["pending"],
        ["profile", "--account", "a"], ["state", "u"], ["history", "u"], ["put", "--account", "a", "--kind", "generic"],
        ["delete", "--account", "a", "--kind", "generic"], ["migrate"], ["rotate-key"], ["reset", "--yes"],
        ["destroy", "--yes"],
    ]

    /// The commands that only read: they never create, migrate, chmod or add side files.
    static let readOnlyCommands: [[String]] = [
        ["list"], ["get", "--account", "alice", "--kind", "generic"], ["verify"], ["accounts"], ["status"], ["pending"],
        ["profile", "--account", "alice"], ["state", "u"], ["history", "u"],
    ]

    static func sideFiles(of path: String) -> [String] {
        ["-wal", "-shm", "-journal"].map { path + $0 }.filter { FileManager.default.fileExists(atPath: $0) }
    }

    @Test("a non-UTF-8 account is refused (64, not echoed) and stores nothing; two such names never become one item")
    func nonUTF8AccountIsRefused() throws {
        // Found in the trial: caf\xe9 and caf\xe8 were both folded to "caf\u{FFFD}", and the second put replaced the first.
        let store = try TokenctlStore()
        try store.put("first", account: "café")
        for byte in ["\\351", "\\350"] {
            // The shell makes the raw byte: a Swift String cannot hold invalid UTF-8.
            let result = try ChildProcess.run(
                "/bin/sh",
                ["-c", "printf 'second\\n' | \"$0\" --store \"$1\" put --account \"$(printf 'caf\(byte)')\" --kind generic",
                 TokenctlBinary.url.path, store.path],
                environment: TokenctlStore.keyringEnvironment.merging(["LANG": "C.UTF-8"]) { a, _ in a })
            #expect(result.termination.shellStatus == 64, "\(result.standardErrorText)")
            #expect(result.standardErrorText.contains("is not valid UTF-8"), "\(result.standardErrorText)")
            #expect(!result.standardErrorText.contains("caf"), "the value was echoed")
        }
        let list = try store.json(["list"])
        #expect(list.object["count"] as? Int == 1, "\(list.result.standardOutput)")
        let get = try store.json(["get", "--account", "café", "--kind", "generic", "--reveal"])
        #expect(get.object["secret"] as? String == "first")
        let replaced = try store.run(["get", "--account", "caf\u{FFFD}", "--kind", "generic"])
        #expect(replaced.exitCode == 1, "the U+FFFD name must name no item")
    }

    @Test("another program's database: every command refuses it (65, notAStore); its bytes are unchanged and no side file appears")
    func foreignDatabaseIsNeverChanged() throws {
        // Found in the trial: even list, get, verify and accounts wrote 15 TokenStore tables into the file.
        let directory = try TemporaryDirectory()
        let path = directory.appending("app.db").path
        let made = try PrivateKeyring.run(
            "sqlite3", [path, "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes(body) VALUES ('one'), ('two'), ('three');"])
        #expect(made.status == 0, "\(made)")
        chmod(path, 0o600)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        for command in Self.storeCommands {
            let result = try TokenctlBinary.run(
                ["--store", path] + command, environment: TokenctlStore.keyringEnvironment, stdin: "x\n")
            #expect(result.exitCode == 65, "\(command): \(result.standardError)")
            #expect(result.standardError.contains("not a TokenStore store"), "\(command): \(result.standardError)")
            #expect(result.standardError.contains("[notAStore]"), "\(command)")
            #expect(!result.standardError.contains("restore the store file from a backup"), "\(command): blames the file")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "\(command) changed the file")
            #expect(Self.sideFiles(of: path).isEmpty, "\(command) added \(Self.sideFiles(of: path))")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["app.db"])
    }

    @Test("the read-only commands change nothing: no side file, no mode fix, no migration; a writing command reports the mode it fixed")
    func readOnlyCommandsChangeNothing() throws {
        // Found in the trial: status created 0644 -wal/-shm next to a 0644 database; list silently made it 0600.
        let store = try TokenctlStore()
        try store.put("kept")
        #expect(Self.sideFiles(of: store.path).isEmpty)
        chmod(store.path, 0o644)
        let before = try Data(contentsOf: URL(fileURLWithPath: store.path))
        for command in Self.readOnlyCommands {
            let result = try store.run(command)
            #expect([0, 1].contains(result.exitCode), "\(command): \(result.standardError)")
            #expect(Self.sideFiles(of: store.path).isEmpty, "\(command) added \(Self.sideFiles(of: store.path))")
            #expect(try Data(contentsOf: URL(fileURLWithPath: store.path)) == before, "\(command) changed the file")
            #expect(FileLayoutMode.of(store.path) == 0o644, "\(command) changed the mode")
        }
        let status = try store.run(["status"])
        #expect(status.standardOutput.contains("The database file is 0644: the next command that writes makes them"),
            "\(status.standardOutput)")
        let put = try store.run(["put", "--account", "bob", "--kind", "generic"], stdin: "x\n")
        #expect(put.exitCode == 0, "\(put.standardError)")
        #expect(put.standardError.contains("tokenctl: made the database file 0600 (it was 0644)"), "\(put.standardError)")
        #expect(FileLayoutMode.of(store.path) == 0o600)
    }

    @Test("a database its owner made read-only (0400) is never loosened: put and rotate-key refuse it (77), nothing changes")
    func readOnlyDatabaseIsNotLoosened() throws {
        // Found in trial 2: put and rotate-key printed "made the database file 0600 (it was 0400)" and wrote.
        let store = try TokenctlStore()
        try store.put("kept")
        chmod(store.path, 0o400)
        let before = try Data(contentsOf: URL(fileURLWithPath: store.path))
        let listed = try store.json(["list"]).object["items"] as? [[String: Any]]
        for command in [["put", "--account", "carol", "--kind", "generic"], ["rotate-key"], ["delete", "--account", "alice", "--kind", "generic"]] {
            let result = try store.run(command, stdin: "x\n")
            #expect(result.exitCode == 77, "\(command): \(result.standardError)")
            #expect(result.standardError.contains("The database file is read-only (mode 0400)"), "\(command): \(result.standardError)")
            #expect(result.standardError.contains("[unsafeFileLayout]"), "\(command)")
            #expect(result.standardError.contains("tokenctl: hint: the commands that only read still work"), "\(command): \(result.standardError)")
            #expect(!result.standardError.contains("made the database file"), "\(command): \(result.standardError)")
            #expect(FileLayoutMode.of(store.path) == 0o400, "\(command) changed the mode")
            #expect(try Data(contentsOf: URL(fileURLWithPath: store.path)) == before, "\(command) changed the file")
            #expect(Self.sideFiles(of: store.path).isEmpty, "\(command) added \(Self.sideFiles(of: store.path))")
        }
        // Reading still works, and the owner's own chmod makes it writable again.
        let get = try store.run(["get", "--account", "alice", "--kind", "generic", "--raw"])
        #expect(get.exitCode == 0 && get.standardOutput == "kept", "\(get.standardError)")
        #expect((try store.json(["list"]).object["items"] as? [[String: Any]])?.count == listed?.count)
        chmod(store.path, 0o600)
        try store.put("carol's", account: "carol")
        // Only tightening stays automatic: 0640 is made 0600 and reported.
        chmod(store.path, 0o640)
        let tightened = try store.run(["put", "--account", "dave", "--kind", "generic"], stdin: "x\n")
        #expect(tightened.exitCode == 0, "\(tightened.standardError)")
        #expect(tightened.standardError.contains("made the database file 0600 (it was 0640)"), "\(tightened.standardError)")
    }

    @Test("a zero-length file: the reading commands say it is empty (66) and leave it so; put makes it a store")
    func emptyFileBecomesAStoreOnlyByAWrite() throws {
        let store = try TokenctlStore()
        try FileManager.default.createDirectory(atPath: store.directory.appending("store").path, withIntermediateDirectories: true)
        chmod(store.directory.appending("store").path, 0o700)
        #expect(FileManager.default.createFile(atPath: store.path, contents: Data(), attributes: [.posixPermissions: 0o600]))
        for command in [["list"], ["get", "--account", "alice", "--kind", "generic"], ["accounts"]] {
            let result = try store.run(command)
            #expect(result.exitCode == 66, "\(command): \(result.standardError)")
            #expect(result.standardError.contains("the store file is empty"), "\(command)")
            #expect(FileLayoutMode.size(store.path) == 0, "\(command) wrote to the empty file")
            #expect(Self.sideFiles(of: store.path).isEmpty)
        }
        try store.put("first")
        #expect(try store.json(["list"]).object["count"] as? Int == 1)
    }

    @Test("a store that needs a migration: read-only commands refuse it naming 'tokenctl migrate' and leave it unchanged")
    func readOnlyCommandsDoNotMigrate() throws {
        let store = try TokenctlStore()
        try store.put("kept")
        // Make the file look one migration behind: its newest ledger row removed (the schema check runs after).
        _ = try store.sqlite("DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)")
        let before = try Data(contentsOf: URL(fileURLWithPath: store.path))
        let list = try store.run(["list"])
        #expect(list.exitCode == 65, "\(list.standardError)")
        #expect(list.standardError.contains("[migrationRequired]"), "\(list.standardError)")
        #expect(list.standardError.contains("tokenctl migrate"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: store.path)) == before)
        #expect(Self.sideFiles(of: store.path).isEmpty)
    }

    @Test("status judges the layout like every command: a group- or world-writable directory is 77")
    func statusRefusesWritableDirectory() throws {
        // Found in the trial: status said "the store opens normally" for a 0777 directory.
        let store = try TokenctlStore()
        try store.put("kept")
        for mode in [0o770, 0o777] as [mode_t] {
            chmod(store.directory.appending("store").path, mode)
            let status = try store.run(["status"])
            #expect(status.exitCode == 77, "\(status.standardError)")
            #expect(status.standardError.contains("writable by other users"), "\(status.standardError)")
            #expect(Self.sideFiles(of: store.path).isEmpty)
        }
    }

    @Test("an unreadable database or a directory that cannot be entered is 77 'Permission denied', not ioError or 'no store'",
          .enabled(if: geteuid() == 0, "needs root to make a store owned by uid 65534"))
    func unreadableStoreIsPermissionDenied() throws {
        let directory = try TemporaryDirectory()
        chmod(directory.path, 0o711)
        let storeDirectory = directory.appending("store").path
        try FileManager.default.createDirectory(atPath: storeDirectory, withIntermediateDirectories: false)
        let path = storeDirectory + "/tokens.sqlite"
        try Data("not read".utf8).write(to: URL(fileURLWithPath: path))
        chown(storeDirectory, 65534, 65534)
        chown(path, 65534, 65534)
        chmod(storeDirectory, 0o700)
        func asNobody(_ command: [String]) throws -> (status: Int32, error: String) {
            let result = try ChildProcess.run(
                "/usr/bin/setpriv",
                ["--reuid=65534", "--regid=65534", "--clear-groups", TokenctlBinary.url.path, "--store", path] + command,
                environment: ["PATH": "/usr/bin:/bin", "HOME": directory.path, "LANG": "C.UTF-8"], input: Data("x\n".utf8))
            return (result.termination.shellStatus, result.standardErrorText)
        }
        chmod(path, 0o000)
        for command in [["status"], ["list"], ["put", "--account", "a", "--kind", "generic"]] {
            let result = try asNobody(command)
            #expect(result.status == 77, "\(command): \(result.error)")
            #expect(result.error.contains("Permission denied: the database file cannot be read"), "\(command): \(result.error)")
            #expect(!result.error.contains("[ioError]"))
        }
        chmod(path, 0o600)
        chmod(storeDirectory, 0o000)
        for command in [["status"], ["list"], ["get", "--account", "a", "--kind", "generic"]] {
            let result = try asNobody(command)
            #expect(result.status == 77, "\(command): \(result.error)")
            #expect(result.error.contains("Permission denied: the store directory cannot be entered"), "\(command): \(result.error)")
            #expect(!result.error.contains("no store at the given path"))
        }
        chmod(storeDirectory, 0o700)
    }
}

/// The mode bits and size of a path, read the way a user would (`stat`).
enum FileLayoutMode {
    static func size(_ path: String) -> Int? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return Int(info.st_size)
    }

    static func of(_ path: String) -> Int? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return Int(info.st_mode & 0o7777)
    }
}
