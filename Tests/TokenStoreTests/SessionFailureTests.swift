import TestSupport
import TestTraits
import Testing

@testable import TokenStore

/// Which keyring errors earn one retry on a new connection (a new Diffie-Hellman transfer
/// session): KWallet gets about one session in 50 wrong. A pure classification test: the
/// provider matrix (`make test-providers`) exercises the retries against the real KWallet.
@Suite(.offPool, .timeLimit(.minutes(TestTimeLimit.minutes))) struct SessionFailureTests {
    @Test func transferFailuresAreRetriedOtherErrorsAreNot() {
        let retried = [
            TokenStoreError(.ioError, "\(SecretServiceItems.unreadableSecretMessage) (load key)."),
            TokenStoreError(.ioError, "0 \(SecretServiceItems.notStoredMessage) (store key)."),
            TokenStoreError(.integrityCheckFailed, "\(SecretServiceEpochItems.notANumberMessage) (read store epoch)."),
        ]
        for error in retried { #expect(SecretServiceKeyProvider.isSessionFailure(error), "\(error)") }
        let final = [
            TokenStoreError(.ioError, "A file-system call failed."),
            TokenStoreError(.integrityCheckFailed, "A row was altered."),
            TokenStoreError(.keyringLocked, "\(SecretServiceItems.unreadableSecretMessage)"),
        ]
        for error in final { #expect(!SecretServiceKeyProvider.isSessionFailure(error), "\(error)") }
    }
}
