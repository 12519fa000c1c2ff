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

    @Test("the C ABI's order: each ts_protection value in include/tokenstore.h is its tier's place in abiOrder, and every tier has one")
    func abiOrderFollowsTheHeader() throws {
        let header = try String(contentsOf: repositoryRoot.appendingPathComponent("include/tokenstore.h"), encoding: .utf8)
        // "    TS_PROTECTION_SOFTWARE_TPM = 4 /**< …": the name without underscores, and its value.
        let values: [(name: String, value: Int)] = header.split(separator: "\n").compactMap { line in
            let text = line.trimmingCharacters(in: .whitespaces)
            guard text.hasPrefix("TS_PROTECTION_"), let equals = text.firstIndex(of: "=") else { return nil }
            let name = text[..<equals].dropFirst("TS_PROTECTION_".count).trimmingCharacters(in: .whitespaces)
            let digits = text[text.index(after: equals)...].drop { $0 == " " }.prefix { $0.isNumber }
            return Int(digits).map { (name.replacingOccurrences(of: "_", with: ""), $0) }
        }
        #expect(values.count == ProtectionTier.abiOrder.count)
        for (name, value) in values {
            #expect(value < ProtectionTier.abiOrder.count && ProtectionTier.abiOrder[value].rawValue.uppercased() == name,
                "TS_PROTECTION_\(name) = \(value)")
        }
        #expect(Set(ProtectionTier.abiOrder) == Set(ProtectionTier.allCases))
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
