import Foundation
import Testing
import TestSupport
@testable import TokenStore

/// Locks the shared private keyring: these tests must not overlap with others that use it.
@Suite("Data key failures", .serialized, keyringTrait)
struct KeyFailureExclusiveKeyringTests {
    @Test("locked collection: opening is keyringLocked, never a new key, rows intact")
    func lockedCollection() throws {
        let t = try TestStore()
        try t.store.set(secret("rt"), for: key("alice"))
        t.store.close()
        try PrivateKeyring.lockDefaultCollection()
        defer { try? PrivateKeyring.unlockDefaultCollection() }  // best effort: the next test checks it
        expectCode(.keyringLocked) { try t.reopen() }
        // A brand-new store cannot store its key either: keyringLocked, and no key recorded.
        let fresh = try TemporaryDirectory()
        let freshPath = fresh.appending("tokens.sqlite").path
        expectCode(.keyringLocked) { try TokenStore(path: freshPath, appID: testAppID) }
        let raw = try Database(path: freshPath)
        #expect(try raw.scalarInt("SELECT count(*) FROM data_keys") == 0)

        try PrivateKeyring.unlockDefaultCollection()
        let reopened = try t.reopen()
        #expect(try reopened.secret(for: key("alice"))?.stringValue() == "rt")
        #expect(try raw.scalarInt("SELECT count(*) FROM data_keys") == 0)
    }

    @Test("key item deleted while rows exist: dataKeyMissing, nothing deleted, no new key")
    func keyDeleted() throws {
        let t = try TestStore()
        try t.store.saveSignIn(account: "alice", refreshToken: secret("rt"), appleUserID: "user", accessToken: nil)
        let storeID = t.store.storeIdentifier
        t.store.close()
        #expect(try PrivateKeyring.itemCount(attributes: ["store-id": storeID]) == 1)
        try PrivateKeyring.clearItems(storeID: storeID)
        #expect(try PrivateKeyring.itemCount(attributes: ["store-id": storeID]) == 0)
        expectCode(.dataKeyMissing) { try t.reopen() }
        expectCode(.dataKeyMissing) { try t.reopen() }
        let raw = try t.rawDatabase()
        #expect(try raw.scalarInt("SELECT count(*) FROM items") == 2)
        #expect(try raw.scalarInt("SELECT count(*) FROM data_keys") == 1)
        #expect(try PrivateKeyring.itemCount(attributes: ["store-id": storeID]) == 0, "no key was made")
    }

    @Test("a key that does not open the store is dataKeyCorrupt")
    func wrongKey() throws {
        let t = try TestStore()
        try t.store.set(secret("rt"), for: key("alice"))
        let reference = DataKeyReference(storeID: t.store.storeIdentifier, keyID: t.store.keyIdentifier, appID: testAppID)
        t.store.close()
        try SecretServiceKeyProvider().storeKey(.random(count: 32), for: reference)
        expectCode(.dataKeyCorrupt) { try t.reopen() }
    }

    @Test("two processes opening a fresh store at once end with one key")
    func concurrentCreation() throws {
        let child = try BuiltProducts.executable("tokenstore-testchild")
        for round in 0..<5 {
            let dir = try TemporaryDirectory()
            let path = dir.appending("tokens.sqlite").path
            let results = ConcurrentResults()
            DispatchQueue.concurrentPerform(iterations: 2) { index in
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

final class ConcurrentResults: @unchecked Sendable {  // guarded by `lock`
    private let lock = NSLock()
    private var results: [Int: Result<ChildResult, any Error>] = [:]
    func set(_ index: Int, _ result: Result<ChildResult, any Error>) { lock.withLock { results[index] = result } }
    func get(_ index: Int) -> Result<ChildResult, any Error> { lock.withLock { results[index]! } }
}
