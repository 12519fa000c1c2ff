import Foundation
import TestSupport
import TestTraits
import Testing
@testable import TokenStore

#if canImport(Glibc)
import Glibc
#endif

// The tier's honesty on a real software TPM (swtpm on loopback TCP, a state directory per test)
// and the real Secret Service of scripts/with-keyring:
//
//     scripts/with-keyring swift test --skip-build --filter TPMTierHonestyTests
//
// A software TPM is not the hardware tier; a TCTI given as a path is never loaded; an owner
// password on the TPM is named as such, not as "unreachable".

private let swtpmAndKeyring = ConditionTrait.enabled(
    if: PrivateKeyring.isAvailable && SoftwareTPM.isInstalled && access("/usr/bin/tpm2_changeauth", X_OK) == 0,
    Comment(rawValue: "needs swtpm and tpm2-tools (scripts/install-deps) and the private keyring (scripts/with-keyring)"))

private func thrown(_ body: () throws -> Void) -> TokenStoreError? {
    do {
        try body()
        return nil
    } catch {
        return error as? TokenStoreError
    }
}

@Suite("TPM tier honesty on swtpm", .serialized, swtpmAndKeyring, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct TPMTierHonestyTests {
    @Test("a store sealed by swtpm is softwareTPM, not hardware, and says why; the probe says simulator")
    func aSoftwareTPMIsNotTheHardwareTier() throws {
        let tpm = try SoftwareTPM.start()
        let directory = try TemporaryDirectory()
        let path = directory.appending("store/tokens.sqlite").path
        let store = try TokenStore(path: path, appID: testAppID, keyProvider: TPMKeyProvider(tcti: tpm.tcti))
        let storeID = try #require(try TokenStore.inspect(path: path).storeIdentifier)
        defer { try? PrivateKeyring.clearItems(storeID: storeID) }
        defer { store.close() }
        let protection = try store.protection()
        #expect(protection.tier == .softwareTPM, "\(protection)")
        #expect(protection.tier != .hardware)
        #expect(protection.reason.contains("software TPM") && protection.reason.contains(tpm.tcti), "\(protection.reason)")
        let probe = TPMKeyProvider.probe(tcti: tpm.tcti)
        #expect(probe.available && probe.simulator, "\(probe)")
        // A keyring store beside a software TPM: the reason says the TPM is a software one.
        let keyring = StoreProtection.of(.secretService, tpm: probe)
        #expect(keyring.tier == .keyring && keyring.reason.contains("software TPM"), "\(keyring.reason)")
    }

    @Test("the kernel's device TCTI is decided by the TPM's manufacturer; every other TCTI is a software TPM")
    func simulatorByTCTIThenByManufacturer() throws {
        for tcti in ["device:/dev/tpmrm0", "device:/dev/tpm0", "device", "device:", "libtss2-tcti-device.so.0:/dev/tpmrm0"] {
            #expect(TPMIdentity.isKernelDevice(tcti), "\(tcti)")
        }
        for tcti in ["swtpm:host=127.0.0.1,port=2321", "mssim:host=localhost", "tabrmd:bus_type=session", "cmd:tpm2_send", "pcap:device:/dev/tpmrm0", "swtpm"] {
            #expect(!TPMIdentity.isKernelDevice(tcti), "\(tcti)")
        }
        // A resource manager (a TPM DPoP proof leaves the flush to it): the kernel's tpmrm devices and tpm2-abrmd.
        for tcti in ["device:/dev/tpmrm0", "device:/dev/tpmrm12", "libtss2-tcti-device.so.0:/dev/tpmrm0", "tabrmd", "tabrmd:bus_type=session"] {
            #expect(TPMIdentity.isResourceManaged(tcti), "\(tcti)")
        }
        for tcti in ["device:/dev/tpm0", "device", "device:", "device:/dev/tpmrm", "device:/dev/tpmrmX", "device:/tmp/tpmrm0", "swtpm:host=127.0.0.1,port=2321", "mssim", "pcap:tabrmd", "cmd:tpm2_send"] {
            #expect(!TPMIdentity.isResourceManaged(tcti), "\(tcti)")
        }
        // What swtpm (libtpms) answers to TPM2_GetCapability: manufacturer "IBM", vendor "SW   TPM".
        let tpm = try SoftwareTPM.start()
        let identity = try TPMIdentity.read(tcti: tpm.tcti)
        #expect(identity.manufacturer == "IBM", "\(identity)")
        #expect(identity.isSimulatorManufacturer, "libtpms's manufacturer marks a software TPM even behind a device TCTI (a VM's vTPM)")
        #expect(!TPMIdentity(manufacturer: "IFX", vendor: "SLB9672").isSimulatorManufacturer)
        #expect(!TPMIdentity(manufacturer: "NTC", vendor: "NPCT75x").isSimulatorManufacturer)
        #expect(!TPMIdentity(manufacturer: "AMD", vendor: "AMD").isSimulatorManufacturer)
        #expect(StoreProtection.of(.tpm, tpm: TPMAvailability(tcti: "device:/dev/tpmrm0", available: true, reason: "", simulator: false)).tier == .hardware)
        #expect(StoreProtection.of(.tpm, tpm: TPMAvailability(tcti: tpm.tcti, available: true, reason: "", simulator: true)).tier == .softwareTPM)
        #expect(try tpm.transientHandleCount() == 0)
    }

    @Test("a TCTI whose module is a path is refused with a typed error and the file is never loaded")
    func aTCTIGivenAsAPathIsNeverLoaded() throws {
        let directory = try TemporaryDirectory(prefix: "tokenstore-tcti-path")
        let marker = directory.appending("loaded").path
        let source = directory.appending("evil.c").path
        let library = directory.appending("libevil.so").path
        try "#include <stdio.h>\n__attribute__((constructor)) static void loaded(void) { FILE *f = fopen(\"\(marker)\", \"w\"); if (f) fclose(f); }\n"
            .write(toFile: source, atomically: true, encoding: .utf8)
        let built = try ChildProcess.run("gcc", ["-shared", "-fPIC", "-o", library, source], timeout: .seconds(60))
        try #require(built.termination.code == 0, "gcc: \(built.standardErrorText)")
        for tcti in ["\(library):host=127.0.0.1", library, "./relative/lib.so"] {
            let provider = TPMKeyProvider(tcti: tcti)
            let reference = DataKeyReference(storeID: "00112233445566778899aabbccddeeff", keyID: "ffeeddccbbaa99887766554433221100", appID: testAppID)
            let error = thrown { try provider.storeKey(SecretBytes.random(count: 32), for: reference) }
            #expect(error?.code == .tpmUnavailable, "\(tcti): \(error.map { "\($0)" } ?? "no error")")
            #expect(error?.message.contains("path") == true, "\(error?.message ?? "")")
            let probe = TPMKeyProvider.probe(tcti: tcti)
            #expect(!probe.available && probe.reason.contains("path"), "\(probe)")
        }
        #expect(access(marker, F_OK) != 0, "the TCTI's library was loaded (its constructor ran)")
    }

    @Test("an owner password on the TPM is named (not 'unreachable'); once removed the store opens again")
    func anOwnerPasswordIsNamed() throws {
        let tpm = try SoftwareTPM.start()
        let provider = TPMKeyProvider(tcti: tpm.tcti)
        let reference = DataKeyReference(storeID: randomIdentifier(), keyID: randomIdentifier(), appID: testAppID)
        defer { try? PrivateKeyring.clearItems(storeID: reference.storeID) }
        let key = SecretBytes.random(count: 32)
        try provider.storeKey(key, for: reference)

        // Another user of the TPM sets an owner password (tpm2-tools, as in the review).
        let set = try ChildProcess.run("tpm2_changeauth", ["-T", tpm.tcti, "-c", "owner", "hijack"], timeout: .seconds(30))
        try #require(set.termination.code == 0, "tpm2_changeauth: \(set.standardErrorText)")
        let error = thrown { _ = try provider.loadKey(reference) }
        #expect(error?.code == .tpmUnavailable, "\(error.map { "\($0)" } ?? "no error")")
        let text = error.map { "\($0)" } ?? ""
        #expect(text.contains("owner hierarchy has a password"), "\(text)")
        #expect(!text.contains("running and reachable"), "\(text)")
        let probe = TPMKeyProvider.probe(tcti: tpm.tcti)
        #expect(!probe.available && probe.reason.contains("owner hierarchy has a password"), "\(probe)")

        let cleared = try ChildProcess.run("tpm2_changeauth", ["-T", tpm.tcti, "-c", "owner", "-p", "hijack"], timeout: .seconds(30))
        try #require(cleared.termination.code == 0, "tpm2_changeauth: \(cleared.standardErrorText)")
        #expect(try provider.loadKey(reference) == key, "the same key once the owner password is gone")
        #expect(try tpm.transientHandleCount() == 0)
    }

    @Test("the TPM's answers to an owner-authorized command name what happened")
    func ownerAuthorizationAnswersAreNamed() {
        // TPM_RC_BAD_AUTH and TPM_RC_AUTH_FAIL for session 1 (format 1), TPM_RC_LOCKOUT (a warning).
        #expect(TPMDiagnosis.ownerAuthorization(rc: 0x9A2)?.contains("owner hierarchy has a password") == true)
        #expect(TPMDiagnosis.ownerAuthorization(rc: 0x98E)?.contains("owner hierarchy has a password") == true)
        #expect(TPMDiagnosis.ownerAuthorization(rc: 0x921)?.contains("dictionary-attack lockout") == true)
        #expect(TPMDiagnosis.ownerAuthorization(rc: 0x902) == nil, "TPM_RC_OBJECT_MEMORY is not an authorization answer")
        #expect(TPMDiagnosis.ownerAuthorization(rc: 0xA000A) == nil, "a TCTI error is not the TPM's answer")
    }
}

private func randomIdentifier() -> String { (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined() }
