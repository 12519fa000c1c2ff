import Foundation
import TestSupport
import TestTraits
import Testing
@testable import TokenStore

// The TPM tier's open through the machine's persistent storage root key (0x81000001, as systemd
// provisions it) when it is TokenStore's primary, and only then; TPM2_Startup only when the TPM
// asks. Real swtpm (the SRK made with tpm2-tools: PersistentSRK), a relay counting the commands,
// the real Secret Service of scripts/with-keyring:
//
//     scripts/with-keyring swift test --skip-build --filter TPMPersistentSRKTests

private let swtpmAndKeyring = ConditionTrait.enabled(
    if: PrivateKeyring.isAvailable && SoftwareTPM.isInstalled,
    Comment(rawValue: "needs swtpm and tpm2-tools (scripts/install-deps) and the private keyring (scripts/with-keyring)"))

private let startupCode: UInt32 = 0x144  // TPM2_CC_Startup
private let createPrimaryCode: UInt32 = 0x131  // TPM2_CC_CreatePrimary
private let loadCode: UInt32 = 0x157  // TPM2_CC_Load
private let createCode: UInt32 = 0x153  // TPM2_CC_Create
private let srkHandle: UInt32 = 0x8100_0001

/// A store of three items sealed through `tcti`; returns its path, store id and the sealed blob.
private func makeStore(tcti: String, in directory: TemporaryDirectory) throws -> (path: String, storeID: String, blob: TPMSealedBlob) {
    let path = directory.appending("store/tokens.sqlite").path
    let store = try TokenStore(path: path, appID: testAppID, keyProvider: TPMKeyProvider(tcti: tcti))
    for account in ["alice", "bob", "carol"] { try store.set(SecretBytes(utf8: "v-\(account)"), for: key(account, .generic)) }
    store.close()
    let inspection = try TokenStore.inspect(path: path)
    let storeID = try #require(inspection.storeIdentifier)
    let reference = try #require(inspection.activeKeyReference(appID: testAppID))
    let item = try #require(try SecretServiceKeyProvider().loadItem(reference))
    return (path, storeID, try TPMSealedBlob(decoding: item.copyBytes()))
}

/// Opens the store at `path` through `tcti`, reads every item, and returns the TPM commands the open sent.
private func openAndReadEverything(_ path: String, tcti: String) throws -> Int {
    let before = TPMSession.commandCount(tcti: tcti)
    let store = try TokenStore(path: path, appID: testAppID, keyProvider: TPMKeyProvider(tcti: tcti))
    for account in ["alice", "bob", "carol"] {
        #expect(try store.secret(for: key(account, .generic))?.stringValue() == "v-\(account)")
    }
    store.close()
    return TPMSession.commandCount(tcti: tcti) - before
}

/// The Name of the primary TPM2_CreatePrimary derives with TokenStore's template on `tcti` (flushed).
private func derivedPrimaryName(_ tcti: String) throws -> [UInt8] {
    try TPMSession.with(tcti: tcti) { session throws(TokenStoreError) -> [UInt8] in
        let (primary, name) = try session.createPrimary()
        session.flush(primary)
        return name
    }
}

@Suite("The TPM open through the persistent SRK", .serialized, swtpmAndKeyring, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct TPMPersistentSRKTests {
    @Test("tpm2-tools' SRK from the TCG template has the Name of TokenStore's primary; a store sealed before it opens through it, and again after it is evicted")
    func aStoreSealedBeforeTheSRKOpensThroughItAndWithoutIt() throws {
        let tpm = try SoftwareTPM.start()
        let relay = try TPMRelay(to: tpm)
        defer { relay.stop() }
        let directory = try TemporaryDirectory()
        let store = try makeStore(tcti: relay.tcti, in: directory)
        defer { try? PrivateKeyring.clearItems(storeID: store.storeID) }
        #expect(try openAndReadEverything(store.path, tcti: relay.tcti) == TPMKeyProvider.operationsPerOpen, "no SRK yet")

        let srkName = try PersistentSRK.provision(tpm)
        #expect(srkName == store.blob.parentName)
        #expect(srkName == (try derivedPrimaryName(tpm.tcti)), "the persistent SRK is the key TPM2_CreatePrimary derives")
        let before = relay.exchanges.count
        #expect(try openAndReadEverything(store.path, tcti: relay.tcti) == TPMKeyProvider.operationsPerOpenThroughSRK)
        let open = relay.exchanges.dropFirst(before)
        #expect(open.filter { $0.commandCode == createPrimaryCode }.isEmpty, "\(open.map(\.commandCode))")
        #expect(open.filter { $0.commandCode == loadCode }.map { TPMRelay.uint32($0.command, at: 10) } == [srkHandle])

        // A new seal (a key rotation) still goes under the derived primary: here the same key, the same Name.
        let rotating = try TokenStore(path: store.path, appID: testAppID, keyProvider: TPMKeyProvider(tcti: relay.tcti))
        _ = try rotating.rotateDataKey()
        rotating.close()
        let reference = try #require(try TokenStore.inspect(path: store.path).activeKeyReference(appID: testAppID))
        let rotated = try TPMSealedBlob(decoding: try #require(try SecretServiceKeyProvider().loadItem(reference)).copyBytes())
        #expect(rotated.parentName == srkName)
        #expect(try openAndReadEverything(store.path, tcti: relay.tcti) == TPMKeyProvider.operationsPerOpenThroughSRK)

        // The owner evicts the SRK: the store opens as before it existed.
        try PersistentSRK.remove(tpm)
        #expect(try openAndReadEverything(store.path, tcti: relay.tcti) == TPMKeyProvider.operationsPerOpen)
        #expect(try tpm.transientHandleCount() == 0)
    }

    @Test("another key at 0x81000001 (the SRK template under the endorsement seed; an RSA key) is not used: the open derives the primary, and a seal never goes under it",
          arguments: [PersistentSRK.Kind.endorsementECC, .ownerRSA])
    func anotherKeyAtTheSRKHandleIsNotUsed(_ kind: PersistentSRK.Kind) throws {
        let tpm = try SoftwareTPM.start()
        let relay = try TPMRelay(to: tpm)
        defer { relay.stop() }
        let otherName = try PersistentSRK.provision(tpm, kind)
        let derived = try derivedPrimaryName(tpm.tcti)
        #expect(otherName != derived)

        let directory = try TemporaryDirectory()
        let store = try makeStore(tcti: relay.tcti, in: directory)  // sealed with the other key in place
        defer { try? PrivateKeyring.clearItems(storeID: store.storeID) }
        #expect(store.blob.parentName == derived && store.blob.parentName != otherName, "the seal went under the derived primary")
        let creates = relay.exchanges.filter { $0.commandCode == createCode }
        #expect(!creates.isEmpty && creates.allSatisfy { TPMRelay.uint32($0.command, at: 10) != srkHandle })

        let before = relay.exchanges.count
        #expect(try openAndReadEverything(store.path, tcti: relay.tcti) == TPMKeyProvider.operationsPerOpen)
        let open = relay.exchanges.dropFirst(before)
        #expect(open.filter { $0.commandCode == loadCode && TPMRelay.uint32($0.command, at: 10) == srkHandle }.isEmpty,
                "nothing was loaded under the other key")
        #expect(open.filter { $0.commandCode == createPrimaryCode }.count == 1)
        #expect(try PersistentSRK.name(tpm) == otherName, "the other key is left where it was")
        #expect(try tpm.transientHandleCount() == 0)
    }

    @Test("an SRK with a password (the same Name, the load refused) falls back to the derived primary: the store opens")
    func anSRKWithAPasswordFallsBack() throws {
        let tpm = try SoftwareTPM.start()
        let directory = try TemporaryDirectory()
        let store = try makeStore(tcti: tpm.tcti, in: directory)
        defer { try? PrivateKeyring.clearItems(storeID: store.storeID) }
        let srkName = try PersistentSRK.provision(tpm, .storageRootKeyWithPassword)
        #expect(srkName == store.blob.parentName, "a password is not part of the public area")
        // TPM2_ReadPublic, the refused TPM2_Load, then the derived path's 6.
        #expect(try openAndReadEverything(store.path, tcti: tpm.tcti) == TPMKeyProvider.operationsPerOpen + 1)
        #expect(try tpm.transientHandleCount() == 0)
    }

    @Test("a TPM that was never started gets TPM2_Startup once, when it asks, and the opens after send none")
    func startupOnlyWhenTheTPMAsks() throws {
        let tpm = try SoftwareTPM.start(startupClear: false)
        let relay = try TPMRelay(to: tpm)
        defer { relay.stop() }
        let directory = try TemporaryDirectory()
        let store = try makeStore(tcti: relay.tcti, in: directory)
        defer { try? PrivateKeyring.clearItems(storeID: store.storeID) }
        let first = try #require(relay.exchanges.first)
        #expect(first.responseCode == 0x100, "the unstarted TPM answered TPM_RC_INITIALIZE")
        #expect(relay.exchanges.filter { $0.commandCode == startupCode }.map(\.responseCode) == [0])
        let before = relay.exchanges.count
        #expect(try openAndReadEverything(store.path, tcti: relay.tcti) == TPMKeyProvider.operationsPerOpen)
        try PersistentSRK.provision(tpm)
        #expect(try openAndReadEverything(store.path, tcti: relay.tcti) == TPMKeyProvider.operationsPerOpenThroughSRK)
        #expect(relay.exchanges.dropFirst(before).filter { $0.commandCode == startupCode }.isEmpty)

        // Restarted unstarted (a reboot without firmware startup): the open asks once more, and opens.
        relay.stop()
        tpm.stop()
        let again = try SoftwareTPM.start(state: tpm.stateDirectory, startupClear: false)
        let relayAgain = try TPMRelay(to: again)
        defer { relayAgain.stop() }
        #expect(try openAndReadEverything(store.path, tcti: relayAgain.tcti) == TPMKeyProvider.operationsPerOpenThroughSRK + 2,
                "the refused TPM2_ReadPublic, TPM2_Startup, then the SRK path")
        #expect(relayAgain.exchanges.filter { $0.commandCode == startupCode }.count == 1)
    }

    @Test("a TPM + PIN slot opens through the SRK too (5 commands), and a wrong PIN is still wrongPIN")
    func aPINSlotOpensThroughTheSRK() throws {
        let tpm = try SoftwareTPM.start()
        let directory = try TemporaryDirectory()
        let store = try makeStore(tcti: tpm.tcti, in: directory)
        defer { try? PrivateKeyring.clearItems(storeID: store.storeID) }
        let adding = try TokenStore(path: store.path, appID: testAppID, keyProvider: TPMKeyProvider(tcti: tpm.tcti))
        try adding.addKeySlot(TPMPINKeyProvider(pin: SecretBytes(utf8: "48213"), tcti: tpm.tcti))
        adding.close()
        try PersistentSRK.provision(tpm)

        let before = TPMSession.commandCount(tcti: tpm.tcti)
        let opened = try TokenStore(path: store.path, appID: testAppID, keyProvider: TPMPINKeyProvider(pin: SecretBytes(utf8: "48213"), tcti: tpm.tcti))
        #expect(try opened.secret(for: key("bob", .generic))?.stringValue() == "v-bob")
        opened.close()
        #expect(TPMSession.commandCount(tcti: tpm.tcti) - before == TPMKeyProvider.operationsPerOpenThroughSRK)

        var wrong: TokenStoreError?
        do {
            _ = try TokenStore(path: store.path, appID: testAppID, keyProvider: TPMPINKeyProvider(pin: SecretBytes(utf8: "00000"), tcti: tpm.tcti))
        } catch let error as TokenStoreError {
            wrong = error
        }
        #expect(wrong?.code == .wrongPIN, "\(wrong.map { "\($0)" } ?? "no error")")
        #expect(try tpm.transientHandleCount() == 0)
    }

    @Test("a DPoP key's first proof in a process loads the key under the persistent SRK: 5 commands, no CreatePrimary, the SRK kept")
    func firstProofThroughTheSRK() throws {
        let tpm = try SoftwareTPM.start()
        let relay = try TPMRelay(to: tpm)
        defer { relay.stop() }
        let made = try TPMSigningDoor.createKey(tcti: relay.tcti)
        _ = try PersistentSRK.provision(tpm)
        let digest = [UInt8](repeating: 0x5a, count: 32)
        let before = (commands: TPMSession.commandCount(tcti: relay.tcti), exchanges: relay.exchanges.count)
        let signature = try TPMSigningDoor.sign(digest: digest, blob: made.blob, tcti: relay.tcti)
        #expect(signature.count == 64)
        #expect(TPMSession.commandCount(tcti: relay.tcti) - before.commands == TPMSigningDoor.commandsPerFirstProofThroughSRK)
        let proof = relay.exchanges.dropFirst(before.exchanges)
        #expect(proof.filter { $0.commandCode == createPrimaryCode }.isEmpty, "\(proof.map(\.commandCode))")
        #expect(proof.filter { $0.commandCode == loadCode }.map { TPMRelay.uint32($0.command, at: 10) } == [srkHandle])
        // The SRK is still there for the next open or first proof (not flushed, not evicted).
        #expect(try PersistentSRK.persistentHandles(tpm).map { $0.lowercased() } == ["0x81000001"])
    }
}
