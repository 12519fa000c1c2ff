import Foundation
import Testing
import TestSupport
@testable import TokenStore
#if canImport(Glibc)
import Glibc
#endif

@Suite("File modes and links", .serialized, keyringTrait)
struct FileLayoutTests {
    @Test("directory 0700 and db, -wal, -shm 0600 under umask 000 and 022", arguments: [0o000, 0o022] as [mode_t])
    func modes(mask: mode_t) throws {
        let old = umask(mask)
        defer { umask(old) }
        let t = try TestStore()
        try t.store.set(secret("x"), for: key("alice"))
        let dir = (t.path as NSString).deletingLastPathComponent
        #expect(FileLayout.mode(of: dir) == 0o700)
        for suffix in ["", "-wal", "-shm"] {
            #expect(FileLayout.mode(of: t.path + suffix) == 0o600, "\(suffix)")
        }
    }

    @Test("an existing 0644 database is tightened to 0600")
    func tightens() throws {
        let t = try TestStore()
        t.store.close()
        chmod(t.path, 0o644)
        _ = try t.reopen()
        #expect(FileLayout.mode(of: t.path) == 0o600)
    }

    @Test("a symlink at the db path is refused")
    func symlinkRefused() throws {
        let t = try TestStore()
        t.store.close()
        let link = t.directory.appending("store/link.sqlite").path
        #expect(symlink(t.path, link) == 0)
        expectCode(.unsafeFileLayout) { try TokenStore(path: link, appID: testAppID) }
        let dangling = t.directory.appending("store/dangling.sqlite").path
        #expect(symlink(t.directory.appending("nowhere").path, dangling) == 0)
        expectCode(.unsafeFileLayout) { try TokenStore(path: dangling, appID: testAppID) }
        #expect(!FileManager.default.fileExists(atPath: t.directory.appending("nowhere").path))
    }

    @Test("a hard-linked db is refused")
    func hardLinkRefused() throws {
        let t = try TestStore()
        t.store.close()
        let other = t.directory.appending("store/other.sqlite").path
        #expect(link(t.path, other) == 0)
        expectCode(.unsafeFileLayout) { try t.reopen() }
    }

    @Test("a group- or world-writable directory is refused")
    func writableDirectoryRefused() throws {
        let dir = try TemporaryDirectory()
        chmod(dir.path, 0o770)
        expectCode(.unsafeFileLayout) { try TokenStore(path: dir.appending("tokens.sqlite").path, appID: testAppID) }
        chmod(dir.path, 0o757)
        expectCode(.unsafeFileLayout) { try TokenStore(path: dir.appending("tokens.sqlite").path, appID: testAppID) }
        #expect(!FileManager.default.fileExists(atPath: dir.appending("tokens.sqlite").path))
    }

    @Test("a symlinked -wal is refused")
    func symlinkedWAL() throws {
        let t = try TestStore()
        t.store.close()
        unlink(t.path + "-wal")
        #expect(symlink(t.directory.appending("elsewhere").path, t.path + "-wal") == 0)
        expectCode(.unsafeFileLayout) { try t.reopen() }
    }

    @Test("a file that is not a database is databaseCorrupt")
    func notADatabase() throws {
        let dir = try TemporaryDirectory()
        chmod(dir.path, 0o700)
        let path = dir.appending("tokens.sqlite").path
        #expect(FileManager.default.createFile(atPath: path, contents: Data(repeating: 0x41, count: 8192), attributes: [.posixPermissions: 0o600]))
        expectCode(.databaseCorrupt) { try TokenStore(path: path, appID: testAppID) }
    }

    @Test("the default path follows XDG_DATA_HOME and refuses odd app ids")
    func defaultPath() throws {
        let path = try TokenStore.defaultPath(appID: "com.example.app")
        #expect(path.hasSuffix("/com.example.app/tokens.sqlite"))
        expectCode(.invalidInput) { try TokenStore.defaultPath(appID: "../evil") }
        expectCode(.invalidInput) { try TokenStore.defaultPath(appID: "") }
    }
}
