@testable import AuthSession
import Foundation
import Testing
import TestSupport
import TestTraits
import TokenStore

/// The store's DPoP state (migration 0012, issue 27 item 3): one key per store and the latest
/// nonce per server origin, sealed under the data key; real SQLite and the real keyring.
@Suite("DPoP state in the store: one sealed key, shared nonces", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct DPoPKeyStoreTests {
    static func files(_ path: String) -> [Data] {
        ["", "-wal", "-shm"].compactMap { FileManager.default.contents(atPath: path + $0) }
    }

    @Test("one key per store: made once, the same from a second open; nothing of it or of the nonce readable in the files")
    func oneSealedKeyPerStore() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        let store = try TokenStore(path: path, appID: sessionAppID)
        let key = try #require(try await DPoPKeys.loadOrCreate(store: store) as? DPoPKey)
        #expect(try await DPoPKeys.loadOrCreate(store: store).thumbprint == key.thumbprint, "never a second key")
        let nonce = "nonce-" + SignInRandom.token()
        try store.recordDPoPNonce(nonce, origin: "http://127.0.0.1:8080")
        let second = try TokenStore(path: path, appID: sessionAppID)
        #expect(try await DPoPKeys.load(store: second)?.thumbprint == key.thumbprint)
        #expect(try second.dpopNonce(origin: "http://127.0.0.1:8080") == nonce)
        #expect(try second.dpopNonce(origin: "http://127.0.0.1:8081") == nil)
        // Another process making a key at the same time loses to the one stored: the first wins.
        let late = try DPoPKey.generate()
        let kept = try second.storeDPoPKeyMaterial(
            DPoPKeyMaterial(residence: .software, bytes: SecretBytes(try late.privateScalar() + late.publicPoint)))
        #expect(kept.bytes.copyBytes().suffix(65) == ArraySlice(key.publicPoint))
        let x = Base64URL.encode(key.publicPoint[1..<33])
        let scalar = try key.privateScalar()
        for data in Self.files(path) {
            #expect(data.range(of: Data(x.utf8)) == nil, "the JWK's x is not in the file")
            #expect(data.range(of: Data(nonce.utf8)) == nil, "the nonce is not in the file")
            #expect(data.range(of: Data(scalar)) == nil, "the private scalar is not in the file")
            #expect(data.range(of: Data(key.publicPoint)) == nil)
        }
        #expect(Self.files(path).isEmpty == false)
    }

    @Test("the nonce: last writer wins across opens; a key rotation keeps the key and the nonces; verify is clean")
    func noncesAndRotation() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        let first = try TokenStore(path: path, appID: sessionAppID)
        let second = try TokenStore(path: path, appID: sessionAppID)
        let thumbprint = try await DPoPKeys.loadOrCreate(store: first).thumbprint
        try first.recordDPoPNonce("n1", origin: "https://a.example")
        try second.recordDPoPNonce("n2", origin: "https://a.example")
        #expect(try first.dpopNonce(origin: "https://a.example") == "n2")
        _ = try first.rotateDataKey()
        let third = try TokenStore(path: path, appID: sessionAppID)
        #expect(try third.dpopNonce(origin: "https://a.example") == "n2")
        #expect(try await DPoPKeys.load(store: third)?.thumbprint == thumbprint)
        let report = try third.verify()
        #expect(report.badRows.isEmpty && report.rowsChecked >= 2)
        #expect(throws: TokenStoreError.self) { try first.recordDPoPNonce("", origin: "https://a.example") }
    }

    @Test("the binding shares nonces through the store: a second binding starts with the first's nonce")
    func bindingReadsTheStoresNonce() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        let store = try TokenStore(path: path, appID: sessionAppID)
        let key = try await DPoPKeys.loadOrCreate(store: store)
        let url = URL(string: "http://127.0.0.1:9/oauth/token")!
        await DPoPBinding(key: key, store: store).recordShared(nonce: "shared-nonce", for: url)
        let other = DPoPBinding(key: key, store: try TokenStore(path: path, appID: sessionAppID))
        #expect(other.nonce(for: url) == nil)
        let proof = try await other.sharedProof(method: "POST", url: url)
        let claims = try #require(JSONWebToken(SecretBytes(utf8: proof))).claims
        #expect(claims["nonce"]?.string == "shared-nonce")
    }
}
