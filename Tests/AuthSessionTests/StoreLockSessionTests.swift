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
}
