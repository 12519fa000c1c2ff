import AuthSession
import Foundation
import TestSupport
import TestTraits
import Testing
@testable import TokenStore

// TPMSigningKey (the TPM-resident DPoP key, over TokenStore's TPMSigningDoor) against a real
// software TPM (swtpm on loopback TCP, a state directory per test: another directory is another
// TPM), its signatures checked by a real verifier: Python's `cryptography` (OpenSSL) in the test
// server's venv.
//
//     swift test --skip-build --filter TPMSigningKeyTests

private let swtpm = ConditionTrait.enabled(
    if: SoftwareTPM.isInstalled, Comment(rawValue: "needs swtpm and tpm2-tools (scripts/install-deps)"))

/// The test server's Python (scripts/authserver venv), which has `cryptography`.
private let python = repositoryRoot.appendingPathComponent(".build/authserver-venv/bin/python").path

/// Checks with OpenSSL (through `cryptography`) that `signature` (r‖s) is an ES256 signature of
/// `message` by the key `jwk` is, and prints the RFC 7638 canonical JWK and its thumbprint as
/// Python computes them: "valid|invalid <canonical jwk> <thumbprint>".
private let verifier = """
    import base64, hashlib, json, sys
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, utils
    jwk = json.loads(sys.argv[1]); message = bytes.fromhex(sys.argv[2]); signature = bytes.fromhex(sys.argv[3])
    def unb64(text): return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    numbers = ec.EllipticCurvePublicNumbers(int.from_bytes(unb64(jwk["x"]), "big"), int.from_bytes(unb64(jwk["y"]), "big"), ec.SECP256R1())
    der = utils.encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
    try:
        numbers.public_key().verify(der, message, ec.ECDSA(hashes.SHA256())); verdict = "valid"
    except InvalidSignature:
        verdict = "invalid"
    canonical = json.dumps({k: jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"), sort_keys=True)
    thumbprint = base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).rstrip(b"=").decode()
    print(verdict, canonical, thumbprint)
    """

private struct Verdict {
    let valid: Bool
    let canonicalJWK: String
    let thumbprint: String
}

private func verify(_ jwk: String, _ message: [UInt8], _ signature: [UInt8]) throws -> Verdict {
    let hex = { (bytes: [UInt8]) in bytes.map { String(format: "%02x", $0) }.joined() }
    let result = try ChildProcess.run(python, ["-c", verifier, jwk, hex(message), hex(signature)], timeout: .seconds(60))
    #expect(result.termination.code == 0, "verifier: \(result.standardErrorText)")
    let words = result.standardOutputText.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
    try #require(words.count == 3, "verifier said: \(result.standardOutputText)")
    return Verdict(valid: words[0] == "valid", canonicalJWK: words[1], thumbprint: words[2])
}

private func storeError(_ body: () throws -> Void) -> TokenStoreError? {
    do {
        try body()
        return nil
    } catch let failure as DPoPSigningFailure {
        guard case .store(let error) = failure else { return nil }
        return error
    } catch {
        return error as? TokenStoreError
    }
}

@Suite("TPMSigningKey on swtpm", swtpm, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct TPMSigningKeyTests {
    @Test func aSignatureVerifiesAgainstTheJWKAndTheThumbprintIsRFC7638() throws {
        let tpm = try SoftwareTPM.start()
        let (key, blob) = try TPMSigningKey.create(tcti: tpm.tcti)
        #expect(key.residence == .tpm)
        let message = Array("eyJ0eXAiOiJkcG9wK2p3dCJ9.eyJodG0iOiJQT1NUIn0".utf8)
        let signature = try key.signES256(message)
        #expect(signature.count == 64, "raw r‖s, not DER")

        let verdict = try verify(key.publicJWK, message, signature)
        #expect(verdict.valid, "OpenSSL verifies the TPM's signature with the JWK")
        #expect(verdict.canonicalJWK == key.publicJWK, "the JWK is RFC 7638's members in order, no whitespace")
        #expect(verdict.thumbprint == key.thumbprint)
        #expect(try verify(key.publicJWK, message + [0x2E], signature).valid == false, "the verifier can refuse")

        // The same key again from its blob: the same JWK, read from the public area (no TPM command).
        let commands = TPMSession.commandCount(tcti: tpm.tcti)
        let loaded = try TPMSigningKey.load(blob: blob, tcti: tpm.tcti)
        #expect(loaded.publicJWK == key.publicJWK && loaded.thumbprint == key.thumbprint)
        _ = (loaded.publicJWK, loaded.thumbprint, key.publicJWK, key.thumbprint)
        #expect(TPMSession.commandCount(tcti: tpm.tcti) == commands, "the JWK and thumbprint are cached: no TPM command")
        #expect(try verify(key.publicJWK, message, try loaded.signES256(message)).valid)
        #expect(TPMSession.commandCount(tcti: tpm.tcti) - commands == TPMSigningDoor.commandsPerProof)
        #expect(try tpm.transientHandleCount() == 0)
    }

    @Test func laterProofsReuseTheKeysSavedContextAndFallBackAfterATPMRestart() throws {
        let tpm = try SoftwareTPM.start()
        let relay = try TPMRelay(to: tpm)
        defer { relay.stop() }
        let blob = try TPMSigningKey.create(tcti: relay.tcti).blob
        let message = Array("eyJ0eXAiOiJkcG9wK2p3dCJ9.eyJodG0iOiJHRVQifQ".utf8)
        // A key read from its blob for each proof, as the session layer does (DPoPKeys.load).
        func proof() throws -> (commands: Int, valid: Bool) {
            let before = relay.exchanges.count
            let key = try TPMSigningKey.load(blob: blob, tcti: relay.tcti)
            let signature = try key.signES256(message)
            return (relay.exchanges.count - before, try verify(key.publicJWK, message, signature).valid)
        }
        let proofs = try (0..<4).map { _ in try proof() }
        print("METRIC tpm_commands_per_proof first=\(proofs[0].commands) later=\(proofs.dropFirst().map { String($0.commands) }.joined(separator: ","))")
        let counts = proofs.map(\.commands)
        let allValid = proofs.allSatisfy { $0.valid }
        #expect(allValid, "every signature verifies")
        #expect(counts[0] == TPMSigningDoor.commandsPerFirstProof, "\(counts)")
        #expect(Set(counts.dropFirst()) == [TPMSigningDoor.commandsPerProof], "\(counts)")
        #expect(TPMSigningDoor.commandsPerProof <= 3, "TPM2_ContextLoad, TPM2_Sign, TPM2_FlushContext")
        #expect(try tpm.transientHandleCount() == 0)

        // The TPM restarts (swtpm's control channel: CMD_INIT, a power cycle): the saved context is
        // no longer valid; the next proof falls back to the primary and the blob, and still verifies.
        let cycled = try ChildProcess.run("swtpm_ioctl", ["--tcp", "127.0.0.1:\(tpm.port + 1)", "-i"], timeout: .seconds(30))
        #expect(cycled.termination.code == 0, "swtpm_ioctl: \(cycled.standardErrorText)")
        let after = try proof()
        #expect(after.valid, "a proof after the TPM restarted")
        #expect(after.commands > TPMSigningDoor.commandsPerProof, "the saved context was refused and the key loaded again: \(after.commands)")
        let next = try proof()
        #expect(next.valid && next.commands == TPMSigningDoor.commandsPerProof, "saved again: \(next.commands)")
        #expect(try tpm.transientHandleCount() == 0)
    }

    @Test(.enabled(if: TPMResourceManager.isInstalled, "needs tpm2-abrmd (scripts/install-deps)"))
    func behindAResourceManagerALaterProofIsTwoCommandsAndLeavesTheTPMNoObject() throws {
        // tpm2-abrmd stands for the kernel's /dev/tpmrm0 (TPMResourceManager says why); the relay
        // between it and swtpm sees what the TPM itself is sent.
        let tpm = try SoftwareTPM.start()
        let relay = try TPMRelay(to: tpm)
        defer { relay.stop() }
        let manager = try TPMResourceManager.start(tcti: relay.tcti)
        defer { manager.stop() }
        let blob = try TPMSigningKey.create(tcti: manager.tcti).blob
        let message = Array("eyJ0eXAiOiJkcG9wK2p3dCJ9.eyJodG0iOiJQVVQifQ".utf8)
        func proof() throws -> (sent: Int, valid: Bool) {
            let before = TPMSession.commandCount(tcti: manager.tcti)
            let key = try TPMSigningKey.load(blob: blob, tcti: manager.tcti)
            let signature = try key.signES256(message)
            return (TPMSession.commandCount(tcti: manager.tcti) - before, try verify(key.publicJWK, message, signature).valid)
        }
        // The manager finishes a closed connection on its own time: the TPM's exchanges so far, once it is quiet.
        func quietCount() -> Int {
            var seen = relay.exchanges.count
            for _ in 0..<40 {
                usleep(50_000)
                let now = relay.exchanges.count
                if now == seen { break }
                seen = now
            }
            return seen
        }
        var proofs = [try proof()]
        let afterFirst = quietCount()
        // Four times as many proofs as swtpm has object slots, each on a connection of its own.
        for _ in 1..<12 { proofs.append(try proof()) }
        let tpmPerLaterProof = Double(quietCount() - afterFirst) / Double(proofs.count - 1)
        let counts = proofs.map(\.sent)
        print("METRIC tpm_commands_per_proof_resource_manager first=\(counts[0]) later=\(counts[1]) tpm_per_later_proof=\(tpmPerLaterProof)")
        let allValid = proofs.allSatisfy { $0.valid }
        #expect(allValid, "every signature verifies")
        #expect(counts[0] == TPMSigningDoor.commandsPerFirstProof, "\(counts)")
        #expect(Set(counts.dropFirst()) == [TPMSigningDoor.commandsPerProofBehindResourceManager], "TPM2_ContextLoad and TPM2_Sign: \(counts)")
        #expect(TPMSigningDoor.commandsPerProofBehindResourceManager <= 2)
        #expect(relay.transientObjectsLeft.isEmpty, "the manager took out what TokenStore left loaded: \(relay.transientObjectsLeft)")
    }

    @Test func twoSignaturesOfOneMessageDifferAndBothVerify() throws {
        let tpm = try SoftwareTPM.start()
        let key = try TPMSigningKey.create(tcti: tpm.tcti).key
        let message = Array("same message".utf8)
        let first = try key.signES256(message)
        let second = try key.signES256(message)
        #expect(first != second, "ECDSA takes a fresh nonce per signature")
        #expect(try verify(key.publicJWK, message, first).valid)
        #expect(try verify(key.publicJWK, message, second).valid)
    }

    @Test func fiftySignaturesInARowLeaveNoTransientObject() throws {
        let tpm = try SoftwareTPM.start()
        let key = try TPMSigningKey.create(tcti: tpm.tcti).key
        #expect(try tpm.transientHandleCount() == 0, "create flushes the primary")
        // swtpm has 3 object slots and no resource manager: a signature that left its primary or
        // its key loaded would make the 2nd or 3rd signature fail with TPM_RC_OBJECT_MEMORY.
        for index in 0..<50 {
            let signature = try key.signES256(Array("proof \(index)".utf8))
            #expect(signature.count == 64)
        }
        #expect(try tpm.transientHandleCount() == 0)
    }

    @Test func aBlobFromAnotherTPMIsAMismatchNamingTheTPMAndFlushesEverything() throws {
        let first = try SoftwareTPM.start()
        let second = try SoftwareTPM.start()
        let blob = try TPMSigningKey.create(tcti: first.tcti).blob
        let elsewhere = try TPMSigningKey.load(blob: blob, tcti: second.tcti)
        for _ in 0..<4 {  // more than swtpm's 3 object slots: each failure flushes what it made
            let error = storeError { _ = try elsewhere.signES256(Array("x".utf8)) }
            #expect(error?.code == .tpmMismatch, "\(error.map { "\($0)" } ?? "no error")")
            #expect(error?.message.contains(second.tcti) == true, "names the TPM: \(error?.message ?? "")")
            #expect(error?.message.contains("DPoP key") == true, "\(error?.message ?? "")")
        }
        #expect(try second.transientHandleCount() == 0)
        // The blob is not spent: the TPM that made it still signs with it.
        #expect(try TPMSigningKey.load(blob: blob, tcti: first.tcti).signES256(Array("x".utf8)).count == 64)
    }

    @Test func aStoppedOrAbsentTPMIsUnavailableWithTheReason() throws {
        let tpm = try SoftwareTPM.start()
        let (key, blob) = try TPMSigningKey.create(tcti: tpm.tcti)
        tpm.stop()
        let stopped = storeError { _ = try key.signES256(Array("x".utf8)) }
        #expect(stopped?.code == .tpmUnavailable)
        #expect(stopped?.message.contains(tpm.tcti) == true && stopped?.message.contains("did not answer") == true, "\(stopped?.message ?? "")")

        let nobody = try SoftwareTPM.unreachableTCTI()
        let absent = storeError { _ = try TPMSigningKey.create(tcti: nobody) }
        #expect(absent?.code == .tpmUnavailable && absent?.message.contains(nobody) == true, "\(absent?.message ?? "")")
        let device = storeError { _ = try TPMSigningKey.load(blob: blob, tcti: "device:/nonexistent/tpmrm0").signES256([1]) }
        #expect(device?.code == .tpmUnavailable && device?.message.contains("does not exist") == true, "\(device?.message ?? "")")
    }

    @Test func aTPMThatNeverAnswersTimesOutTheSignatureAndTheCreation() throws {
        let tpm = try SoftwareTPM.start()
        let key = try TPMSigningKey.create(tcti: tpm.tcti).key
        tpm.signal(SIGSTOP)  // the kernel still accepts its connections; nothing answers
        defer { tpm.signal(SIGCONT) }
        let signing = SoftwareTPM.bounded(.seconds(20)) { storeError { _ = try key.signES256(Array("x".utf8)) } }
        let error = try #require(signing.value, "the signature hung (no answer after \(signing.elapsed))")
        #expect(error?.code == .tpmUnavailable, "\(error.map { "\($0)" } ?? "no error")")
        #expect(error?.message.contains("did not answer within") == true && error?.message.contains(tpm.tcti) == true, "\(error?.message ?? "")")
        #expect(signing.elapsed < TPMSession.defaultTimeout + .seconds(3), "bounded by the time-out: \(signing.elapsed)")
        // The next call does not wait again for the same silent TPM.
        let again = SoftwareTPM.bounded(.seconds(20)) { storeError { _ = try TPMSigningKey.create(tcti: tpm.tcti) } }
        let second = try #require(again.value, "the creation hung")
        #expect(second?.code == .tpmUnavailable && again.elapsed < TPMSession.defaultTimeout + .seconds(3), "\(second?.message ?? "") after \(again.elapsed)")

        // Once the TPM answers again, the abandoned session finishes (flushing what it made) and the key signs.
        tpm.signal(SIGCONT)
        let deadline = ContinuousClock.now + .seconds(20)
        var signature: [UInt8]?
        while signature == nil, ContinuousClock.now < deadline {
            signature = try? key.signES256(Array("y".utf8))
            if signature == nil { usleep(100_000) }
        }
        #expect(signature?.count == 64)
        #expect(try tpm.transientHandleCount() == 0)
    }

    @Test func aCorruptedBlobIsATypedErrorAndTheTPMRefusesAnAlteredPrivatePart() throws {
        let tpm = try SoftwareTPM.start()
        let blob = try TPMSigningKey.create(tcti: tpm.tcti).blob
        // Not a blob at all, another kind of blob, truncated, trailing bytes: refused before any TPM command.
        let commands = TPMSession.commandCount(tcti: tpm.tcti)
        let dataKeyBlob = Array("TSTP".utf8) + blob.dropFirst(4)
        for bad in [[UInt8](repeating: 7, count: 32), dataKeyBlob, Array(blob.dropLast(3)), blob + [0]] {
            let error = storeError { _ = try TPMSigningKey.load(blob: bad, tcti: tpm.tcti) }
            #expect(error?.code == .dataKeyCorrupt, "\(error.map { "\($0)" } ?? "no error")")
        }
        // A public part that unmarshals but is not a signing key: a sealed data object's.
        let provider = TPMKeyProvider(tcti: tpm.tcti)
        let sealed = try TPMSealedBlob(decoding: try sealedDataKeyBlob(provider))
        let notSigning = TPMSealedBlob(kind: .signingKey, parentName: sealed.parentName, publicPart: sealed.publicPart, privatePart: sealed.privatePart)
        let wrongKind = storeError { _ = try TPMSigningKey.load(blob: notSigning.encoded, tcti: tpm.tcti) }
        #expect(wrongKind?.code == .dataKeyCorrupt && wrongKind?.message.contains("not a P-256 ECDSA signing key") == true)
        #expect(TPMSession.commandCount(tcti: tpm.tcti) - commands == 5, "only the data key's sealing asked the TPM (5 commands: its session included)")

        // The last byte of the TPM-encrypted private part: the TPM's integrity check refuses it.
        var altered = blob
        altered[altered.count - 1] ^= 0x01
        let key = try TPMSigningKey.load(blob: altered, tcti: tpm.tcti)
        for _ in 0..<4 {
            let error = storeError { _ = try key.signES256([1, 2, 3]) }
            #expect(error?.code == .tpmMismatch, "\(error.map { "\($0)" } ?? "no error")")
        }
        #expect(try tpm.transientHandleCount() == 0)
    }

    /// A data key's sealed blob, made through the provider's TPM session (no keyring needed).
    private func sealedDataKeyBlob(_ provider: TPMKeyProvider) throws -> [UInt8] {
        try TPMSession.with(tcti: provider.tcti) { session throws(TokenStoreError) -> [UInt8] in
            let (primary, name) = try session.createPrimary()
            return try session.withTransient(primary) { primary throws(TokenStoreError) in
                let sealed = try session.seal(SecretBytes.random(count: 32), under: primary)
                return TPMSealedBlob(parentName: name, publicPart: sealed.public, privatePart: sealed.private).encoded
            }
        }
    }
}
