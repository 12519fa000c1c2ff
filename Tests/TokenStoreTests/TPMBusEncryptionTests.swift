import Foundation
import TestSupport
import TestTraits
import Testing
@testable import TokenStore

// What crosses the TPM interface (a discrete TPM's LPC/SPI bus, swtpm's socket here): a relay in
// front of swtpm records every byte, and the data key must never be among them. The real
// software TPM and the real Secret Service of scripts/with-keyring:
//
//     scripts/with-keyring swift test --skip-build --filter TPMBusEncryptionTests

private let swtpmAndKeyring = ConditionTrait.enabled(
    if: PrivateKeyring.isAvailable && SoftwareTPM.isInstalled,
    Comment(rawValue: "needs swtpm and tpm2-tools (scripts/install-deps) and the private keyring (scripts/with-keyring)"))

private let unseal: UInt32 = 0x15E  // TPM2_CC_Unseal
private let create: UInt32 = 0x153  // TPM2_CC_Create
private let createPrimary: UInt32 = 0x131  // TPM2_CC_CreatePrimary
private let readPublic: UInt32 = 0x173  // TPM2_CC_ReadPublic
private let load: UInt32 = 0x157  // TPM2_CC_Load
private let flushContext: UInt32 = 0x165  // TPM2_CC_FlushContext
private let srkHandle: UInt32 = 0x8100_0001
private let passwordSession: UInt32 = 0x4000_0009  // TPM_RS_PW
private let decrypt: UInt8 = 0x20  // TPMA_SESSION_DECRYPT: the command's first parameter is encrypted
private let encrypt: UInt8 = 0x40  // TPMA_SESSION_ENCRYPT: the answer's first parameter is encrypted

private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    Data(haystack).range(of: Data(needle)) != nil
}

/// The sessions the TPM holds now (`tpm2_getcap handles-loaded-session`).
private func loadedSessions(_ tpm: SoftwareTPM) throws -> Int {
    let result = try ChildProcess.run("tpm2_getcap", ["-T", tpm.tcti, "handles-loaded-session"], timeout: .seconds(30))
    #expect(result.termination.code == 0, "tpm2_getcap: \(result.standardErrorText)")
    return result.standardOutputText.split(separator: "\n").filter { $0.contains("0x") }.count
}

/// A TPM store at `directory` made through `tcti` holding `items` (account → value); its path and store id.
private func makeStore(in directory: TemporaryDirectory, tcti: String, items: [String: String]) throws -> (path: String, storeID: String) {
    let path = directory.appending("store/tokens.sqlite").path
    let made = try TokenStore(path: path, appID: testAppID, keyProvider: TPMKeyProvider(tcti: tcti))
    for (account, value) in items { try made.set(SecretBytes(utf8: value), for: key(account, .generic)) }
    made.close()
    return (path, try #require(try TokenStore.inspect(path: path).storeIdentifier))
}

/// Opens the store at `path` twice through `tcti`, reading every item each time; the TPM commands each open sent.
private func openTwice(_ path: String, tcti: String, items: [String: String]) throws -> [Int] {
    var perOpen: [Int] = []
    for _ in 0..<2 {
        let before = TPMSession.commandCount(tcti: tcti)
        let opened = try TokenStore(path: path, appID: testAppID, keyProvider: TPMKeyProvider(tcti: tcti))
        for (account, value) in items { #expect(try opened.secret(for: key(account, .generic))?.stringValue() == value) }
        opened.close()
        perOpen.append(TPMSession.commandCount(tcti: tcti) - before)
    }
    return perOpen
}

/// Two opens' exchanges: one TPM2_Unseal each, answered, the two answers different bytes, each in an
/// HMAC session (not the password session) that encrypts the answer.
private func expectTwoEncryptedUnseals(_ exchanges: [TPMRelay.Exchange]) throws {
    let unseals = exchanges.filter { $0.commandCode == unseal }
    try #require(unseals.count == 2, "one TPM2_Unseal per open: \(exchanges.map(\.commandCode))")
    #expect(unseals.allSatisfy { $0.responseCode == 0 })
    #expect(unseals[0].response != unseals[1].response, "the Unseal answers of two opens are the same bytes")
    for exchange in unseals {
        let session = try #require(TPMRelay.firstSession(of: exchange.command, handles: 1))
        #expect(session.handle >> 24 == 0x02, "an HMAC session, not the password session: \(String(session.handle, radix: 16))")
        #expect(session.attributes & encrypt != 0, "the answer is encrypted")
    }
}

@Suite("The data key never crosses the TPM interface in clear", .serialized, swtpmAndKeyring, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct TPMBusEncryptionTests {
    @Test("two opens through a relay: the Unseal answers differ, the data key is in no recorded byte, Create and Unseal use an encrypting salted session")
    func twoOpensThroughARelay() throws {
        let tpm = try SoftwareTPM.start()
        let relay = try TPMRelay(to: tpm)
        defer { relay.stop() }
        let directory = try TemporaryDirectory()
        let items = ["alice": "bus-secret"]
        let (path, storeID) = try makeStore(in: directory, tcti: relay.tcti, items: items)
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }

        let perOpen = try openTwice(path, tcti: relay.tcti, items: items)
        let exchanges = relay.exchanges
        print("METRIC tpm_commands_per_open commands=\(perOpen.map(String.init).joined(separator: ",")) relayed=\(exchanges.count)")
        #expect(perOpen == [TPMKeyProvider.operationsPerOpen, TPMKeyProvider.operationsPerOpen], "\(perOpen)")
        #expect(exchanges.count == TPMSession.commandCount(tcti: relay.tcti), "the relay saw every command the sessions counted")
        #expect(exchanges.filter { $0.commandCode == 0x144 }.isEmpty, "no TPM2_Startup: this TPM was started and never asked for it")

        // The data key, read without the relay (the same TPM, the same sealed item).
        let reference = try #require(try TokenStore.inspect(path: path).activeKeyReference(appID: testAppID))
        let key = try #require(try TPMKeyProvider(tcti: tpm.tcti).loadKey(reference)).copyBytes()
        #expect(key.count == 32)
        #expect(!contains(relay.recordedBytes, key), "the data key crossed the TPM interface in clear")

        try expectTwoEncryptedUnseals(exchanges)
        let creates = exchanges.filter { $0.commandCode == create }
        try #require(creates.count == 1, "one TPM2_Create, the data key's seal")
        let session = try #require(TPMRelay.firstSession(of: creates[0].command, handles: 1))
        #expect(session.handle != passwordSession && session.handle >> 24 == 0x02)
        #expect(session.attributes & decrypt != 0, "the sealed data (inSensitive) is encrypted")
        #expect(try tpm.transientHandleCount() == 0)
        #expect(try loadedSessions(tpm) == 0, "every session ended with its command")
    }

    @Test("two opens through the persistent SRK (systemd's 0x81000001) and a relay: 5 commands, no CreatePrimary, the data key in no recorded byte, the Unseal encrypted by a session salted to the SRK, the SRK neither flushed nor evicted")
    func twoOpensThroughThePersistentSRK() throws {
        let tpm = try SoftwareTPM.start()
        let relay = try TPMRelay(to: tpm)
        defer { relay.stop() }
        let directory = try TemporaryDirectory()
        // Sealed before the SRK exists (TPM2_CreatePrimary), as on a machine whose systemd makes it later.
        let items = ["alice": "srk-alice", "bob": "srk-bob", "carol": "srk-carol"]
        let (path, storeID) = try makeStore(in: directory, tcti: relay.tcti, items: items)
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        let reference = try #require(try TokenStore.inspect(path: path).activeKeyReference(appID: testAppID))
        let blob = try TPMSealedBlob(decoding: try #require(try SecretServiceKeyProvider().loadItem(reference)).copyBytes())
        let srkName = try PersistentSRK.provision(tpm)
        #expect(srkName == blob.parentName, "the persistent SRK made from systemd's template is the primary the store was sealed under")
        let sealedBefore = relay.exchanges.count

        let perOpen = try openTwice(path, tcti: relay.tcti, items: items)
        let opens = Array(relay.exchanges.dropFirst(sealedBefore))
        print("METRIC tpm_commands_per_open_srk commands=\(perOpen.map(String.init).joined(separator: ",")) relayed=\(opens.count)")
        #expect(perOpen == [TPMKeyProvider.operationsPerOpenThroughSRK, TPMKeyProvider.operationsPerOpenThroughSRK], "\(perOpen)")
        #expect(perOpen.allSatisfy { $0 < TPMKeyProvider.operationsPerOpen })
        #expect(opens.count == perOpen.reduce(0, +), "the relay saw every command the sessions counted")
        #expect(opens.filter { $0.commandCode == createPrimary }.isEmpty, "no TPM2_CreatePrimary: \(opens.map(\.commandCode))")
        #expect(opens.filter { $0.commandCode == readPublic && TPMRelay.uint32($0.command, at: 10) == srkHandle }.count == 2)
        let loads = opens.filter { $0.commandCode == load }
        #expect(loads.count == 2 && loads.allSatisfy { TPMRelay.uint32($0.command, at: 10) == srkHandle && $0.responseCode == 0 },
                "each open loads under the SRK")
        #expect(opens.filter { $0.commandCode == flushContext && TPMRelay.uint32($0.command, at: 10) == srkHandle }.isEmpty,
                "the persistent SRK is never flushed")

        let dataKey = try #require(try TPMKeyProvider(tcti: tpm.tcti).loadKey(reference)).copyBytes()
        #expect(!contains(relay.recordedBytes, dataKey), "the data key crossed the TPM interface in clear")
        try expectTwoEncryptedUnseals(opens)
        // The session is salted to the SRK (TPM2_StartAuthSession's tpmKey handle).
        let starts = opens.filter { $0.commandCode == 0x176 }  // TPM2_CC_StartAuthSession
        #expect(starts.count == 2 && starts.allSatisfy { TPMRelay.uint32($0.command, at: 10) == srkHandle })
        #expect(try tpm.transientHandleCount() == 0)
        #expect(try loadedSessions(tpm) == 0, "every session ended with its command")
        #expect(try PersistentSRK.persistentHandles(tpm) == [PersistentSRK.handle], "the SRK is still there")
        #expect(try PersistentSRK.name(tpm) == srkName)
    }

    @Test("a key rotation seals the new key through an encrypting session: the new key is in no recorded byte")
    func rotationThroughARelay() throws {
        let tpm = try SoftwareTPM.start()
        let relay = try TPMRelay(to: tpm)
        defer { relay.stop() }
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        let store = try TokenStore(path: path, appID: testAppID, keyProvider: TPMKeyProvider(tcti: relay.tcti))
        let storeID = try #require(try TokenStore.inspect(path: path).storeIdentifier)
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        try store.set(SecretBytes(utf8: "rotated"), for: key("alice", .generic))
        _ = try store.rotateDataKey()
        store.close()
        let reference = try #require(try TokenStore.inspect(path: path).activeKeyReference(appID: testAppID))
        let key = try #require(try TPMKeyProvider(tcti: tpm.tcti).loadKey(reference)).copyBytes()
        #expect(!contains(relay.recordedBytes, key), "the rotated data key crossed the TPM interface in clear")
        #expect(relay.exchanges.filter { $0.commandCode == create }.count == 2)
    }

    @Test("the DPoP key's creation goes through an encrypting salted session")
    func dpopKeyCreationThroughARelay() throws {
        let tpm = try SoftwareTPM.start()
        let relay = try TPMRelay(to: tpm)
        defer { relay.stop() }
        _ = try TPMSigningDoor.createKey(tcti: relay.tcti)
        let creates = relay.exchanges.filter { $0.commandCode == create }
        try #require(creates.count == 1)
        let session = try #require(TPMRelay.firstSession(of: creates[0].command, handles: 1))
        #expect(session.handle >> 24 == 0x02 && session.attributes & decrypt != 0 && session.attributes & encrypt != 0,
                "session \(String(session.handle, radix: 16)) attributes \(String(session.attributes, radix: 16))")
        #expect(creates[0].responseCode == 0)
        #expect(try tpm.transientHandleCount() == 0)
        #expect(try loadedSessions(tpm) == 0)
    }
}
