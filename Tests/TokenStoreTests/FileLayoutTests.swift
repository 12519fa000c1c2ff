import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore
#if canImport(Glibc)
import Glibc
#endif

/// Modes, links and hostile directories: Reliability/FileModesLinksTests.swift (file_modes_links).
@Suite("File modes and links", .serialized, keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct FileLayoutTests {
    /// Review finding 14: a store directory that already existed with mode 0755 stayed 0755
    /// (the README promises 0700). It is tightened when this user owns it, refused otherwise.
    @Test("an existing 0755 store directory is tightened to 0700; one of another user is refused")
    func existingDirectoryIsTightened() throws {
        let directory = try TemporaryDirectory()
        let storeDirectory = directory.appending("store").path
        #expect(mkdir(storeDirectory, 0o755) == 0)
        #expect(chmod(storeDirectory, 0o755) == 0)
        _ = try TokenStore(path: storeDirectory + "/tokens.sqlite", appID: testAppID)
        #expect(FileLayout.mode(of: storeDirectory) == 0o700)

        guard geteuid() == 0 else { return }  // only root can hand a directory to another user
        let foreign = directory.appending("foreign").path
        #expect(mkdir(foreign, 0o755) == 0)
        #expect(chown(foreign, 65534, 65534) == 0)
        #expect(throws: TokenStoreError.unsafeFileLayout) { _ = try TokenStore(path: foreign + "/tokens.sqlite", appID: testAppID) }
        #expect(FileLayout.mode(of: foreign) == 0o755, "another user's directory is left alone")
    }

    /// New-user trial 2: a writing open made a 0400 database 0600 and wrote to it. Modes are
    /// only tightened: a file its owner made read-only is refused, and nothing is changed.
    @Test("a database (or side file) its owner made read-only is refused by a writing open, unchanged; a read-only open reads it")
    func readOnlyDatabaseIsNeverLoosened() throws {
        let t = try TestStore()
        try t.store.set(SecretBytes(utf8: "kept"), for: ItemKey(account: "alice", kind: .generic))
        t.store.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: t.path))
        for mode in [0o400, 0o500, 0o444] as [mode_t] {
            #expect(chmod(t.path, mode) == 0)
            let error = #expect(throws: TokenStoreError.unsafeFileLayout) { _ = try TokenStore(path: t.path, appID: testAppID) }
            #expect(error?.message.contains("read-only") == true, "\(String(describing: error))")
            #expect(error?.hint?.contains("chmod 0600") == true)
            #expect(FileLayout.mode(of: t.path) == Int(mode), "the mode was changed")
            #expect(try Data(contentsOf: URL(fileURLWithPath: t.path)) == before)
            #expect(!FileManager.default.fileExists(atPath: t.path + "-wal"))
            let reader = try TokenStore(path: t.path, appID: testAppID, options: .init(readOnly: true))
            #expect(try reader.secret(for: ItemKey(account: "alice", kind: .generic))?.stringValue() == "kept")
            reader.close()
        }
        // A tightening stays automatic.
        #expect(chmod(t.path, 0o640) == 0)
        _ = try TokenStore(path: t.path, appID: testAppID)
        #expect(FileLayout.mode(of: t.path) == 0o600)
    }

    @Test("a file that is not a database is databaseCorrupt")
    func notADatabase() throws {
        let dir = try TemporaryDirectory()
        chmod(dir.path, 0o700)
        let path = dir.appending("tokens.sqlite").path
        #expect(FileManager.default.createFile(atPath: path, contents: Data(repeating: 0x41, count: 8192), attributes: [.posixPermissions: 0o600]))
        #expect(throws: TokenStoreError.databaseCorrupt) { try TokenStore(path: path, appID: testAppID) }
    }

    @Test("the default path follows XDG_DATA_HOME and refuses odd app ids")
    func defaultPath() throws {
        let path = try TokenStore.defaultPath(appID: "com.example.app")
        #expect(path.hasSuffix("/com.example.app/tokens.sqlite"))
        #expect(throws: TokenStoreError.invalidInput) { try TokenStore.defaultPath(appID: "../evil") }
        #expect(throws: TokenStoreError.invalidInput) { try TokenStore.defaultPath(appID: "") }
    }

    /// PathNames replaced NSString's path helpers: the same answers, compared with Foundation's.
    @Test("PathNames gives NSString's directory and last component, trailing slashes and the root included")
    func pathNamesMatchNSString() {
        for path in ["/a/b/tokens.sqlite", "/a/b/", "/a//b", "tokens.sqlite", "dir/tokens.sqlite", "/tokens.sqlite", "/", "", "./x", "a/b//", "/a/"] {
            #expect(PathNames.directory(of: path) == (path as NSString).deletingLastPathComponent, "directory of \(path)")
            #expect(PathNames.lastComponent(of: path) == (path as NSString).lastPathComponent, "last component of \(path)")
        }
        // Only "//" differs: swift-corelibs-foundation answers "" for both, Darwin and PathNames "/".
        #expect(PathNames.directory(of: "//") == "/" && PathNames.lastComponent(of: "//") == "/")
        #expect(PathNames.passwordDatabaseHome().hasPrefix("/"))
    }
}
