import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

private let swtpmAndKeyring = ConditionTrait.enabled(
    if: PrivateKeyring.isAvailable && SoftwareTPM.isInstalled,
    Comment(rawValue: "needs swtpm (scripts/install-deps) and the private keyring (scripts/with-keyring)"))

/// Key slots with a real software TPM (swtpm, its own state per test) and the real keyring: the
/// keyring and TPM slots both live in the Secret Service, each under its own key id, so one does
/// not overwrite the other.
@Suite("Key slots with a TPM", swtpmAndKeyring, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct KeySlotTPMTests {
    @Test("keyring → TPM → keyring (add, reopen with the new slot alone, remove the old): every row reads back; a fresh TPM state: the recovery key opens")
    func migrateThroughTPM() throws {
        let tpm = try SoftwareTPM.start()
        defer { tpm.stop() }
        let t = try TestStore()
        let storeID = t.store.storeIdentifier
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        for n in 0..<6 { try t.store.set(secret("secret-\(n)"), for: key("user\(n)", .generic)) }
        let (_, recoveryKey) = try t.store.addRecoveryKeySlot(limits: .interactive)

        // keyring → TPM
        try t.store.addKeySlot(TPMKeyProvider(tcti: tpm.tcti))
        try t.store.removeKeySlot(1)
        t.store.close()
        #expect(try TokenStore.inspect(path: t.path).keyProvider == .tpm)
        let byTPM = try TokenStore(path: t.path, appID: testAppID, keyProvider: TPMKeyProvider(tcti: tpm.tcti))
        for n in 0..<6 { #expect(try byTPM.secret(for: key("user\(n)", .generic)) == secret("secret-\(n)")) }
        #expect(try byTPM.keySlots.map(\.kind) == [.recovery, .tpm])

        // TPM → keyring
        try byTPM.addKeySlot(SecretServiceKeyProvider())
        let tpmSlot = try #require(try byTPM.keySlots.first { $0.kind == .tpm })
        try byTPM.removeKeySlot(tpmSlot.id)
        byTPM.close()
        let byKeyring = try t.reopen()
        for n in 0..<6 { #expect(try byKeyring.secret(for: key("user\(n)", .generic)) == secret("secret-\(n)")) }
        #expect(try byKeyring.verify().isHealthy)

        // Back to the TPM, then the TPM gets a fresh state (another machine) and the keyring item goes.
        try byKeyring.addKeySlot(TPMKeyProvider(tcti: tpm.tcti))
        let keyringSlot = try #require(try byKeyring.keySlots.first { $0.kind == .secretService })
        try byKeyring.removeKeySlot(keyringSlot.id)
        byKeyring.close()
        tpm.stop()
        let fresh = try SoftwareTPM.start()
        defer { fresh.stop() }
        #expect(throws: TokenStoreError.self) {
            try TokenStore(path: t.path, appID: testAppID, keyProvider: TPMKeyProvider(tcti: fresh.tcti))
        }
        let recovered = try TokenStore(path: t.path, appID: testAppID, keyProvider: RecoveryKeyProvider(recoveryKey: recoveryKey))
        for n in 0..<6 { #expect(try recovered.secret(for: key("user\(n)", .generic)) == secret("secret-\(n)")) }
        try recovered.addKeySlot(SecretServiceKeyProvider())
        recovered.close()
        for n in 0..<6 { #expect(try t.reopen().secret(for: key("user\(n)", .generic)) == secret("secret-\(n)")) }
    }
}
