#if canImport(Glibc)
import Glibc
#endif

/// Byte-for-byte comparison of names with their UTF-8 (not `==` on `String`, which also equates
/// canonically equivalent spellings, whose UTF-8, and so whose keyed hash, differs). A `memcmp`
/// of the contiguous bytes a native string keeps, not a walk over `String.UTF8View`'s iterator
/// (a `get` compares two names this way: the walk was about 1,200 instructions of it).
enum UTF8Bytes {
    /// Whether `bytes` are exactly `string`'s UTF-8.
    static func equal(_ bytes: [UInt8], _ string: String) -> Bool {
        bytes.withUnsafeBytes { equal($0, string) }
    }

    /// Whether `bytes` (lent: a field of a decrypted record) are exactly `string`'s UTF-8.
    static func equal(_ bytes: UnsafeRawBufferPointer, _ string: String) -> Bool {
        let compared = string.utf8.withContiguousStorageIfAvailable { utf8 in
            bytes.count == utf8.count && (bytes.isEmpty || memcmp(bytes.baseAddress!, utf8.baseAddress!, bytes.count) == 0)
        }
        return compared ?? bytes.elementsEqual(string.utf8)
    }

    /// Whether `a` and `b` have the same UTF-8.
    static func equal(_ a: String, _ b: String) -> Bool {
        let compared = a.utf8.withContiguousStorageIfAvailable { a in
            b.utf8.withContiguousStorageIfAvailable { b in
                a.count == b.count && (a.isEmpty || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0)
            }
        }
        if let compared, let same = compared { return same }
        return a.utf8.elementsEqual(b.utf8)
    }
}
