import AuthSession
import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore

/// New-user trial 2: two accounts signed in as the same Apple user share one credential state,
/// and logging `alice` out recorded the user `revoked` while `bob`'s refresh token still worked.
/// The state is the user's: it becomes `revoked` only when no account of theirs holds a refresh
/// token. Real server, real keyring.
@Suite("Two accounts of one user: one logout leaves the other authorized", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct SharedUserLogoutTests {
    static let user = "000666.shared.user"

    /// alice and bob, both signed in as `user`.
    private func twoAccounts() async throws -> SessionFixture {
        let f = try SessionFixture()
        try await f.signIn("alice", appleUserID: Self.user)
        try await f.signIn("bob", appleUserID: Self.user)
        return f
    }

    @Test("logging alice out keeps the user authorized while bob is signed in; bob still renews; bob's logout revokes the user")
    func logoutOfOneAccount() async throws {
        let f = try await twoAccounts()
        let aliceToken = try #require(try f.refreshToken("alice"))
        #expect(try await f.session.logout(account: "alice") == .revoked)
        #expect(try f.server.introspect(aliceToken).active == false)
        #expect(try f.store.credentialState(forUserID: Self.user) == .authorized)
        let history = try f.store.credentialStateHistory(forUserID: Self.user)
        #expect(history.last?.from == .authorized && history.last?.to == .authorized, "\(history)")
        #expect(history.last?.reason == .userLogout)
        #expect(history.last?.detail == CredentialStateDetail.otherAccountSignedIn)
        let accounts = try f.session.accounts()
        #expect(accounts.map(\.account.name) == ["bob"])
        #expect(accounts.first?.state == .authorized && accounts.first?.canRenew == true)
        // bob's session works: a refresh at the server.
        let token = try await f.session.accessToken(for: "bob", forceRefresh: true)
        #expect(token.source == .network)

        #expect(try await f.session.logout(account: "bob") == .revoked)
        #expect(try f.store.credentialState(forUserID: Self.user) == .revoked)
        #expect(try f.store.credentialStateHistory(forUserID: Self.user).last?.detail == nil)
    }

    @Test("offline logout, local clear and a discarded revocation of one account leave the user authorized too")
    func otherWaysOut() async throws {
        let f = try await twoAccounts()
        try await f.signIn("carol", appleUserID: Self.user)
        f.server.stopTemporarily()
        #expect(try await f.session.logout(account: "alice") == .revocationPending)
        #expect(try f.store.credentialState(forUserID: Self.user) == .authorized)
        #expect(try await f.session.clearLocally(account: "carol"))
        #expect(try f.store.credentialState(forUserID: Self.user) == .authorized)
        #expect(try await f.session.discardPendingRevocations(account: "alice") == 1)
        #expect(try f.store.credentialState(forUserID: Self.user) == .authorized)
        let reasons = try f.store.credentialStateHistory(forUserID: Self.user).suffix(3)
        #expect(reasons.map(\.reason) == [.userLogout, .clearedLocally, .revocationDiscarded], "\(reasons)")
        #expect(reasons.allSatisfy { $0.to == .authorized && $0.detail == CredentialStateDetail.otherAccountSignedIn })
        try f.server.restart()
        // The last account's logout makes the user revoked.
        #expect(try await f.session.logout(account: "bob") == .revoked)
        #expect(try f.store.credentialState(forUserID: Self.user) == .revoked)
    }

    @Test("Apple's revocation of the user still logs out every account and records revoked")
    func appleRevocationRevokesTheUser() async throws {
        let f = try await twoAccounts()
        let outcomes = try await f.session.handleAppleCredentialRevoked(userID: Self.user)
        #expect(outcomes == [.revoked, .revoked])
        #expect(try f.store.credentialState(forUserID: Self.user) == .revoked)
        #expect(try f.session.accounts().isEmpty)
        #expect(try f.store.credentialStateHistory(forUserID: Self.user).last?.reason == .appleRevoked)
    }
}
