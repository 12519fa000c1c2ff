import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore
#if canImport(Glibc)
import Glibc
#endif

/// file_modes_links: the modes the store gives its files whatever the umask, and every
/// hostile layout — symlinks and hard links at the database or its side files, a symlinked,
/// shared, world-writable or sticky directory, files or directory owned by another user, a
/// directory or FIFO where the database should be — refused with `unsafeFileLayout` without
/// following or touching anything. (Moved here from FileLayoutTests: modes, tightening,
/// symlink, hard link, writable directory, symlinked -wal.)
@Suite("Reliability: file_modes_links", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct FileModesLinksTests {
    /// A private directory (0700) with a closed store in it.
    struct Layout {
        let root: TemporaryDirectory
        let dir: String
        let path: String
        init(makeStore: Bool = true) throws {
            root = try TemporaryDirectory()
            chmod(root.path, 0o700)
            dir = root.appending("store").path
            path = dir + "/tokens.sqlite"
            if makeStore {
                let store = try TokenStore(path: path, appID: testAppID)
                try store.set(secret("x"), for: key("alice"))
                store.close()
            } else {
                mkdir(dir, 0o700)
            }
        }
        func open(_ at: String? = nil) throws -> TokenStore { try TokenStore(path: at ?? path, appID: testAppID) }
    }

    static func bytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }
    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    @Test("modes under every umask and every hostile layout refused")
    func fileModesLinks() throws {
        var scenarios: [String: String] = [:]  // name → outcome
        var unsafeOpens = 0, skipped: [String] = []
        let isRoot = geteuid() == 0

        // Modes: in a child process, since the umask is per process and suites run in parallel.
        let child = try Reliability.child()
        for mask in ["000", "022", "077", "002"] {
            let layout = try Layout(makeStore: false)
            let result = try runChild(child, ["umask-open", layout.path, mask])
            let line = result.stdout.split(separator: "\n").first { $0.hasPrefix("MODES ") }.map(String.init) ?? "none: \(result.stderr)"
            let ok = line == "MODES dir=700 db=600 wal=600 shm=600"
            #expect(ok, "umask \(mask): \(line)")
            scenarios["umask_\(mask)"] = ok ? "0700/0600" : line
        }
        // A new directory tree is 0700 at every level the store made.
        do {
            let root = try TemporaryDirectory()
            chmod(root.path, 0o700)
            let deep = root.appending("a/b/c/tokens.sqlite").path
            _ = try TokenStore(path: deep, appID: testAppID)
            let made = ["a", "a/b", "a/b/c"].map { FileLayout.mode(of: root.appending($0).path) }
            #expect(made == [0o700, 0o700, 0o700], "\(made)")
            scenarios["nested_dirs"] = made == [0o700, 0o700, 0o700] ? "0700" : "\(made)"
        }
        // An existing 0644 database is tightened to 0600.
        do {
            let layout = try Layout()
            chmod(layout.path, 0o644)
            _ = try layout.open()
            #expect(FileLayout.mode(of: layout.path) == 0o600)
            scenarios["tighten_0644"] = FileLayout.mode(of: layout.path) == 0o600 ? "0600" : "not tightened"
        }

        /// Runs one hostile scenario: the open must be refused with unsafeFileLayout.
        func refused(_ name: String, at path: String? = nil, _ layout: Layout, untouched: [String] = [], absent: [String] = []) {
            let before = untouched.map(Self.bytes)
            let outcome = outcomeCode { _ = try layout.open(path) }
            scenarios[name] = outcome
            if outcome == "ok" {
                unsafeOpens += 1
                Issue.record("\(name): opened")
            } else {
                #expect(outcome == TokenStoreError.Code.unsafeFileLayout.rawValue, "\(name): \(outcome)")
            }
            for (file, bytes) in zip(untouched, before) { #expect(Self.bytes(file) == bytes, "\(name): \(file) changed") }
            for file in absent { #expect(!Self.exists(file), "\(name): \(file) was created") }
        }

        do {  // symlink at the db path, to a real store
            let layout = try Layout()
            let link = layout.dir + "/link.sqlite"
            symlink(layout.path, link)
            refused("symlink_db", at: link, layout, untouched: [layout.path])
        }
        do {  // dangling symlink at the db path: the target must not be created
            let layout = try Layout()
            let target = layout.root.appending("nowhere").path
            let link = layout.dir + "/dangling.sqlite"
            symlink(target, link)
            refused("symlink_db_dangling", at: link, layout, absent: [target])
        }
        do {  // hard link to the db
            let layout = try Layout()
            link(layout.path, layout.dir + "/other.sqlite")
            refused("hard_link_db", layout, untouched: [layout.path])
        }
        for (name, mode) in [("dir_group_writable", 0o770), ("dir_world_writable", 0o757), ("dir_sticky_1777", 0o1777)] as [(String, mode_t)] {
            let layout = try Layout(makeStore: false)
            chmod(layout.dir, mode)
            refused(name, layout, absent: [layout.path])
        }
        do {  // the directory is a symlink to a private directory
            let layout = try Layout()
            let linkDir = layout.root.appending("linked").path
            symlink(layout.dir, linkDir)
            refused("dir_symlink", at: linkDir + "/tokens.sqlite", layout, untouched: [layout.path])
        }
        for suffix in ["-wal", "-shm", "-journal"] {
            let layout = try Layout()
            let target = layout.root.appending("elsewhere\(suffix)").path
            unlink(layout.path + suffix)
            symlink(target, layout.path + suffix)
            refused("symlink\(suffix)", layout, absent: [target])
        }
        do {  // a stale -wal hard-linked elsewhere
            let layout = try Layout()
            let elsewhere = layout.root.appending("elsewhere-wal").path
            _ = FileManager.default.createFile(atPath: elsewhere, contents: Data(), attributes: [.posixPermissions: 0o600])
            unlink(layout.path + "-wal")
            link(elsewhere, layout.path + "-wal")
            refused("hard_link_wal", layout)
        }
        do {  // a directory, and a FIFO, where the database should be
            let layout = try Layout(makeStore: false)
            mkdir(layout.path, 0o700)
            refused("db_is_directory", layout)
            let fifoLayout = try Layout(makeStore: false)
            mkfifo(fifoLayout.path, 0o600)
            refused("db_is_fifo", fifoLayout)
        }
        if isRoot {
            let nobody: uid_t = 65_534
            do {  // the db owned by another user
                let layout = try Layout()
                chown(layout.path, nobody, nobody)
                refused("db_other_owner", layout, untouched: [layout.path])
            }
            do {  // the -wal owned by another user
                let layout = try Layout()
                _ = FileManager.default.createFile(atPath: layout.path + "-wal", contents: Data(), attributes: [.posixPermissions: 0o600])
                chown(layout.path + "-wal", nobody, nobody)
                refused("wal_other_owner", layout)
            }
            do {  // the directory owned by another user
                let layout = try Layout(makeStore: false)
                chown(layout.dir, nobody, nobody)
                refused("dir_other_owner", layout, absent: [layout.path])
            }
        } else {
            skipped = ["db_other_owner", "wal_other_owner", "dir_other_owner"]
            print("file_modes_links: other-owner scenarios skipped: not running as root (cannot chown to another uid)")
        }

        let refusedCount = scenarios.values.filter { $0 == TokenStoreError.Code.unsafeFileLayout.rawValue }.count
        Reliability.metric("file_modes_links", [
            "scenarios": scenarios.count, "hostile_refused": refusedCount, "unsafe_opens": unsafeOpens,
            "skipped": skipped.isEmpty ? "none" : skipped.joined(separator: ","),
            "outcomes": scenarios.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: ","),
        ])
        #expect(scenarios.count >= 8)
        #expect(unsafeOpens == 0)
    }
}
