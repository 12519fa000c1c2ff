import Foundation
import TestTraits
import Testing
import TestSupport
@testable import TokenStore

private let swtpmToolsAndKeyring = ConditionTrait.enabled(
    if: PrivateKeyring.isAvailable && SoftwareTPM.isInstalled && FileManager.default.isExecutableFile(atPath: "/usr/bin/tpm2_dictionarylockout"),
    Comment(rawValue: "needs swtpm and tpm2-tools (scripts/install-deps) and the private keyring (scripts/with-keyring)"))

/// The TPM + PIN key slot (``TPMPINKeyProvider``) on a real software TPM (swtpm, its own state per
/// test) with the store made on the real keyring: the TPM's own dictionary-attack protection limits
/// the PINs. The lockout parameters are the TPM owner's: the test sets them as the owner would
/// (`tpm2_dictionarylockout`, TPM2_DictionaryAttackParameters); the library only reads them.
@Suite("TPM + PIN key slot", swtpmToolsAndKeyring, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct KeySlotTPMPINTests {
    private let pin = SecretBytes(Array("4821".utf8))

    /// The owner's TPM2_DictionaryAttackParameters: `maxTries` failures lock out, one is forgiven per `recovery` seconds.
    private func setLockout(_ tpm: SoftwareTPM, maxTries: Int, recovery: Int) throws {
        let result = try ChildProcess.run(
            "tpm2_dictionarylockout", ["-T", tpm.tcti, "-s", "-n", "\(maxTries)", "-t", "\(recovery)", "-l", "10"], timeout: .seconds(30))
        try #require(result.termination.code == 0, "tpm2_dictionarylockout: \(result.standardErrorText)")
    }

    /// A keyring store with six rows and a PIN slot on `tpm`.
    private func storeWithPINSlot(_ tpm: SoftwareTPM) throws -> TestStore {
        let t = try TestStore()
        for n in 0..<6 { try t.store.set(secret("secret-\(n)"), for: key("user\(n)", .generic)) }
        try t.store.addKeySlot(TPMPINKeyProvider(pin: pin, tcti: tpm.tcti))
        #expect(try t.store.keySlots.map(\.kind) == [.secretService, .tpmPIN])
        t.store.close()
        return t
    }

    private func open(_ t: TestStore, pin: String, _ tpm: SoftwareTPM) throws -> TokenStore {
        try TokenStore(path: t.path, appID: testAppID, keyProvider: TPMPINKeyProvider(pin: SecretBytes(Array(pin.utf8)), tcti: tpm.tcti))
    }

    private func expectRows(_ store: TokenStore, sourceLocation: SourceLocation = #_sourceLocation) throws {
        for n in 0..<6 {
            #expect(try store.secret(for: key("user\(n)", .generic)) == secret("secret-\(n)"), sourceLocation: sourceLocation)
        }
    }

    @Test("the PIN's authorization value depends on the store and the slot, and is not the PIN")
    func authValueIsBoundToTheStore() throws {
        let provider = TPMPINKeyProvider(pin: pin, tcti: "swtpm:host=127.0.0.1,port=1")
        let one = try provider.authValue(DataKeyReference(storeID: "aa", keyID: "01", appID: testAppID)).copyBytes()
        let other = try provider.authValue(DataKeyReference(storeID: "bb", keyID: "01", appID: testAppID)).copyBytes()
        let slot = try provider.authValue(DataKeyReference(storeID: "aa", keyID: "02", appID: testAppID)).copyBytes()
        #expect(one.count == 32 && one != other && one != slot)
        #expect(!one.containsSubsequence(Array("4821".utf8)))
        #expect(throws: TokenStoreError.invalidInput) {
            try TPMPINKeyProvider(pin: SecretBytes(Array("12".utf8))).authValue(DataKeyReference(storeID: "aa", keyID: "01", appID: testAppID))
        }
    }

    @Test("add a PIN slot to the open store; the right PIN alone (no keyring item for it) opens every row")
    func rightPINOpens() throws {
        let tpm = try SoftwareTPM.start()
        defer { tpm.stop() }
        let t = try storeWithPINSlot(tpm)
        defer { try? PrivateKeyring.clearItems(storeID: t.store.storeIdentifier) }
        let byPIN = try open(t, pin: "4821", tpm)
        try expectRows(byPIN)
        #expect(byPIN.keyProvider.kind == .tpmPIN)
        #expect(try byPIN.verify().isHealthy)
        // Another TPM (another machine) does not open it, PIN or not.
        let other = try SoftwareTPM.start()
        defer { other.stop() }
        #expect(throws: TokenStoreError.tpmMismatch) { try open(t, pin: "4821", other) }
    }

    @Test("a store opened by PIN locks and unlocks: unlock unseals the key again with the PIN")
    func lockThenUnlock() throws {
        let tpm = try SoftwareTPM.start()
        defer { tpm.stop() }
        let t = try storeWithPINSlot(tpm)
        defer { try? PrivateKeyring.clearItems(storeID: t.store.storeIdentifier) }
        let byPIN = try open(t, pin: "4821", tpm)
        try byPIN.lock()
        #expect(throws: TokenStoreError.storeLocked) { try byPIN.secret(for: key("user0", .generic)) }
        try byPIN.unlock()
        try expectRows(byPIN)
    }

    @Test("wrong PINs → wrongPIN with the tries the TPM still allows, 2, 1, 0; then even the right PIN is tpmLockedOut; nothing changed")
    func wrongPINsLockOut() throws {
        let tpm = try SoftwareTPM.start()
        defer { tpm.stop() }
        try setLockout(tpm, maxTries: 3, recovery: 1000)
        let t = try storeWithPINSlot(tpm)
        defer { try? PrivateKeyring.clearItems(storeID: t.store.storeIdentifier) }
        for expected in [2, 1, 0] {
            do {
                _ = try open(t, pin: "0000", tpm)
                Issue.record("a wrong PIN opened the store")
            } catch let error as TokenStoreError {
                #expect(error.code == .wrongPIN, "\(error)")
                #expect(error.pinTriesLeft == expected, "\(error)")
                #expect(error.message.contains(expected > 0 ? "\(expected) more wrong PIN" : "now in dictionary-attack lockout"), "\(error.message)")
            }
        }
        do {
            _ = try open(t, pin: "4821", tpm)
            Issue.record("a locked-out TPM unsealed the key")
        } catch let error as TokenStoreError {
            #expect(error.code == .tpmLockedOut, "\(error)")
            let wait = try #require(error.lockoutRecovery, "\(error)")
            #expect(wait > .zero && wait <= .seconds(1000), "\(wait)")
            #expect(!error.description.contains("reset"), "\(error.description)")
        }
        // Nothing was changed: the keyring slot opens every row, and the slots are as they were.
        let byKeyring = try t.reopen()
        try expectRows(byKeyring)
        #expect(try byKeyring.keySlots.map(\.kind) == [.secretService, .tpmPIN])
        #expect(try byKeyring.verify().isHealthy)
    }

    @Test("after 3 wrong PINs the right one is tpmLockedOut with a recovery time; after that time the right PIN opens")
    func lockoutRecovers() throws {
        let tpm = try SoftwareTPM.start()
        defer { tpm.stop() }
        try setLockout(tpm, maxTries: 3, recovery: 3)
        let t = try storeWithPINSlot(tpm)
        defer { try? PrivateKeyring.clearItems(storeID: t.store.storeIdentifier) }
        for _ in 0..<3 { #expect(throws: TokenStoreError.wrongPIN) { try open(t, pin: "9999", tpm) } }
        var wait = Duration.zero
        do {
            _ = try open(t, pin: "4821", tpm)
            Issue.record("a locked-out TPM unsealed the key")
        } catch let error as TokenStoreError {
            #expect(error.code == .tpmLockedOut, "\(error)")
            wait = try #require(error.lockoutRecovery, "\(error)")
            #expect(wait == .seconds(3), "one failure over the limit, 3 s each: \(wait)")
        }
        Thread.sleep(forTimeInterval: Double(wait.components.seconds) + 0.5)
        try expectRows(try open(t, pin: "4821", tpm))
    }
}

extension KeySlotTPMPINTests {
    @Test("through a relay in front of the TPM: neither the data key nor the PIN crosses in clear; Create and Unseal run in encrypting HMAC sessions")
    func busCarriesNoSecret() throws {
        let tpm = try SoftwareTPM.start()
        let relay = try TPMRelay(to: tpm)
        defer { relay.stop() }
        let t = try TestStore()
        defer { try? PrivateKeyring.clearItems(storeID: t.store.storeIdentifier) }
        try t.store.set(secret("bus-secret"), for: key("alice", .generic))
        let reference = DataKeyReference(storeID: t.store.storeIdentifier, keyID: t.store.keyIdentifier, appID: testAppID)
        let dataKey = try #require(try SecretServiceKeyProvider().loadKey(reference)).copyBytes()
        let longPIN = "pin-\(UUID().uuidString.prefix(12))"
        try t.store.addKeySlot(TPMPINKeyProvider(pin: SecretBytes(Array(longPIN.utf8)), tcti: relay.tcti))
        t.store.close()
        let viaRelay = try TokenStore(
            path: t.path, appID: testAppID, keyProvider: TPMPINKeyProvider(pin: SecretBytes(Array(longPIN.utf8)), tcti: relay.tcti))
        #expect(try viaRelay.secret(for: key("alice", .generic)) == secret("bus-secret"))
        let bytes = relay.recordedBytes
        #expect(dataKey.count == 32 && !bytes.containsSubsequence(dataKey), "the data key crossed the TPM interface in clear")
        #expect(!bytes.containsSubsequence(Array(longPIN.utf8)), "the PIN crossed the TPM interface")
        for (code, attribute) in [(UInt32(0x153), UInt8(0x20)), (UInt32(0x15E), UInt8(0x40))] {  // Create: decrypt; Unseal: encrypt
            let exchange = try #require(relay.exchanges.first { $0.commandCode == code }, "no command 0x\(String(code, radix: 16))")
            let session = try #require(TPMRelay.firstSession(of: exchange.command, handles: 1))
            #expect(session.handle >> 24 == 0x02 && session.attributes & attribute != 0, "0x\(String(code, radix: 16)): \(session)")
        }
    }
}

extension Array where Element == UInt8 {
    fileprivate func containsSubsequence(_ part: [UInt8]) -> Bool {
        guard part.count <= count else { return false }
        return (0...(count - part.count)).contains { Array(self[$0..<$0 + part.count]) == part }
    }
}
