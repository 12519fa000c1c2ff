import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

/// `ProtectionTier` is a set of raw values, not a closed enum (a later tier must not break an
/// app's `switch`), and a store's tier is read with `protection()`, a method: asking it may send
/// TPM commands, which a property read must not.
@Suite("ProtectionTier and protection()", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct ProtectionTierTests {
    @Test("a tier is its raw value: the four tiers keep their names, and a tier this version does not know round-trips")
    func tiersAreRawValues() {
        #expect([ProtectionTier.hardware, .keyring, .portal, .passphrase].map(\.rawValue) == ["hardware", "keyring", "portal", "passphrase"])
        // A tier a later version adds is still a value (an enum would have no such value: nil).
        let later: ProtectionTier? = ProtectionTier(rawValue: "laterTier")
        #expect(later?.rawValue == "laterTier")
        #expect(later != .hardware && ProtectionTier(rawValue: "keyring") == .keyring)
        #expect(Set(ProtectionTier.allCases).count == ProtectionTier.allCases.count)
        #expect(ProtectionTier.allCases.contains(.passphrase))
        // A switch over tiers needs a default, as over TokenStoreError codes.
        func describe(_ tier: ProtectionTier) -> String {
            switch tier {
            case .hardware: return "TPM"
            case .keyring: return "keyring"
            default: return "other: \(tier)"
            }
        }
        #expect(describe(.hardware) == "TPM" && describe(.portal) == "other: portal")
    }

    @Test("protection() of a passphrase store: the passphrase tier, and why a higher tier is not in use")
    func passphraseStore() throws {
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        let provider = PassphraseKeyProvider(
            storePath: path, passphrase: secret("correct horse"), limits: .interactive, keyDirectory: directory.appending("keys").path)
        let store = try TokenStore(path: path, appID: testAppID, keyProvider: provider)
        defer { store.close() }
        let protection = try store.protection()
        #expect(protection.tier == .passphrase)
        #expect(!protection.reason.isEmpty, "below hardware the reason says why the TPM tier is not in use")
    }
}
