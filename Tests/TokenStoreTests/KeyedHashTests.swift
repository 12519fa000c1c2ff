import Testing
import TestSupport
import TestTraits
@testable import TokenStore

/// The keyed hashes that stand for identifiers in the file: fed field by field (no message
/// array), they must stay byte for byte what every existing store was written with.
@Suite("Keyed BLAKE2b over length-prefixed fields", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct KeyedHashTests {
    static let key: [UInt8] = Array(0..<32)

    /// Python's hashlib.blake2b(bytes([7]) + Σ(len32le ‖ field), key=bytes(range(32)), digest_size=32).
    @Test("a known answer computed independently (hashlib): domain byte, then UInt32-LE length and bytes per field")
    func knownAnswer() {
        let digest = Self.key.withUnsafeBytes { key in
            Blake2b.fields(key: key, domain: 7) {
                $0.field("auth0")
                $0.field([UInt8]("alice@example.org".utf8))
                $0.field(byte: 3)
                $0.field("")
                $0.field("zoë ✓")
            }
        }
        #expect(Hex.encode(digest) == "9bf78620b0514b2bb5e1aabdd887da7d6284d308647e4ba3a00cdffc6d7594da")
    }

    @Test("streamed equals the digest of the joined message, for random fields (empty ones included)")
    func streamedEqualsJoined() {
        var generator = SeededGenerator(seed: 35)
        for _ in 0..<200 {
            let fields = (0..<Int.random(in: 0...5, using: &generator)).map { _ in
                (0..<Int.random(in: 0...70, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            }
            let domain = UInt8.random(in: 0...255, using: &generator)
            var message: [UInt8] = [domain]
            for field in fields {
                withUnsafeBytes(of: UInt32(field.count).littleEndian) { message.append(contentsOf: $0) }
                message.append(contentsOf: field)
            }
            Self.key.withUnsafeBytes { key in
                let streamed = Blake2b.fields(key: key, domain: domain) { for field in fields { $0.field(field) } }
                #expect(streamed == Blake2b.digest(message, key: key))
            }
        }
    }
}
