import Foundation
import Testing
import TestSupport
@testable import TokenStore
#if canImport(Glibc)
import Glibc
#endif

/// Modes, links and hostile directories: Reliability/FileModesLinksTests.swift (file_modes_links).
@Suite("File modes and links", .serialized, keyringTrait, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct FileLayoutTests {
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
}
