import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

@Suite("Credential state", keyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct CredentialStateTests {
    @Test("a sign-in makes the user authorized; transitions are recorded with reasons")
    func transitionsAndHistory() throws {
        let t = try TestStore()
        let user = "001234.abcdef.0042"
        #expect(try t.store.credentialState(forUserID: user) == .notFound)
        try t.store.ledger.saveSignIn(account: "alice", refreshToken: secret("rt-1"), appleUserID: user, accessToken: nil)
        #expect(try t.store.credentialState(forUserID: user) == .authorized)
        #expect(try t.store.refreshToken(account: "alice")?.stringValue() == "rt-1")
        #expect(try t.store.appleUserID(account: "alice") == user)

        try t.store.recordCredentialState(.revoked, forUserID: user, reason: .appleRevoked)
        try t.store.recordCredentialState(.revoked, forUserID: user, reason: .appleRevoked)  // no duplicate
        let history = try t.store.credentialStateHistory(forUserID: user)
        #expect(history.map(\.from) == [.notFound, .authorized])
        #expect(history.map(\.to) == [.authorized, .revoked])
        #expect(history.map(\.reason) == [.signIn, .appleRevoked])
        #expect(history[0].date <= history[1].date)
        #expect(try t.store.credentialStateHistory(forUserID: "someone-else").isEmpty)
    }

    @Test("state and history survive reopening")
    func survivesReopen() throws {
        let t = try TestStore()
        try t.store.ledger.saveSignIn(account: "alice", refreshToken: secret("rt"), appleUserID: "user-1", accessToken: nil)
        try t.store.recordCredentialState(.revoked, forUserID: "user-1", reason: .userLogout, detail: "remoteRevocationPending")
        t.store.close()
        let reopened = try t.reopen()
        #expect(try reopened.credentialState(forUserID: "user-1") == .revoked)
        let history = try reopened.credentialStateHistory(forUserID: "user-1")
        #expect(history.count == 2)
        #expect(history.last?.detail == "remoteRevocationPending")
    }

    @Test("a closed store refuses calls")
    func closed() throws {
        let t = try TestStore()
        t.store.close()
        #expect(throws: TokenStoreError.storeClosed) { try t.store.credentialState(forUserID: "u") }
    }
}
