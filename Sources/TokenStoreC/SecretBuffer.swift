import Glibc
import TokenStore

/// The buffers secrets leave the library in: guarded memory (``GuardedMemory``: `sodium_malloc`
/// memory, locked with `mlock` and excluded from core dumps), with a header in front of the
/// bytes holding a magic value and the length. Every live buffer is also in a table, so
/// `ts_bytes_free` recognises a pointer that is not one of ours (or one already freed) without
/// reading memory in front of it, and a length that is not the buffer's.
enum SecretBuffer {
    /// Header bytes before the secret: the magic value and the length.
    private static let headerBytes = 16
    /// "tsbytes1", mixed with the buffer's own address, so a copied header does not pass.
    private static let magic: UInt64 = 0x7473_6279_7465_7331

    /// The live buffers: the bytes' address → their length.
    private static let live = Locked<[UInt: Int]>([:])

    /// A copy of `secret` for the caller, released by ``free(_:length:)``.
    static func copy(_ secret: SecretBytes) -> (bytes: UnsafeMutablePointer<UInt8>, count: Int) {
        let count = secret.count
        let raw = GuardedMemory.allocate(headerBytes + max(count, 1))
        let bytes = (raw + headerBytes).bindMemory(to: UInt8.self, capacity: max(count, 1))
        let address = UInt(bitPattern: bytes)
        raw.storeBytes(of: magic ^ UInt64(address), as: UInt64.self)
        raw.storeBytes(of: UInt64(count), toByteOffset: 8, as: UInt64.self)
        secret.withUnsafeBytes { source in
            if let base = source.baseAddress, count > 0 { memcpy(bytes, base, count) }
        }
        live.withLock { $0[address] = count }
        return (bytes, count)
    }

    /// Wipes and frees a buffer made by ``copy(_:)``. A pointer that is not a live buffer of
    /// this library, a damaged header or a `length` that is not the buffer's is a bug in the
    /// caller that may already have corrupted memory: the process aborts with a message on
    /// stderr (naming no secret), as `free` does for a pointer it did not hand out.
    static func free(_ bytes: UnsafeMutablePointer<UInt8>, length: Int) {
        let address = UInt(bitPattern: bytes)
        // Looked up and removed at once: of two threads freeing one buffer, one aborts.
        guard let count = live.withLock({ $0.removeValue(forKey: address) }) else {
            abandon("the pointer is not a buffer of this library, or it was freed already")
        }
        let raw = UnsafeMutableRawPointer(bytes) - headerBytes
        guard raw.loadUnaligned(as: UInt64.self) == magic ^ UInt64(address),
            raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self) == UInt64(count)
        else { abandon("the buffer's header was overwritten (a write in front of the buffer)") }
        guard length == count else {
            abandon("the length is \(UInt(bitPattern: length)), but the buffer was returned with \(count)")
        }
        GuardedMemory.release(raw, count: headerBytes + max(count, 1))  // wipes
    }

    /// Hands `secret` out through `bytes`/`length`.
    static func hand(
        _ secret: SecretBytes, to bytes: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>,
        length: UnsafeMutablePointer<Int>
    ) {
        let copy = copy(secret)
        bytes.pointee = copy.bytes
        length.pointee = copy.count
    }

    private static func abandon(_ reason: String) -> Never {
        let line = Array("libtokenstore: ts_bytes_free: \(reason); aborting\n".utf8)
        _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        abort()
    }
}
