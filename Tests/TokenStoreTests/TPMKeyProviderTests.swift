import Foundation
import TestSupport
import TestTraits
import Testing
@testable import TokenStore

// TPMKeyProvider against a real software TPM (swtpm on loopback TCP, a state directory per
// test: another directory is another TPM) and the real Secret Service of scripts/with-keyring:
//
//     scripts/with-keyring swift test --skip-build --filter TPMKeyProviderTests
//
// Each test starts its own swtpm (SoftwareTPM), so the tests can run in parallel; the
// provider itself holds one TCTI connection at a time per process.

private let swtpmAndKeyring = ConditionTrait.enabled(
    if: PrivateKeyring.isAvailable && SoftwareTPM.isInstalled,
    Comment(rawValue: "needs swtpm (scripts/install-deps) and the private keyring (scripts/with-keyring)"))

private func randomHex() -> String { (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined() }

private func thrown(_ body: () throws -> Void) -> TokenStoreError? {
    do {
        try body()
        return nil
    } catch {
        return error as? TokenStoreError
    }
}

/// The transient objects the TPM holds now (`tpm2_getcap handles-transient`): 0 when every
/// path flushed what it made (swtpm has no resource manager: nothing is flushed for us).
private func transientHandles(_ tpm: SoftwareTPM) throws -> Int {
    let result = try ChildProcess.run("tpm2_getcap", ["-T", tpm.tcti, "handles-transient"], timeout: .seconds(30))
    #expect(result.termination.code == 0, "tpm2_getcap: \(result.standardErrorText)")
    return result.standardOutputText.split(separator: "\n").filter { $0.contains("0x80") }.count
}

// Serialized: its tests share TPMSession's process-wide lock anyway, and in one merged pass
// five of them at once (width 8) left one waiting in Esys_Unseal on an idle swtpm.
@Suite("TPMKeyProvider on swtpm", .serialized, swtpmAndKeyring, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct TPMKeyProviderTests {
    @Test func sealUnsealRoundTripKeepsNoRawKeyInTheKeyring() throws {
        let tpm = try SoftwareTPM.start()
        let provider = TPMKeyProvider(tcti: tpm.tcti)
        let reference = DataKeyReference(storeID: randomHex(), keyID: randomHex(), appID: testAppID)
        defer { try? PrivateKeyring.clearItems(storeID: reference.storeID) }
        let key = SecretBytes.random(count: 32)

        #expect(try provider.loadKey(reference) == nil)
        try provider.storeKey(key, for: reference)
        #expect(try provider.loadKey(reference) == key)
        #expect(try TPMKeyProvider(tcti: tpm.tcti).loadKey(reference) == key, "a new provider unseals it too")

        // One item, carrying the store id, holding a sealed blob and not the key in any encoding.
        #expect(try PrivateKeyring.itemCount(attributes: ["store-id": reference.storeID]) == 1)
        let item = try #require(try provider.keyring.loadItem(reference)).copyBytes()
        #expect(Array(item.prefix(4)) == Array("TSTP".utf8))
        let raw = key.copyBytes()
        let encodings = [raw, Array(Data(raw).base64EncodedString().utf8), Array(raw.map { String(format: "%02x", $0) }.joined().utf8)]
        for encoding in encodings {
            #expect(Data(item).range(of: Data(encoding)) == nil, "the item holds the raw key")
        }
        #expect(try transientHandles(tpm) == 0)
    }

    @Test func aStoreOpensAgainAfterTheTPMRestartsAndReportsItsTier() throws {
        let tpm = try SoftwareTPM.start()
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        var store: TokenStore? = try TokenStore(path: path, appID: testAppID, keyProvider: TPMKeyProvider(tcti: tpm.tcti))
        let storeID = try #require(try TokenStore.inspect(path: path).storeIdentifier)
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try store?.set(SecretBytes(utf8: "tpm-secret"), for: key("alice"))
        #expect(try store?.protection().tier == .softwareTPM, "swtpm is a software TPM, not the hardware tier")
        store?.close()
        store = nil
        #expect(try TokenStore.inspect(path: path).keyProvider == .tpm)

        // The same TPM state after a restart (TPM2_Startup again, same owner seed): same primary key.
        tpm.stop()
        let again = try SoftwareTPM.start(state: tpm.stateDirectory)
        let reopened = try TokenStore(path: path, appID: testAppID, keyProvider: TPMKeyProvider(tcti: again.tcti))
        #expect(try reopened.secret(for: key("alice"))?.stringValue() == "tpm-secret")
        // A key rotation seals the new key with the same TPM; the old key's item is deleted.
        let before = try #require(try TokenStore.inspect(path: path).activeKeyIdentifier)
        _ = try reopened.rotateDataKey()
        reopened.close()
        let inspection = try TokenStore.inspect(path: path)
        #expect(inspection.activeKeyIdentifier != before)
        #expect(try PrivateKeyring.itemCount(attributes: ["store-id": storeID, "key-id": before]) == 0)
        let rotated = try TokenStore(path: path, appID: testAppID, keyProvider: TPMKeyProvider(tcti: again.tcti))
        #expect(try rotated.secret(for: key("alice"))?.stringValue() == "tpm-secret")
        rotated.close()
        #expect(try transientHandles(again) == 0)
    }

    @Test func anotherTPMDoesNotOpenTheStoreAndChangesNothing() throws {
        let first = try SoftwareTPM.start()
        let second = try SoftwareTPM.start()
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        let store = try TokenStore(path: path, appID: testAppID, keyProvider: TPMKeyProvider(tcti: first.tcti))
        let storeID = try #require(try TokenStore.inspect(path: path).storeIdentifier)
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try store.set(SecretBytes(utf8: "bound"), for: key("alice"))
        store.close()
        let files = ["", "-wal", "-shm"].compactMap { FileManager.default.contents(atPath: path + $0) }
        let activeReference = try #require(try TokenStore.inspect(path: path).activeKeyReference(appID: testAppID))
        let item = try #require(try SecretServiceKeyProvider().loadItem(activeReference))

        // More attempts than swtpm has object slots (3): each must flush what it made.
        for _ in 0..<4 {
            let error = thrown { _ = try TokenStore(path: path, appID: testAppID, keyProvider: TPMKeyProvider(tcti: second.tcti)) }
            #expect(error?.code == .tpmMismatch)
            #expect(error?.message.contains(second.tcti) == true, "names the TPM: \(error?.message ?? "")")
            #expect(error.map { "\($0)" }?.contains("reset") == false)
        }
        #expect(try transientHandles(second) == 0)
        #expect(["", "-wal", "-shm"].compactMap { FileManager.default.contents(atPath: path + $0) } == files)
        let reference = try #require(try TokenStore.inspect(path: path).activeKeyReference(appID: testAppID))
        #expect(try SecretServiceKeyProvider().loadItem(reference) == item, "the sealed key is unchanged")

        let reopened = try TokenStore(path: path, appID: testAppID, keyProvider: TPMKeyProvider(tcti: first.tcti))
        #expect(try reopened.secret(for: key("alice"))?.stringValue() == "bound")
        reopened.close()
    }

    @Test func aSealedKeyAlteredInTheKeyringIsRefusedByTheTPMAndFlushed() throws {
        let tpm = try SoftwareTPM.start()
        let provider = TPMKeyProvider(tcti: tpm.tcti)
        let reference = DataKeyReference(storeID: randomHex(), keyID: randomHex(), appID: testAppID)
        defer { try? PrivateKeyring.clearItems(storeID: reference.storeID) }
        try provider.storeKey(SecretBytes.random(count: 32), for: reference)
        var blob = try #require(try provider.keyring.loadItem(reference)).copyBytes()
        blob[blob.count - 1] ^= 0x01  // the last byte of the TPM-encrypted private part
        try provider.keyring.storeItem(SecretBytes(blob), for: reference)
        for _ in 0..<4 {  // more than swtpm's 3 object slots: the failed TPM2_Load flushes the primary
            let error = thrown { _ = try provider.loadKey(reference) }
            #expect(error?.code == .tpmMismatch, "\(error.map { "\($0)" } ?? "no error")")
        }
        #expect(try transientHandles(tpm) == 0)
        #expect(try provider.keyring.loadItem(reference)?.copyBytes() == blob, "the item is left as it was")
    }

    @Test func anUnreachableTPMIsATypedErrorAndNoStoreIsMade() throws {
        let tcti = try SoftwareTPM.unreachableTCTI()
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        let error = thrown { _ = try TokenStore(path: path, appID: testAppID, keyProvider: TPMKeyProvider(tcti: tcti)) }
        #expect(error?.code == .tpmUnavailable)
        #expect(error?.message.contains("TPM") == true && error?.message.contains(tcti) == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("did not answer") == true, "\(error?.message ?? "")")
        if let storeID = try? TokenStore.inspect(path: path).storeIdentifier {
            #expect(try PrivateKeyring.itemCount(attributes: ["store-id": storeID]) == 0, "no key item without a TPM")
        }

        let probe = TPMKeyProvider.probe(tcti: tcti)
        #expect(!probe.available && probe.reason.contains("did not answer"))
        let device = TPMKeyProvider.probe(tcti: "device:/nonexistent/tpmrm0")
        #expect(!device.available && device.reason.contains("/nonexistent/tpmrm0") && device.reason.contains("does not exist"))
    }

    @Test func aTPMThatNeverAnswersTimesOutTheOpen() throws {
        let tpm = try SoftwareTPM.start()
        let provider = TPMKeyProvider(tcti: tpm.tcti)
        let reference = DataKeyReference(storeID: randomHex(), keyID: randomHex(), appID: testAppID)
        defer { try? PrivateKeyring.clearItems(storeID: reference.storeID) }
        let key = SecretBytes.random(count: 32)
        try provider.storeKey(key, for: reference)
        tpm.signal(SIGSTOP)  // the kernel still accepts its connections; nothing answers
        defer { tpm.signal(SIGCONT) }
        let open = SoftwareTPM.bounded(.seconds(20)) { thrown { _ = try provider.loadKeyAndStoreEpoch(reference) } }
        let error = try #require(open.value, "the open hung (no answer after \(open.elapsed))")
        #expect(error?.code == .tpmUnavailable, "\(error.map { "\($0)" } ?? "no error")")
        #expect(error?.message.contains("did not answer within") == true && error?.message.contains(tpm.tcti) == true, "\(error?.message ?? "")")
        #expect(open.elapsed < TPMSession.defaultTimeout + .seconds(3), "bounded by the time-out: \(open.elapsed)")
        let probe = SoftwareTPM.bounded(.seconds(20)) { TPMKeyProvider.probe(tcti: tpm.tcti) }
        #expect(probe.value?.available == false && probe.value?.reason.contains("did not answer") == true)
        tpm.signal(SIGCONT)
        let deadline = ContinuousClock.now + .seconds(20)
        var unsealed: SecretBytes?
        while unsealed == nil, ContinuousClock.now < deadline {
            unsealed = try? provider.loadKey(reference)
            if unsealed == nil { usleep(100_000) }
        }
        #expect(unsealed == key, "the same key opens once the TPM answers")
    }

    @Test func theTierReportSaysWhyAHigherTierIsNotInUse() throws {
        let tpm = try SoftwareTPM.start()
        let nobody = try SoftwareTPM.unreachableTCTI()
        let unreachable = StoreProtection.of(.secretService, tpm: TPMKeyProvider.probe(tcti: nobody))
        #expect(unreachable.tier == .keyring && unreachable.reason.contains("TPM") && unreachable.reason.contains("did not answer"))
        let available = StoreProtection.of(.secretService, tpm: TPMKeyProvider.probe(tcti: tpm.tcti))
        #expect(available.tier == .keyring && available.reason.contains("a TPM is available"))
        #expect(StoreProtection.of(.portal, tpm: TPMKeyProvider.probe(tcti: tpm.tcti)).tier == .portal)
        #expect(StoreProtection.of(.passphrase, tpm: TPMKeyProvider.probe(tcti: tpm.tcti)).tier == .passphrase)
        #expect(StoreProtection.of(.tpm, tpm: TPMAvailability(tcti: "x", available: false, reason: "unused")).tier == .hardware)
        #expect(try transientHandles(tpm) == 0)
    }
}
