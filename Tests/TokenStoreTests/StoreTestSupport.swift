import Foundation
import Testing
import TestSupport
@testable import TokenStore

/// Keyring-backed tests run only inside scripts/with-keyring (make test always does).
let keyringTrait = Testing.ConditionTrait.enabled(if: PrivateKeyring.isAvailable, Comment(rawValue: PrivateKeyring.skipReason))

let testAppID = "dev.tokenstore.tests"

/// A store in a fresh temporary directory, with the real Secret Service.
struct TestStore {
    let directory: TemporaryDirectory
    let path: String
    let store: TokenStore

    init(file: String = "tokens.sqlite") throws {
        directory = try TemporaryDirectory()
        path = directory.appending("store/\(file)").path
        store = try TokenStore(path: path, appID: testAppID)
    }

    func reopen() throws -> TokenStore { try TokenStore(path: path, appID: testAppID) }

    /// All bytes of the database and its -wal / -shm files.
    func fileBytes() -> [String: Data] {
        var out: [String: Data] = [:]
        for suffix in ["", "-wal", "-shm"] {
            if let data = FileManager.default.contents(atPath: path + suffix) { out[path + suffix] = data }
        }
        return out
    }

    /// A raw connection for tampering, bypassing the store.
    func rawDatabase() throws -> Database { try Database(path: path) }
}

func key(_ account: String, _ kind: ItemKind = .refreshToken, service: String = AccountID.defaultService) -> ItemKey {
    ItemKey(account: AccountID(account, service: service), kind: kind)
}

func secret(_ text: String) -> SecretBytes { SecretBytes(utf8: text) }

extension Data {
    func contains(_ text: String) -> Bool { range(of: Data(text.utf8)) != nil }
}
