internal import CSodium
import Foundation

/// Secret bytes (a token, a key, a user id) held in guarded memory that is wiped when the
/// value goes away.
///
/// The bytes live in guarded memory (``GuardedMemory``: `sodium_malloc` memory, locked, out
/// of core dumps, wiped on free).
/// `description` and `debugDescription` show only the length and a short fingerprint, so a
/// stray `print` or log line never reveals the secret. Equality is constant-time.
///
/// Converting to a `String` is explicit (``stringValue()``): do it only at the edge where
/// the secret is handed to something that needs it, such as an HTTP request body.
public final class SecretBytes: Sendable, Equatable, CustomStringConvertible,
    CustomDebugStringConvertible
{
    // `nonisolated(unsafe)`: written once in init, read-only afterwards, freed in deinit.
    private nonisolated(unsafe) let pointer: UnsafeMutableRawPointer?
    /// The number of bytes.
    public let count: Int

    /// Copies `bytes` into guarded memory.
    public init<Bytes: Collection>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        Sodium.ensureInitialized()
        count = bytes.count
        guard count > 0 else {
            pointer = nil
            return
        }
        let memory = GuardedMemory.allocate(count)
        let buffer = UnsafeMutableRawBufferPointer(start: memory, count: count)
        buffer.copyBytes(from: bytes)
        pointer = memory
    }

    /// Copies the UTF-8 bytes of `string` into guarded memory.
    public convenience init(utf8 string: String) {
        self.init(Array(string.utf8))
    }

    /// Allocates `count` bytes and lets `fill` write them (used for keys made by libsodium).
    init(count: Int, fill: (UnsafeMutableRawBufferPointer) -> Void) {
        Sodium.ensureInitialized()
        self.count = count
        guard count > 0 else {
            fill(UnsafeMutableRawBufferPointer(start: nil, count: 0))
            pointer = nil
            return
        }
        let memory = GuardedMemory.allocate(count)
        fill(UnsafeMutableRawBufferPointer(start: memory, count: count))
        pointer = memory
    }

    /// Random bytes from libsodium's CSPRNG.
    static func random(count: Int) -> SecretBytes {
        SecretBytes(count: count) { buffer in
            if let base = buffer.baseAddress { randombytes_buf(base, buffer.count) }
        }
    }

    deinit {
        if let pointer { GuardedMemory.release(pointer, count: count) }
    }

    /// Lends the bytes for the duration of `body`. Do not let them escape.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// The secret as UTF-8 text, or `nil` if it is not valid UTF-8.
    ///
    /// - Warning: the returned `String` is ordinary memory that is not wiped. Call this
    ///   only at the edge where the secret must be handed on.
    public func stringValue() -> String? {
        withUnsafeBytes { String(validating: $0.bindMemory(to: UInt8.self), as: UTF8.self) }
    }

    /// A copy of the bytes as an array. Same warning as ``stringValue()``.
    public func copyBytes() -> [UInt8] {
        withUnsafeBytes { Array($0) }
    }

    /// A short, non-reversible fingerprint (BLAKE2b, 4 bytes, hex) to tell secrets apart in
    /// logs and listings without showing them.
    public var fingerprint: String {
        var digest = [UInt8](repeating: 0, count: 4)
        let personal = Array("tokenstore/fp/v1".utf8)
        withUnsafeBytes { bytes in
            _ = crypto_generichash(
                &digest, digest.count, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                UInt64(bytes.count), personal, personal.count)
        }
        return digest.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
    }

    public var description: String { "SecretBytes(\(count) bytes, fp \(fingerprint))" }
    public var debugDescription: String { description }

    /// Constant-time comparison.
    public static func == (lhs: SecretBytes, rhs: SecretBytes) -> Bool {
        guard lhs.count == rhs.count else { return false }
        if lhs.count == 0 { return true }
        return lhs.withUnsafeBytes { a in
            rhs.withUnsafeBytes { b in sodium_memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0 }
        }
    }
}

extension String {
    func leftPadded(to width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}

/// libsodium initialisation, once per process.
enum Sodium {
    private static let initialized: Bool = sodium_init() >= 0
    static func ensureInitialized() {
        precondition(initialized, "libsodium failed to initialise")
    }
}

/// Where ``SecretBytes`` keep their bytes: memory from `sodium_malloc` (locked with `mlock`,
/// excluded from core dumps, guard pages around it), wiped with `sodium_memzero` when a
/// secret goes away.
///
/// One `sodium_malloc`/`sodium_free` pair costs about a dozen system calls (mmap, mprotect,
/// mlock, madvise, munlock, munmap) — 10–30 µs here, and a read makes two secrets. So
/// secrets of up to ``largestPooledSize`` bytes take a slot of a 64 KiB `sodium_malloc` slab
/// instead: same locking and dump exclusion, wiped on release, but the guard pages are around
/// the slab, not each secret. Larger secrets get a `sodium_malloc` region of their own.
/// Slabs are kept for reuse (bounded by the peak number of live small secrets).
enum GuardedMemory {
    /// Slot sizes, one free list each.
    static let slotSizes = [64, 128, 256, 512, 1_024, 2_048, 4_096]
    static var largestPooledSize: Int { slotSizes[slotSizes.count - 1] }
    static let slabBytes = 64 * 1_024
    private static let pool = SlotPool()

    /// `count` (> 0) bytes of guarded memory; their content is unspecified.
    static func allocate(_ count: Int) -> UnsafeMutableRawPointer {
        Sodium.ensureInitialized()
        if let sizeClass = slotSizes.firstIndex(where: { $0 >= count }) {
            return pool.take(sizeClass)
        }
        guard let memory = sodium_malloc(count) else {
            fatalError("sodium_malloc failed: out of guarded memory")
        }
        return memory
    }

    /// Wipes and gives back memory from ``allocate(_:)`` with the same `count`.
    static func release(_ pointer: UnsafeMutableRawPointer, count: Int) {
        if let sizeClass = slotSizes.firstIndex(where: { $0 >= count }) {
            sodium_memzero(pointer, count)
            pool.give(pointer, sizeClass)
        } else {
            sodium_free(pointer)  // wipes too
        }
    }

    // @unchecked Sendable: `free` is only touched with `lock` held; the slab memory it points
    // into is never freed.
    private final class SlotPool: @unchecked Sendable {
        private let lock = NSLock()
        private var free: [[UnsafeMutableRawPointer]] = Array(repeating: [], count: GuardedMemory.slotSizes.count)

        func take(_ sizeClass: Int) -> UnsafeMutableRawPointer {
            lock.lock()
            defer { lock.unlock() }
            if free[sizeClass].isEmpty {
                guard let slab = sodium_malloc(GuardedMemory.slabBytes) else {
                    fatalError("sodium_malloc failed: out of guarded memory")
                }
                let size = GuardedMemory.slotSizes[sizeClass]
                for offset in stride(from: 0, through: GuardedMemory.slabBytes - size, by: size) {
                    free[sizeClass].append(slab + offset)
                }
            }
            return free[sizeClass].removeLast()
        }

        func give(_ pointer: UnsafeMutableRawPointer, _ sizeClass: Int) {
            lock.lock()
            defer { lock.unlock() }
            free[sizeClass].append(pointer)
        }
    }
}
