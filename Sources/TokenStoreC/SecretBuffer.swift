import Glibc
import TokenStore

/// The buffers secrets leave the library in: `malloc`'d, with the length kept in a header in
/// front of the bytes, so `ts_bytes_free` wipes the whole buffer whatever length it is given.
enum SecretBuffer {
    /// Header bytes before the secret (keeps malloc's 16-byte alignment for the bytes).
    private static let headerBytes = 16

    /// A copy of `secret` for the caller, released by ``free(_:)``.
    static func copy(_ secret: SecretBytes) throws -> (bytes: UnsafeMutablePointer<UInt8>, count: Int) {
        let count = secret.count
        guard let raw = malloc(headerBytes + max(count, 1)) else {
            throw TokenStoreError(.ioError, "Out of memory for the secret's buffer.")
        }
        raw.storeBytes(of: count, as: Int.self)
        let bytes = (raw + headerBytes).bindMemory(to: UInt8.self, capacity: max(count, 1))
        secret.withUnsafeBytes { source in
            if let base = source.baseAddress, count > 0 { memcpy(bytes, base, count) }
        }
        return (bytes, count)
    }

    /// Wipes and frees a buffer made by ``copy(_:)``.
    static func free(_ bytes: UnsafeMutablePointer<UInt8>) {
        let raw = UnsafeMutableRawPointer(bytes) - headerBytes
        let count = raw.load(as: Int.self)
        explicit_bzero(raw, headerBytes + max(count, 1))
        Glibc.free(raw)
    }

    /// Hands `secret` out through `bytes`/`length`.
    static func hand(
        _ secret: SecretBytes, to bytes: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>,
        length: UnsafeMutablePointer<Int>
    ) throws {
        let copy = try copy(secret)
        bytes.pointee = copy.bytes
        length.pointee = copy.count
    }
}
