import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// New-user trial 2: a logout interrupted after its first step (Ctrl-C, a crash) kept the
/// account's user id and cached tokens and the user `authorized` until the next logout or
/// resume. A writing open now finishes its local part once the logout is old enough not to be
/// still running elsewhere (``SessionLedger/interruptedLogoutAge``); a read-only open writes nothing.
@Suite("Interrupted logouts finish at the next writing open", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct InterruptedLogoutTests {
    /// A store where `accounts`' logouts have begun and stopped: tokens in the outbox, marks set.
    private func loggingOut(_ accounts: [String]) throws -> (TestStore, [PendingRevocation]) {
        let t = try TestStore()
        var entries: [PendingRevocation] = []
        for account in accounts {
            try t.store.ledger.saveSignIn(
                account: AccountID(account), refreshToken: secret("rt-\(account)"), appleUserID: "000111.\(account)",
                accessToken: AccessTokenEntry(token: secret("at-\(account)"), expiresAt: Date() + 3600, scopes: ["read"]))
            guard case .queued(let queued) = try t.store.ledger.beginLogout(account: AccountID(account)), let entry = queued.first else {
                throw TokenStoreError(.ioError, "the logout did not queue")
            }
            entries.append(entry)
        }
        t.store.close()
        return (t, entries)
    }

    /// Moves every logout mark's time back by three minutes (the time is outside the mark's MAC).
    private func age(_ t: TestStore) throws {
        try t.rawDatabase().run("UPDATE account_marks SET updated_at = updated_at - 180000")
    }

    @Test("a recent interrupted logout is left; one older than two minutes is finished by a writing open, not a read-only one")
    func finishedAtTheNextWritingOpen() throws {
        let (t, entries) = try loggingOut(["alice"])
        let entry = try #require(entries.first)
        // Recent: a logout may still be waiting for the server in another process.
        let early = try t.reopen()
        #expect(try early.accounts().first?.isLoggingOut == true)
        early.close()

        try age(t)
        let before = t.fileBytes()
        let reader = try TokenStore(path: t.path, appID: testAppID, options: .init(readOnly: true))
        #expect(try reader.accounts().first?.isLoggingOut == true)
        reader.close()
        #expect(t.fileBytes() == before, "a read-only open wrote")

        let store = try t.reopen()
        #expect(try store.accounts().isEmpty, "the user id and the cached token are gone, the mark cleared")
        #expect(try store.ledger.cachedAccessTokens(account: "alice").isEmpty)
        #expect(try store.credentialState(forUserID: "000111.alice") == .revoked)
        let last = try store.credentialStateHistory(forUserID: "000111.alice").last
        #expect(last?.reason == .userLogout && last?.detail == CredentialStateDetail.remoteRevocationPending, "\(String(describing: last))")
        #expect(try store.pendingRevocations().map(\.id) == [entry.id], "the token stays queued")
        #expect(try store.verify().isHealthy)
        // The revocation going through later is recorded as a confirmation.
        try store.ledger.recordRevocationAttempt(entry, result: .revoked)
        #expect(try store.credentialStateHistory(forUserID: "000111.alice").last?.reason == .revocationConfirmed)
        #expect(try store.pendingRevocations().isEmpty)
    }

    @Test("a mark that fails its MAC is left for the logout, resume and verify; the others are finished")
    func onlyAuthenticatedMarks() throws {
        let (t, _) = try loggingOut(["alice", "bob"])
        try age(t)
        let raw = try t.rawDatabase()
        let opened = try TokenStore(path: t.path, appID: testAppID, options: .init(readOnly: true))
        let aliceRef = opened.connection.envelope.accountRef(AccountID("alice"))
        opened.close()
        // The mark's entry edited without the key: read in its fail-safe form, not acted on here.
        try raw.run("UPDATE account_marks SET logout_entry = ? WHERE account_ref = ?", [.blob(Array(repeating: 7, count: 16)), .blob(aliceRef)])
        let store = try t.reopen()
        #expect(try store.appleUserID(account: "alice") == "000111.alice")
        #expect(try store.appleUserID(account: "bob") == nil)
        #expect(try store.credentialState(forUserID: "000111.alice") == .authorized)
        #expect(try store.credentialState(forUserID: "000111.bob") == .revoked)
        #expect(try store.verify().badRows.map(\.table) == ["account_marks"])
    }
}
