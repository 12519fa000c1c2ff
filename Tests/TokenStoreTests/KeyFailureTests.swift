import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// The locked-collection, deleted-key and wrong-key cases moved to
/// Reliability/KeyringFaultTests.swift (keyring_faults), which runs them in a keyring of its own.
@Suite("Data key failures", .serialized, keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct KeyFailureExclusiveKeyringTests {
    @Test("two processes opening a fresh store at once end with one key")
    func concurrentCreation() throws {
        let child = try BuiltProducts.executable("tokenstore-testchild")
        for round in 0..<5 {
            let dir = try TemporaryDirectory()
            let path = dir.appending("tokens.sqlite").path
            let results = ConcurrentResults()
            runAllAtOnce(2) { index in
                let result = Result { try runChild(child, ["open", path]) }
                results.set(index, result)
            }
            for index in 0..<2 {
                let result = try results.get(index).get()
                #expect(result.status == 0, "round \(round) child \(index): \(result.stderr)")
            }
            let store = try TokenStore(path: path, appID: testAppID)
            let raw = try Database(path: path)
            #expect(try raw.scalarInt("SELECT count(*) FROM data_keys") == 1)
            #expect(try PrivateKeyring.itemCount(attributes: ["store-id": store.storeIdentifier]) == 1)
        }
    }
}

/// A first opener that is slow while it makes the key (stopped at the point after the keyring
/// took the key, inside the write transaction — a real process holding the real locks) must
/// not make a second opener fail: the second waits and finds the key made. CI once failed
/// `concurrentCreation` when a loaded keyring kept the maker longer than SQLite's busy wait.
@Suite("A slow first opener", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct SlowFirstOpenerTests {
    @Test("a second opener waits for a first opener that is slow to make the key, and finds it")
    func secondOpenerWaitsForASlowKeyMaker() throws {
        #if DEBUG
        let child = try BuiltProducts.executable("tokenstore-testchild").path
        let dir = try TemporaryDirectory()
        let path = dir.appending("tokens.sqlite").path
        let maker = try ChildProcess.start(
            child, ["open", path], environment: childEnvironment(["TOKENSTORE_STOP_POINT": "keySetup.afterStoreKey"]))
        defer { maker.signal(SIGCONT); _ = maker.stop() }
        let stopDeadline = monotonicNanoseconds() + 60_000_000_000
        while !maker.captured("stderr").contains(Array("stop point reached".utf8)), maker.isRunning,
            monotonicNanoseconds() < stopDeadline
        {
            usleep(50_000)
        }
        try #require(maker.isRunning, "the maker ended before its stop point: \(maker.captured("stderr"))")
        try #require(String(decoding: maker.captured("stderr"), as: UTF8.self).contains("stop point reached"))

        let opener = try ChildProcess.start(child, ["open", path], environment: childEnvironment())
        defer { _ = opener.stop() }
        // Longer than SQLite's whole busy wait on the write lock (the bound the second opener had before).
        let busyWait = Int(Database.busyTimeoutMilliseconds) * (Database.busyRetries + 1)
        usleep(useconds_t((busyWait + 2_000) * 1_000))
        #expect(opener.isRunning, "the second opener gave up while the maker held the key: \(String(decoding: opener.captured("stderr"), as: UTF8.self))")

        maker.signal(SIGCONT)
        let made = try maker.wait(timeout: .seconds(60))
        let opened = try opener.wait(timeout: .seconds(60))
        #expect(made.succeeded, "maker: \(String(decoding: maker.captured("stderr"), as: UTF8.self))")
        #expect(opened.succeeded, "second opener: \(String(decoding: opener.captured("stderr"), as: UTF8.self))")
        let store = try TokenStore(path: path, appID: testAppID)
        #expect(try Database(path: path).scalarInt("SELECT count(*) FROM data_keys") == 1)
        #expect(try PrivateKeyring.itemCount(attributes: ["store-id": store.storeIdentifier]) == 1)
        #endif
    }
}

/// An open that reads the schema while another process migrates the store must read the version
/// and the schema of one moment. CI once failed `concurrentCreation` this way: the second opener
/// read version 9, the first committed migration 10, and the second then compared the schema at 10
/// with version 9's and refused the store as `schemaTampered`.
@Suite("An open racing a migration", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct OpenRacingMigrationTests {
    @Test("an open stopped between reading the schema version and the schema, while another process migrates, opens the store")
    func schemaReadAcrossAMigration() throws {
        #if DEBUG
        let child = try BuiltProducts.executable("tokenstore-testchild").path
        let dir = try TemporaryDirectory()
        let path = dir.appending("tokens.sqlite").path
        let old = try TokenStore(
            path: path, appID: testAppID, keyProvider: KeyProviderSelection.automatic(storePath: path), logger: .disabled,
            options: .init(), migrator: Migrator(migrations: Array(embeddedMigrations.prefix(9))))
        try old.set(SecretBytes(utf8: "kept"), for: ItemKey(account: AccountID("erin"), kind: .refreshToken))
        old.close()

        let opener = try ChildProcess.start(
            child, ["open", path], environment: childEnvironment(["TOKENSTORE_STOP_POINT": "schemaCheck.betweenReads"]))
        defer { opener.signal(SIGCONT); _ = opener.stop() }
        let stopDeadline = monotonicNanoseconds() + 60_000_000_000
        while !opener.captured("stderr").contains(Array("stop point reached".utf8)), opener.isRunning,
            monotonicNanoseconds() < stopDeadline
        {
            usleep(20_000)
        }
        try #require(opener.isRunning, "the opener ended before its stop point: \(String(decoding: opener.captured("stderr"), as: UTF8.self))")

        // Another process's open migrates the store to the newest version meanwhile.
        let migrated = try TokenStore(path: path, appID: testAppID)
        #expect(try migrated.schemaVersion() == embeddedMigrations.last?.version)
        migrated.close()

        opener.signal(SIGCONT)
        let opened = try opener.wait(timeout: .seconds(60))
        #expect(opened.succeeded, "the opener: \(String(decoding: opener.captured("stderr"), as: UTF8.self))")
        #expect(try TokenStore(path: path, appID: testAppID).secret(
            for: ItemKey(account: AccountID("erin"), kind: .refreshToken)) == SecretBytes(utf8: "kept"))
        #endif
    }
}

final class ConcurrentResults: @unchecked Sendable {  // guarded by `lock`
    private let lock = NSLock()
    private var results: [Int: Result<ChildResult, any Error>] = [:]
    func set(_ index: Int, _ result: Result<ChildResult, any Error>) { lock.withLock { results[index] = result } }
    func get(_ index: Int) -> Result<ChildResult, any Error> { lock.withLock { results[index]! } }
}
