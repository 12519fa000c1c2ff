import TokenStore

/// The live handles of one kind. A `ts_store *` or `ts_session *` is not a pointer but an id
/// into a locked table: a call looks its handle up and holds a strong reference to the object
/// for its whole length; close removes the id. So a handle closed by another thread, closed
/// twice, or never issued is refused with `storeClosed` and never followed into freed memory,
/// and a call already running when its handle is closed finishes normally (the object, and
/// with it the store, goes when that call ends). Ids are never reused.
final class HandleTable<Object: AnyObject & Sendable>: Sendable {
    private struct State {
        var next: UInt = 1
        var objects: [UInt: Object] = [:]
    }

    /// Kept in an id's low bits: a store handle given where a session is expected (or the
    /// reverse) is `invalidInput`, not a lookup that happens to fail.
    private let tag: UInt
    private let what: String
    private let state = Locked(State())
    static var tagBits: UInt { 4 }

    init(tag: UInt, what: String) {
        precondition(tag > 0 && tag < 1 << Self.tagBits)
        self.tag = tag
        self.what = what
    }

    /// Issues a new handle for `object`.
    func insert(_ object: Object) -> OpaquePointer {
        let id = state.withLock { state in
            let id = state.next << Self.tagBits | tag
            state.next += 1
            state.objects[id] = object
            return id
        }
        // Never 0: the tag is not.
        return OpaquePointer(bitPattern: id)!
    }

    /// Runs `body` with the object behind `handle`, kept alive until `body` returns.
    /// - Throws: `invalidInput` for NULL or a handle of another kind; `storeClosed` for a
    ///   handle that is closed (or was never issued).
    func with<R>(_ handle: OpaquePointer?, _ body: (Object) throws -> R) throws -> R {
        let object = try lookUp(handle)
        return try withExtendedLifetime(object) { try body(object) }
    }

    /// The object behind `handle` (a strong reference).
    func lookUp(_ handle: OpaquePointer?) throws -> Object {
        guard let handle else { throw CInput.invalid("The \(what) handle is NULL.") }
        let id = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(handle)))
        guard id & (1 << Self.tagBits - 1) == tag else { throw CInput.invalid("The handle is not a \(what) handle.") }
        guard let object = state.withLock({ $0.objects[id] }) else {
            throw TokenStoreError(.storeClosed, "The \(what) handle is closed.")
        }
        return object
    }

    /// Removes `handle` (NULL, closed or foreign handles are ignored). The object goes when
    /// the last call using it and the last other reference to it end.
    func remove(_ handle: OpaquePointer?) {
        guard let handle else { return }
        let id = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(handle)))
        // Released outside the lock: the object's deinit (closing a store) may take time.
        let removed = state.withLock { $0.objects.removeValue(forKey: id) }
        withExtendedLifetime(removed) {}
    }
}
