import AuthSession
import Foundation
import Testing
import TestSupport
import TokenStore

/// The real Secret Service key provider, with its store-epoch raises counted: each is a write
/// of the keyring (gnome-keyring rewrites its whole file for it), which a logout's user waits for.
final class EpochRaiseCounter: KeyProvider, @unchecked Sendable {  // `count` is guarded by `lock`
    let inner: any KeyProvider = SecretServiceKeyProvider()
    private let lock = NSLock()
    private var count = 0

    var raises: Int { lock.withLock { count } }

    var name: String { inner.name }
    var tpmTCTI: String? { inner.tpmTCTI }
    func loadKey(_ reference: DataKeyReference) throws -> SecretBytes? { try inner.loadKey(reference) }
    func storeKey(_ key: SecretBytes, for reference: DataKeyReference) throws { try inner.storeKey(key, for: reference) }
    func deleteKey(_ reference: DataKeyReference) throws { try inner.deleteKey(reference) }
    func availability(of reference: DataKeyReference) throws -> DataKeyAvailability { try inner.availability(of: reference) }
    func storeEpoch(storeID: String) throws -> UInt64 { try inner.storeEpoch(storeID: storeID) }
    func deleteStoreEpoch(storeID: String) throws { try inner.deleteStoreEpoch(storeID: storeID) }
    func beginConnecting() { inner.beginConnecting() }
    func loadKeyAndStoreEpoch(_ reference: DataKeyReference) throws -> (key: SecretBytes?, epoch: UInt64?) {
        try inner.loadKeyAndStoreEpoch(reference)
    }
    func raiseStoreEpoch(storeID: String, appID: String, to epoch: UInt64) throws {
        lock.withLock { count += 1 }
        try inner.raiseStoreEpoch(storeID: storeID, appID: appID, to: epoch)
    }
}

@Suite("A logout writes the key provider once", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct LogoutEpochTests {
    /// A store on the counting provider, a session against the real server, alice and bob
    /// signed in (bob stays: alice's logout is not the store's last, which also owes a
    /// crypto-erase, a key rotation with writes of its own).
    static func signedIn() async throws -> (SessionFixture, TokenStore, TokenSession, EpochRaiseCounter) {
        let f = try SessionFixture()
        let counter = EpochRaiseCounter()
        let store = try TokenStore(path: f.directory.appending("counted/tokens.sqlite").path, appID: sessionAppID, keyProvider: counter)
        let session = try SessionFixture.makeSession(store: store, server: f.server)
        for (account, user) in [("alice", "001122.apple.user"), ("bob", "003344.apple.user")] {
            let code = try f.server.appleAuthorizationCode(for: user)
            _ = try await session.signInWithApple(
                authorizationCode: SecretBytes(utf8: code), appleUserID: user, account: AccountID(account), scopes: ["openid", "read:items"])
        }
        return (f, store, session, counter)
    }

    /// The key provider's epoch is the file's: the logout left no raise owed.
    static func expectNothingOwed(_ store: TokenStore, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let status = try store.epochStatus()
        #expect(status.file == status.keyProvider, "nothing owed once the logout returned: \(status)", sourceLocation: sourceLocation)
    }

    @Test("an online logout raises the key provider's epoch once, to the file's: a copy from before it is caught")
    func onlineLogout() async throws {
        let (f, store, session, counter) = try await Self.signedIn()
        defer { try? PrivateKeyring.clearItems(storeID: store.storeIdentifier) }
        let before = try store.epochStatus()
        let raisesBefore = counter.raises
        #expect(try await session.logout(account: "alice") == .revoked)
        #expect(counter.raises - raisesBefore == 1, "key provider epoch writes during one logout")
        let after = try store.epochStatus()
        #expect(after.file == after.keyProvider, "nothing owed once the logout returned: \(after)")
        #expect(after.file > before.file)
        #expect(try f.server.stats().revokeRequests == 1)
    }

    @Test("the last account's logout: one raise for the logout, one for the crypto-erase's key switch")
    func lastLogout() async throws {
        let (f, store, session, counter) = try await Self.signedIn()
        defer { withExtendedLifetime(f) {} }  // the fixture owns the server
        defer { try? PrivateKeyring.clearItems(storeID: store.storeIdentifier) }
        #expect(try await session.logout(account: "bob") == .revoked)
        let raisesBefore = counter.raises
        #expect(try await session.logout(account: "alice") == .revoked)
        #expect(counter.raises - raisesBefore == 2, "the logout's raise and the key switch's")
        try Self.expectNothingOwed(store)
    }

    @Test("an offline logout (revocation queued) also writes the key provider once, and owes nothing")
    func offlineLogout() async throws {
        let (f, store, session, counter) = try await Self.signedIn()
        defer { try? PrivateKeyring.clearItems(storeID: store.storeIdentifier) }
        try f.server.inject(.status(503, path: AuthorizationServer.revokePath, count: 10))
        let raisesBefore = counter.raises
        #expect(try await session.logout(account: "alice") == .revocationPending)
        #expect(counter.raises - raisesBefore == 1, "key provider epoch writes during one logout")
        try Self.expectNothingOwed(store)
    }

    @Test("a logout that ends with an error after its first step still leaves nothing owed")
    func failedLogoutOwesNothing() async throws {
        let (f, store, session, counter) = try await Self.signedIn()
        defer { try? PrivateKeyring.clearItems(storeID: store.storeIdentifier) }
        // Cancelled while the revocation waits behind a slow server: logged out here, queued.
        try f.server.inject(.delay(3.0, path: AuthorizationServer.revokePath, count: 1))
        let raisesBefore = counter.raises
        let task = Task { try await session.logout(account: "alice") }
        try await Task.sleep(for: .milliseconds(500))
        task.cancel()
        _ = try? await task.value
        #expect(counter.raises - raisesBefore <= 1)
        try Self.expectNothingOwed(store)
    }

    @Test("a copy from between the logout's two steps, put back after it: it opens, offers no token, and resume finishes the logout")
    func copyBetweenTheSteps() async throws {
        let (f, store, _, counter) = try await Self.signedIn()
        defer { try? PrivateKeyring.clearItems(storeID: store.storeIdentifier) }
        let path = f.directory.appending("counted/tokens.sqlite").path
        guard case .queued(let entries) = try store.ledger.beginLogout(account: "alice"), let entry = entries.first else {
            Issue.record("the logout queued nothing")
            return
        }
        store.close()
        let files = ["", "-wal", "-shm"].map { path + $0 }
        let copy = files.map { FileManager.default.contents(atPath: $0) }
        let reopened = try TokenStore(path: path, appID: sessionAppID, keyProvider: counter)
        let raisesBefore = counter.raises
        try reopened.ledger.recordRevocationAttempt(entry, result: .revoked)
        #expect(counter.raises == raisesBefore, "the last step wrote the key provider")
        #expect(try reopened.credentialState(forUserID: "001122.apple.user") == .revoked)
        reopened.close()

        for (file, bytes) in zip(files, copy) {
            unlink(file)
            if let bytes { #expect(FileManager.default.createFile(atPath: file, contents: bytes, attributes: [.posixPermissions: 0o600])) }
        }
        let restored = try TokenStore(path: path, appID: sessionAppID, keyProvider: counter)
        #expect(try restored.refreshToken(account: "alice") == nil, "a logging-out account offers no refresh token")
        #expect(try restored.ledger.hasRefreshToken(account: "alice") == false)
        #expect(try restored.ledger.cachedAccessTokens(account: "alice").isEmpty)
        #expect(try restored.refreshToken(account: "bob") != nil, "bob's session is untouched")
        let session = try SessionFixture.makeSession(store: restored, server: f.server)
        let report = try await session.resumePendingRevocations(includingNotDue: true)
        #expect(report.stillPending == 0, "\(report)")
        #expect(try restored.credentialState(forUserID: "001122.apple.user") == .revoked)
        #expect(try restored.pendingRevocations().isEmpty)
        #expect(try restored.verify().isHealthy)
    }
}
