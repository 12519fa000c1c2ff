import Foundation
import Testing
import TestSupport
@testable import TokenStore

/// The locked-collection, deleted-key and wrong-key cases moved to
/// Reliability/KeyringFaultTests.swift (keyring_faults), which runs them in a keyring of its own.
@Suite("Data key failures", .serialized, keyringTrait, .timeLimit(.minutes(TestTimeLimit.minutes)))
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

final class ConcurrentResults: @unchecked Sendable {  // guarded by `lock`
    private let lock = NSLock()
    private var results: [Int: Result<ChildResult, any Error>] = [:]
    func set(_ index: Int, _ result: Result<ChildResult, any Error>) { lock.withLock { results[index] = result } }
    func get(_ index: Int) -> Result<ChildResult, any Error> { lock.withLock { results[index]! } }
}
