import Foundation
import TestSupport
import TestTraits
import Testing
import TokenStore

@testable import AuthSession

// Project Wycheproof's vectors (../shared/vectors/wycheproof, read in place: Tests/TestSupport/
// Wycheproof.swift) through the code that uses each primitive:
//
//     swift test --skip-build --filter WycheproofTests
//
// | file | through |
// |---|---|
// | json_web_signature_test.json, json_web_key_test.json | the ID-token validator's JWS parsing and signature steps, the group's keys as the tenant's key set |
// | rsa_signature_2048_sha256_test.json | the validator's key and signature steps (the vector's JWK as the tenant's key, its message and signature) |
// | ecdsa_secp256r1_sha256_p1363_test.json | the test server's ES256 verifier, which checks every DPoP proof; then the DPoP signers' output (software, TPM) through it |
// | xchacha20_poly1305_test.json | the AEAD the envelope and the key wrappers call (XChaCha20Poly1305) |

/// Runs the vector tests unless `TOKENSTORE_WYCHEPROOF_SKIP=1` (then they show as skipped, saying so).
private let vectorsWanted = ConditionTrait.enabled(
    if: !Wycheproof.isSkipped(),
    Comment(rawValue: "\(Wycheproof.skipVariable)=1: the Wycheproof vectors are not checked in this run"))

private let swtpm = ConditionTrait.enabled(
    if: SoftwareTPM.isInstalled, Comment(rawValue: "needs swtpm and tpm2-tools (scripts/install-deps)"))

@Suite("Wycheproof vectors through the code that uses each primitive", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct WycheproofTests {
    static let jwsFile = "json_web_signature_test.json"
    static let jwkFile = "json_web_key_test.json"
    static let rsaFile = "rsa_signature_2048_sha256_test.json"
    static let ecdsaFile = "ecdsa_secp256r1_sha256_p1363_test.json"
    static let aeadFile = "xchacha20_poly1305_test.json"

    @Test("every file: each valid case accepted, each invalid one refused, acceptable ones counted; one METRIC line a file and a total", vectorsWanted)
    func everyVectorGetsTheRightVerdict() async throws {
        var tallies: [(file: Wycheproof.File, tally: WycheproofTally)] = []
        for name in [Self.jwsFile, Self.jwkFile] {
            let file = try Wycheproof.load(name)
            tallies.append((file, try await WycheproofRunners.jws(file)))
        }
        let rsa = try Wycheproof.load(Self.rsaFile)
        tallies.append((rsa, try WycheproofRunners.rsaPKCS1(rsa)))
        let ecdsa = try Wycheproof.load(Self.ecdsaFile)
        tallies.append((ecdsa, try WycheproofES256.p1363(ecdsa)))
        let aead = try Wycheproof.load(Self.aeadFile)
        tallies.append((aead, try WycheproofRunners.xchacha20Poly1305(aead)))

        for (file, tally) in tallies {
            print(tally.metricLine)
            #expect(tally.cases == file.numberOfTests && tally.cases > 0, "\(file.name): \(tally.cases) of \(file.numberOfTests) cases judged")
            #expect(tally.wrong.isEmpty, "\(file.name): wrong verdicts:\n\(tally.wrong.joined(separator: "\n"))")
        }
        let cases = tallies.reduce(0) { $0 + $1.tally.cases }
        let wrong = tallies.reduce(0) { $0 + $1.tally.wrong.count }
        print("METRIC wycheproof cases=\(cases) wrong_verdicts=\(wrong)")
        // The validator accepts RS256 only: the JWS files' RS256 cases are the ones it judges on
        // their merits (valid accepted or invalid refused), the rest must all be refused.
        #expect(tallies[0].tally.validAccepted > 0 && tallies[2].tally.validAccepted > 0, "no valid signature was accepted at all")
    }

    @Test("the software DPoP key's signatures (DER → r‖s) verify at the test server's ES256 verifier; one bit off, refused", vectorsWanted)
    func softwareSignerOutputVerifies() throws {
        let messages = try WycheproofES256.messages(Wycheproof.load(Self.ecdsaFile))
        let key = try DPoPKey.generate()
        // Each message four times: a short r or s (a leading zero byte, which the conversion pads)
        // comes once in 128 integers, so a run meets a few.
        let figures = try WycheproofES256.judgeSigner(
            publicJWK: key.publicJWK, messages: messages + messages + messages + messages, sign: key.signES256)
        print("METRIC wycheproof_signer signer=software \(figures)")
        #expect(figures.failures.isEmpty, "\(figures.failures.joined(separator: "\n"))")
        #expect(figures.signatures == messages.count * 4 && figures.verified == figures.signatures)
        #expect(figures.tamperedRefused == figures.signatures)
    }

    @Test("the TPM-resident DPoP key's signatures (TPM r, s → r‖s) verify at the same verifier; one bit off, refused", vectorsWanted, swtpm)
    func tpmSignerOutputVerifies() throws {
        let messages = try WycheproofES256.messages(Wycheproof.load(Self.ecdsaFile))
        let tpm = try SoftwareTPM.start()
        let key = try TPMSigningKey.create(tcti: tpm.tcti).key
        let figures = try WycheproofES256.judgeSigner(publicJWK: key.publicJWK, messages: messages, sign: key.signES256)
        print("METRIC wycheproof_signer signer=tpm \(figures)")
        #expect(figures.failures.isEmpty, "\(figures.failures.joined(separator: "\n"))")
        #expect(figures.signatures == messages.count && figures.verified == figures.signatures)
        #expect(figures.tamperedRefused == figures.signatures)
    }

    @Test("without the vectors the suite fails, naming the folder and both variables; only TOKENSTORE_WYCHEPROOF_SKIP=1 skips it")
    func absentVectorsFailUnlessSkippedKnowingly() throws {
        let empty = try TemporaryDirectory(prefix: "tokenstore-no-vectors")
        let environment = [Wycheproof.directoryVariable: empty.path]
        #expect(Wycheproof.directory(environment: environment).path == empty.path)
        #expect(!Wycheproof.isSkipped(environment: environment), "an absent folder is not a reason to skip")
        do {
            _ = try Wycheproof.load(Self.rsaFile, environment: environment)
            Issue.record("loading from an empty folder succeeded")
        } catch let missing as Wycheproof.Missing {
            for word in [empty.path, Self.rsaFile, Wycheproof.directoryVariable, Wycheproof.skipVariable + "=1"] {
                #expect(missing.description.contains(word), "the failure does not name \(word): \(missing.description)")
            }
        }
        #expect(Wycheproof.isSkipped(environment: [Wycheproof.skipVariable: "1"]))
        #expect(!Wycheproof.isSkipped(environment: [Wycheproof.skipVariable: "yes"]), "only 1 opts out")
        // The default: beside the repository, not inside it.
        let standard = Wycheproof.directory(environment: [:]).path
        #expect(standard == repositoryRoot.deletingLastPathComponent().appendingPathComponent("shared/vectors/wycheproof").standardizedFileURL.path)
        #expect(!standard.hasPrefix(repositoryRoot.standardizedFileURL.path + "/"), "the vectors are not read from inside the repository")
    }
}
