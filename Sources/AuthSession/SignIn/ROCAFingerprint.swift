/// The fingerprint of RSA moduli made by Infineon's RSALib (ROCA, CVE-2017-15361; Nemec et al.,
/// CCS 2017): their primes are `k·M + (65537^a mod M)`, so the modulus, taken modulo each small
/// prime `p` of `M`, lies in the subgroup 65537 generates modulo `p`. The factors of such a key
/// can be found (a 2048-bit one in CPU-months): a tenant key with the fingerprint is refused.
///
/// The test of the authors' detector (crocs-muni/roca): the modulus is in that subgroup for
/// every prime from 3 to 167; a random modulus passes by chance with a probability far below
/// 2^-100.
enum ROCAFingerprint {
    /// The primes the detector tests.
    static let primes = [
        3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 101, 103, 107,
        109, 113, 127, 131, 137, 139, 149, 151, 157, 163, 167,
    ]

    /// For each of ``primes``, which residues 65537's powers take modulo it.
    static let subgroups: [[Bool]] = primes.map { prime in
        var members = [Bool](repeating: false, count: prime)
        var power = 1
        while !members[power] {
            members[power] = true
            power = power * (65537 % prime) % prime
        }
        return members
    }

    /// True when `modulus` (big-endian) has the fingerprint.
    static func matches(modulus: [UInt8]) -> Bool {
        for (prime, members) in zip(primes, subgroups) {
            let residue = modulus.reduce(0) { ($0 * 256 + Int($1)) % prime }
            if !members[residue] { return false }
        }
        return true
    }
}
