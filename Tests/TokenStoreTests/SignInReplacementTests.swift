import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

@Suite("Sign-in over a live session", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct SignInReplacementTests {
    @Test("a sign-in over a live session queues the replaced refresh token, never drops it")
    func signInOverLiveSession() throws {
        let t = try TestStore()
        try t.store.ledger.saveSignIn(account: "alice", refreshToken: secret("rt-old"), appleUserID: "user-a", accessToken: nil)
        #expect(try t.store.ledger.saveSignIn(account: "alice", refreshToken: secret("rt-new"), appleUserID: "user-b", accessToken: nil))
        #expect(try t.store.refreshToken(account: "alice")?.stringValue() == "rt-new")
        let pending = try t.store.pendingRevocations()
        #expect(pending.map { $0.refreshToken.stringValue() } == ["rt-old"])
        #expect(try t.store.credentialState(forUserID: "user-a") == .revoked)
        #expect(try t.store.credentialStateHistory(forUserID: "user-a").last?.reason == .replacedBySignIn)
        #expect(try t.store.credentialState(forUserID: "user-b") == .authorized)
        // Saving the same token again queues nothing.
        #expect(try !t.store.ledger.saveSignIn(account: "alice", refreshToken: secret("rt-new"), appleUserID: "user-b", accessToken: nil))
        #expect(try t.store.pendingRevocations().count == 1)
    }

    @Test("a logout that finds an older entry of the account queued is finished by its own entry, for its own user",
          arguments: [["user-a", "user-b"], ["user-b", "user-b"]])
    func logoutBesideAnOlderEntry(users: [String]) throws {
        // Found in review: the older entry (the token a sign-in replaced, still pending) was
        // settled first, finished the logout for its own user and cleared the mark; the
        // logout's own entry then found no mark, and the signed-in user stayed `authorized`.
        let t = try TestStore()
        let (previous, current) = (users[0], users[1])
        try t.store.ledger.saveSignIn(account: "alice", refreshToken: secret("rt-old"), appleUserID: previous, accessToken: nil)
        try t.store.ledger.saveSignIn(
            account: "alice", refreshToken: secret("rt-new"), appleUserID: current,
            accessToken: AccessTokenEntry(token: secret("at"), expiresAt: Date() + 3600, scopes: []))
        guard case .queued(let entries) = try t.store.ledger.beginLogout(account: "alice") else {
            Issue.record("not queued")
            return
        }
        // Picked by token: two entries made in the same millisecond have no defined order.
        #expect(Set(entries.compactMap { $0.refreshToken.stringValue() }) == ["rt-old", "rt-new"])
        let older = try #require(entries.first { $0.refreshToken.stringValue() == "rt-old" })
        let own = try #require(entries.first { $0.refreshToken.stringValue() == "rt-new" })

        try t.store.ledger.recordRevocationAttempt(older, result: .revoked)
        // Only the older token is settled: the logout itself is not finished yet.
        #expect(try t.store.appleUserID(account: "alice") == current)
        #expect(try t.store.pendingRevocations().map { $0.refreshToken.stringValue() } == ["rt-new"])

        try t.store.ledger.recordRevocationAttempt(own, result: .retryLater(error: "offline", nextAttemptAt: Date()))
        #expect(try t.store.appleUserID(account: "alice") == nil)
        #expect(try t.store.ledger.cachedAccessTokens(account: "alice").first?.entry == nil)
        #expect(try t.store.credentialState(forUserID: current) == .revoked)
        let last = try #require(try t.store.credentialStateHistory(forUserID: current).last)
        #expect(last.reason == .userLogout)
        #expect(last.detail == CredentialStateDetail.remoteRevocationPending)
        if previous != current {
            #expect(try t.store.credentialStateHistory(forUserID: previous).map(\.reason) == [.signIn, .replacedBySignIn, .revocationConfirmed])
        }
    }
}
