import CTokenStore
import FoundationEssentials
import Glibc
import TokenStore

// A store's key slots (include/tokenstore.h): ts_store_key_slots, ts_key_slots_free.

@c @implementation
public func ts_store_key_slots(
    _ store: OpaquePointer!, _ slots: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<ts_key_slot>?>?>!,
    _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    CCall.run(err) {
        let out = try CInput.out(slots, "slots")
        out.pointee = nil
        let handle = try storeHandles.lookUp(store)
        defer { withExtendedLifetime(handle) {} }  // alive until the call ends, however it is closed meanwhile
        out.pointee = try CKeySlots.array(try handle.store.keySlots)
        return CCall.ok
    }
}

@c @implementation
public func ts_key_slots_free(_ slots: UnsafeMutablePointer<UnsafeMutablePointer<ts_key_slot>?>!) {
    CKeySlots.free(slots)
}

/// The C form of ``KeySlot``s: a `calloc`'d NULL-terminated array of `calloc`'d `ts_key_slot`s,
/// each `kind` `strdup`'d; ``free(_:)`` releases all of it.
enum CKeySlots {
    static func array(_ slots: [KeySlot]) throws -> UnsafeMutablePointer<UnsafeMutablePointer<ts_key_slot>?> {
        guard let raw = calloc(slots.count + 1, MemoryLayout<UnsafeMutablePointer<ts_key_slot>?>.stride) else {
            throw TokenStoreError(.ioError, "Out of memory for the key slots.")
        }
        let array = raw.bindMemory(to: UnsafeMutablePointer<ts_key_slot>?.self, capacity: slots.count + 1)
        for (index, slot) in slots.enumerated() {
            let entry = calloc(1, MemoryLayout<ts_key_slot>.size)?.bindMemory(to: ts_key_slot.self, capacity: 1)
            let kind = strdup(slot.kind.rawValue)
            guard let entry, let kind else {
                Glibc.free(entry)
                Glibc.free(kind)
                Self.free(array)  // the entries made so far, and the array
                throw TokenStoreError(.ioError, "Out of memory for the key slots.")
            }
            entry.pointee.struct_size = MemoryLayout<ts_key_slot>.size
            entry.pointee.id = Int64(slot.id)
            entry.pointee.kind = UnsafePointer(kind)
            entry.pointee.created_at = Int64(slot.createdAt.timeIntervalSince1970.rounded(.down))
            array[index] = entry
        }
        return array
    }

    static func free(_ array: UnsafeMutablePointer<UnsafeMutablePointer<ts_key_slot>?>?) {
        guard let array else { return }
        var index = 0
        while let entry = array[index] {
            Glibc.free(UnsafeMutableRawPointer(mutating: entry.pointee.kind))
            Glibc.free(entry)
            index += 1
        }
        Glibc.free(array)
    }
}
