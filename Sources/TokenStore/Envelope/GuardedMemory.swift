internal import CSodium
import FoundationEssentials

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
package enum GuardedMemory {
    /// Slot sizes, one free list each.
    static let slotSizes = [64, 128, 256, 512, 1_024, 2_048, 4_096]
    static var largestPooledSize: Int { slotSizes[slotSizes.count - 1] }
    static let slabBytes = 64 * 1_024
    private static let pool = SlotPool()

    /// `count` (> 0) bytes of guarded memory; their content is unspecified.
    package static func allocate(_ count: Int) -> UnsafeMutableRawPointer {
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
    package static func release(_ pointer: UnsafeMutableRawPointer, count: Int) {
        if let sizeClass = slotSizes.firstIndex(where: { $0 >= count }) {
            sodium_memzero(pointer, count)
            pool.give(pointer, sizeClass)
        } else {
            sodium_free(pointer)  // wipes too
        }
    }

    /// The free lists behind ``Locked`` (a pthread mutex ThreadSanitizer understands: behind
    /// `Synchronization.Mutex`, every slot handed between threads read as a data race).
    private final class SlotPool: Sendable {
        // Free slots by size class, as addresses (the slab memory they point into is never freed).
        private let free = Locked<[[UInt]]>(Array(repeating: [], count: GuardedMemory.slotSizes.count))

        func take(_ sizeClass: Int) -> UnsafeMutableRawPointer {
            let address = free.withLock { free in
                if free[sizeClass].isEmpty {
                    guard let slab = sodium_malloc(GuardedMemory.slabBytes) else {
                        fatalError("sodium_malloc failed: out of guarded memory")
                    }
                    let size = GuardedMemory.slotSizes[sizeClass]
                    for offset in stride(from: 0, through: GuardedMemory.slabBytes - size, by: size) {
                        free[sizeClass].append(UInt(bitPattern: slab + offset))
                    }
                }
                return free[sizeClass].removeLast()
            }
            return UnsafeMutableRawPointer(bitPattern: address)!  // never 0: an address inside a slab
        }

        func give(_ pointer: UnsafeMutableRawPointer, _ sizeClass: Int) {
            free.withLock { $0[sizeClass].append(UInt(bitPattern: pointer)) }
        }
    }
}
