#if canImport(Glibc)
import Glibc
#endif
import TokenStore

/// The Argon2id cost of a key tokenctl wraps (a passphrase or recovery slot): libsodium's
/// moderate limits. Debug builds only: `TOKENCTL_TEST_ARGON2=interactive` picks the library's
/// minimum (interactive) limits instead, so the test suite's many wraps and unwraps take a
/// fraction of a second each; release builds have no such switch.
enum WrappingCost {
    static var limits: PassphraseKeyProvider.Limits {
        #if DEBUG
        if let value = getenv("TOKENCTL_TEST_ARGON2"), String(cString: value) == "interactive" { return .interactive }
        #endif
        return .moderate
    }
}
