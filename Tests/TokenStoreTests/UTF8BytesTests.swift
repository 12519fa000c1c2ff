import Testing
import TestSupport
import TestTraits
@testable import TokenStore

/// `UTF8Bytes`: a row's names against the names a read asked for, byte for byte.
@Suite("UTF8Bytes: names compared byte for byte", .offPool, .timeLimit(.minutes(TestTimeLimit.minutes)))
struct UTF8BytesTests {
    /// Small (inline) and large (heap) strings, ASCII and not, a string made from a slice, NFC/NFD.
    static let names = [
        "", "a", "alice", "ünïcødé 🙂", "a\u{0}b", "é", "e\u{301}", String(repeating: "x", count: 15),
        String(repeating: "x", count: 16), String(repeating: "é", count: 2_048), String("the middle of it".dropFirst(4).dropLast(3)),
    ]

    @Test("equal exactly when the UTF-8 is the same: across small and large strings, canonically equivalent spellings differ")
    func equalExactlyForTheSameBytes() {
        for a in Self.names {
            for b in Self.names {
                let same = Array(a.utf8) == Array(b.utf8)
                #expect(UTF8Bytes.equal(Array(a.utf8), b) == same, "bytes of \(a.utf8.count) against a string of \(b.utf8.count)")
                #expect(UTF8Bytes.equal(a, b) == same, "strings of \(a.utf8.count) and \(b.utf8.count) bytes")
            }
        }
        // One byte more, one byte less, one byte changed.
        let name = String(repeating: "é", count: 40)
        var bytes = Array(name.utf8)
        #expect(UTF8Bytes.equal(bytes, name))
        #expect(!UTF8Bytes.equal(bytes + [0], name))
        #expect(!UTF8Bytes.equal(Array(bytes.dropLast()), name))
        bytes[bytes.count / 2] ^= 1
        #expect(!UTF8Bytes.equal(bytes, name))
        #expect(!UTF8Bytes.equal("é", "e\u{301}") && "é" == "e\u{301}", "String's == equates them; the bytes do not")
    }
}
