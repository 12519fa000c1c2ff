internal import CSodium
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// `malloc`'d bytes that may hold a secret (a request form with a token, a token answer):
/// wiped before they are freed or outgrown, and handed out as a `Data` that wipes them when
/// its last reference goes.
///
/// A `Data` made here wipes only its own storage: a copy someone makes of it (a mutation, a
/// `String`, a JSON parse) is theirs.
struct WipedMemory: ~Copyable {
    private(set) var pointer: UnsafeMutableRawPointer?
    private(set) var capacity = 0
    private(set) var count = 0

    /// No bytes yet.
    init() {}

    /// Room for `capacity` bytes, allocated at once.
    init(capacity: Int) {
        if capacity > 0 {
            pointer = malloc(capacity)
            self.capacity = pointer == nil ? 0 : capacity
        }
    }

    deinit {
        if let pointer { Self.wipeAndFree(pointer, capacity: capacity) }
    }

    /// Appends `bytes`, growing by doubling up to `limit`; the outgrown allocation is wiped
    /// before it is freed. Returns `false` (nothing appended) when the bytes do not fit in
    /// `limit` or memory runs out.
    mutating func append(_ bytes: UnsafeRawBufferPointer, limit: Int) -> Bool {
        guard bytes.count <= limit - count else { return false }
        if bytes.isEmpty { return true }
        if count + bytes.count > capacity {
            var newCapacity = Swift.max(capacity, 4096)
            while newCapacity < count + bytes.count { newCapacity *= 2 }
            newCapacity = Swift.min(newCapacity, limit)
            guard let grown = malloc(newCapacity) else { return false }
            if let pointer {
                grown.copyMemory(from: pointer, byteCount: count)
                Self.wipeAndFree(pointer, capacity: capacity)
            }
            pointer = grown
            capacity = newCapacity
        }
        guard let pointer, let base = bytes.baseAddress else { return false }
        (pointer + count).copyMemory(from: base, byteCount: bytes.count)
        count += bytes.count
        return true
    }

    /// Hands the bytes to a `Data` that wipes and frees them when released; this memory is
    /// empty afterwards.
    mutating func takeData() -> Data {
        guard let pointer else { return Data() }
        let capacity = self.capacity
        let count = self.count
        self.pointer = nil
        self.capacity = 0
        self.count = 0
        guard count > 0 else {
            Self.wipeAndFree(pointer, capacity: capacity)
            return Data()
        }
        return Data(
            bytesNoCopy: pointer, count: count,
            deallocator: .custom { bytes, _ in WipedMemory.wipeAndFree(bytes, capacity: capacity) })
    }

    /// Overwrites `capacity` bytes with zeros (not optimised away) and frees them.
    static func wipeAndFree(_ pointer: UnsafeMutableRawPointer, capacity: Int) {
        sodium_memzero(pointer, capacity)
        free(pointer)
    }
}
