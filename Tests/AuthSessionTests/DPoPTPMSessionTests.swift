@testable import AuthSession
import Foundation
import Testing
import TestSupport
import TestTraits
@testable import TokenStore

/// DPoP with the TPM-resident key (issue 27 items 3 and 5): a store whose data key a TPM seals
/// (swtpm here, a state directory of its own) makes its DPoP key inside that TPM, and every proof
/// of the session is a TPM2_Sign, checked by the real test server.
@Suite("DPoP with the TPM-resident key: a hardware-tier store signs its proofs in the TPM", sessionKeyringTrait, .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct DPoPTPMSessionTests {
    @Test("sign-in, resource proof, renewal and logout on a TPM store: the key is the TPM's, the store keeps only its blob")
    func tpmResidentKey() async throws {
        let tpm = try SoftwareTPM.start()
        defer { tpm.stop() }
        let f = try SessionFixture()
        let directory = try TemporaryDirectory()
        let store = try TokenStore(
            path: directory.appending("store/tokens.sqlite").path, appID: sessionAppID, keyProvider: TPMKeyProvider(tcti: tpm.tcti))
        defer { store.close() }
        #expect(try store.protection().tier == .softwareTPM, "swtpm is a software TPM")
        let session = try DPoPSessionTests.session(f, store: store)
        let signIn = try await DPoPSessionTests.signIn(f, session)

        let key = try #require(try await DPoPKeys.load(store: store))
        #expect(key.residence == .tpm)
        #expect(key is TPMSigningKey)
        let material = try #require(try store.dpopKeyMaterial())
        #expect(material.residence == .tpm)
        #expect(material.bytes.count != 97, "not a software key's scalar and point")
        #expect(signIn.accessToken.tokenType == "DPoP")
        #expect(try f.server.introspect(#require(signIn.accessToken.token.stringValue())).jkt == key.thumbprint)

        // A proof for the app's API is one TPM session (TPM2_Sign inside), and the server accepts it.
        let url = URL(string: f.server.baseURL.absoluteString + "/userinfo")!
        let before = TPMSession.commandCount(tcti: tpm.tcti)
        let proof = try await session.dpopProof(method: "GET", url: url, accessToken: signIn.accessToken)
        #expect(TPMSession.commandCount(tcti: tpm.tcti) - before == TPMSigningDoor.commandsPerProof, "signed inside the TPM")
        #expect(try f.server.userinfoStatus(authorization: signIn.accessToken.authorizationHeaderValue(), dpop: proof) == 200)

        // Renewal proves the same key; the refresh token stays bound to it.
        let renewed = try await session.renew(account: "alice", scopes: ["read:items"])
        #expect(renewed.tokenType == "DPoP")
        #expect(try f.server.introspect(#require(renewed.token.stringValue())).jkt == key.thumbprint)
        #expect(try await session.logout(account: "alice") == .revoked)
        #expect(try await DPoPKeys.load(store: store)?.thumbprint == key.thumbprint, "one key per store")
        #expect(try tpm.transientHandleCount() == 0, "every TPM object flushed")
    }
}
