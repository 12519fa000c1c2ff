import Foundation
import TestTraits
import Testing
import TestSupport
import TokenStore
@testable import AuthSession

/// A locked store reaches the app through the session layer in the "temporary, retry after the
/// user acts" group: not transient (waiting does not help), not "sign in again".
@Suite("A locked store through the session", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct StoreLockSessionTests {
    @Test("storeLocked is a storage error to retry after the user acts; unlock → the session reads again")
    func lockedStoreIsRetryableAfterUserAction() throws {
        let f = try SessionFixture()
        #expect(try f.session.accounts().isEmpty)
        try f.store.lock()
        do {
            _ = try f.session.accounts()
            Issue.record("a locked store answered")
        } catch let error as AuthSessionError {
            #expect(error.code == .storage)
            #expect(TokenStoreError.storeLocked ~= error)
            #expect(error.isRetryableAfterUserAction)
            #expect(!error.isTransient && !error.requiresInteraction)
        }
        try f.store.unlock()
        #expect(try f.session.accounts().isEmpty)
        f.store.close()
        do {
            _ = try f.session.accounts()
            Issue.record("a closed store answered")
        } catch let error as AuthSessionError {
            #expect(error.code == .storage && !error.isRetryableAfterUserAction, "\(error)")
        }
    }

    @Test("a locked store makes the session drop the DPoP key it holds; unlock → proofs again, same key")
    func lockDropsTheSessionsDPoPKey() async throws {
        let f = try SessionFixture()
        let session = try DPoPSessionTests.session(f)
        let token = try await DPoPSessionTests.signIn(f, session).accessToken
        let raw = try #require(token.token.stringValue())
        let thumbprint = try await DPoPSessionTests.thumbprint(f.store)
        let url = URL(string: f.server.baseURL.absoluteString + "/userinfo")!
        _ = try await session.dpopProof(method: "GET", url: url, accessToken: token)
        weak var binding: DPoPBinding?
        binding = session.dpopBindings.withLock { $0 }
        #expect(binding != nil)
        try f.store.lock()
        do {
            _ = try await session.dpopProof(method: "GET", url: url, accessToken: token)
            Issue.record("a proof was made with the store locked")
        } catch let error as AuthSessionError {
            #expect(error.isRetryableAfterUserAction, "\(error)")
        }
        #expect(session.dpopBindings.withLock { $0 } == nil)
        #expect(binding == nil, "the session's DPoP key is still referenced after the lock")
        try f.store.unlock()
        let proof = try await session.dpopProof(method: "GET", url: url, accessToken: token)
        let verdict = try f.server.checkDPoPProof(proof, method: "GET", url: url.absoluteString, accessToken: raw)
        #expect(verdict.error == nil && verdict.jkt == thumbprint)
    }
}
