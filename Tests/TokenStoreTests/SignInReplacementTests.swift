import Foundation
import Testing
import TestSupport
@testable import TokenStore

@Suite("Sign-in over a live session", keyringTrait)
struct SignInReplacementTests {
    @Test("a sign-in over a live session queues the replaced refresh token, never drops it")
    func signInOverLiveSession() throws {
        let t = try TestStore()
        try t.store.saveSignIn(account: "alice", refreshToken: secret("rt-old"), appleUserID: "user-a", accessToken: nil)
        #expect(try t.store.saveSignIn(account: "alice", refreshToken: secret("rt-new"), appleUserID: "user-b", accessToken: nil))
        #expect(try t.store.refreshToken(account: "alice")?.stringValue() == "rt-new")
        let pending = try t.store.pendingRevocations()
        #expect(pending.map { $0.refreshToken.stringValue() } == ["rt-old"])
        #expect(try t.store.credentialState(forUserID: "user-a") == .revoked)
        #expect(try t.store.credentialStateHistory(forUserID: "user-a").last?.reason == .replacedBySignIn)
        #expect(try t.store.credentialState(forUserID: "user-b") == .authorized)
        // Saving the same token again queues nothing.
        #expect(try !t.store.saveSignIn(account: "alice", refreshToken: secret("rt-new"), appleUserID: "user-b", accessToken: nil))
        #expect(try t.store.pendingRevocations().count == 1)
    }
}
