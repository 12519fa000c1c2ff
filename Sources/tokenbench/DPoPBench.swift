import AuthSession
import Foundation
import TokenStore

/// `tokenbench dpop-proof ITERATIONS`: the cost of one DPoP proof with the software
/// P-256 key: header and claims, ES256 through libcrypto, r‖s, base64url, `ath` set (the proof an
/// app sends to its API). The key is made once, as a session loads it once per process.
/// Prints `METRIC bench_dpop_proof p50_us=… p99_us=… goal_p50_us=200 iterations=…`.
enum DPoPBench {
    static func run(_ arguments: [String]) throws {
        guard arguments.count == 2, let iterations = Int(arguments[1]), iterations > 0 else {
            usageError("dpop-proof ITERATIONS")
        }
        let key = try DPoPKey.generate()
        let url = "https://api.example.com/notes?page=2"
        let accessToken = String(repeating: "a", count: 43)
        var samples: [UInt64] = []
        samples.reserveCapacity(iterations)
        var length = 0
        for _ in 0..<(iterations + iterations / 10) {  // the first tenth warms up and is not counted
            let start = monotonicNanos()
            let proof = try DPoPProof.make(
                key: key, method: "GET", url: url, nonce: "server-nonce", accessToken: accessToken,
                issuedAt: Int64(Date().timeIntervalSince1970))
            samples.append(monotonicNanos() - start)
            length = proof.utf8.count
        }
        let counted = Array(samples.dropFirst(iterations / 10)).sorted()
        func at(_ q: Double) -> Double { Double(counted[min(counted.count - 1, Int(Double(counted.count) * q))]) / 1e3 }
        print(
            "METRIC bench_dpop_proof p50_us=\(String(format: "%.1f", at(0.5))) p99_us=\(String(format: "%.1f", at(0.99))) "
                + "goal_p50_us=200 proof_bytes=\(length) iterations=\(iterations)")
    }

    /// `tokenbench dpop-proof-tpm ITERATIONS`: the same proof with the TPM-resident key
    /// (`TPMSigningKey` on `$TOKENSTORE_TPM_TCTI`, scripts/with-swtpm): each proof is one TPM
    /// session on a connection of its own; after the first (warm-up, not counted) it loads the
    /// key's saved context (TPM2_ContextLoad, Sign, a flush). The key is made once; its JWK and
    /// thumbprint are cached (no TPM command).
    /// Prints `METRIC bench_dpop_proof_tpm p50_us=… p95_us=… tpm_commands_per_proof=… iterations=… tcti=…`.
    static func runTPM(_ arguments: [String]) throws {
        guard arguments.count == 2, let iterations = Int(arguments[1]), iterations > 0 else {
            usageError("dpop-proof-tpm ITERATIONS")
        }
        let tcti = TPMKeyProvider.environmentTCTI()
        let key = try TPMSigningKey.create(tcti: tcti).key
        let url = "https://api.example.com/notes?page=2"
        let accessToken = String(repeating: "a", count: 43)
        var samples: [UInt64] = []
        samples.reserveCapacity(iterations)
        let warmUp = max(1, iterations / 10)  // not counted
        var commands = 0
        for index in 0..<(iterations + warmUp) {
            let before = TPMKeyProvider.commandCount
            let start = monotonicNanos()
            _ = try DPoPProof.make(
                key: key, method: "GET", url: url, nonce: "server-nonce", accessToken: accessToken,
                issuedAt: Int64(Date().timeIntervalSince1970))
            samples.append(monotonicNanos() - start)
            if index >= warmUp { commands += TPMKeyProvider.commandCount - before }
        }
        let counted = Array(samples.dropFirst(warmUp)).sorted()
        func at(_ q: Double) -> Double { Double(counted[min(counted.count - 1, Int(Double(counted.count) * q))]) / 1e3 }
        print(
            "METRIC bench_dpop_proof_tpm p50_us=\(String(format: "%.0f", at(0.5))) p95_us=\(String(format: "%.0f", at(0.95))) "
                + "tpm_commands_per_proof=\(commands / iterations) iterations=\(iterations) tcti=\(tcti)")
    }
}
