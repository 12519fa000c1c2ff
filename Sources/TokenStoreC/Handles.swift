import AuthSession
import CTokenStore
import Glibc
import TokenStore

// The objects behind the opaque C handles. A store or session handle is an id in a
// ``HandleTable`` (never a pointer the caller could keep after it was freed); the matching
// close/free call removes it. Every buffer handed out is allocated here and released by a
// ts_* call.

/// The open stores (`ts_store *`).
let storeHandles = HandleTable<StoreHandle>(tag: 1, what: "store")
/// The sessions (`ts_session *`).
let sessionHandles = HandleTable<SessionHandle>(tag: 2, what: "session")

/// `ts_store *`: one open store.
final class StoreHandle: Sendable {
    let store: TokenStore
    init(_ store: TokenStore) { self.store = store }
    // The store closes when the last reference goes: the table's, a call's in flight, and
    // every session made from it.
    deinit { store.close() }
}

/// `ts_session *`: a session, holding its own reference to the store's handle.
final class SessionHandle: Sendable {
    let session: TokenSession
    let storeHandle: StoreHandle
    init(_ session: TokenSession, storeHandle: StoreHandle) {
        self.session = session
        self.storeHandle = storeHandle
    }
}

/// `ts_error *`: a code and a message as NUL-terminated strings owned by the error.
final class ErrorBox {
    let code: UnsafeMutablePointer<CChar>
    let message: UnsafeMutablePointer<CChar>

    init(code: String, message: String) {
        self.code = CStrings.copy(code)
        self.message = CStrings.copy(message)
    }

    deinit {
        code.deallocate()
        message.deallocate()
    }

    static func borrow(_ pointer: OpaquePointer) -> ErrorBox {
        Unmanaged<ErrorBox>.fromOpaque(UnsafeRawPointer(pointer)).takeUnretainedValue()
    }
}

enum CStrings {
    /// A NUL-terminated copy of `string`, to be released with `deallocate()`.
    static func copy(_ string: String) -> UnsafeMutablePointer<CChar> {
        let utf8 = Array(string.utf8)
        let pointer = UnsafeMutablePointer<CChar>.allocate(capacity: utf8.count + 1)
        for (index, byte) in utf8.enumerated() { pointer[index] = CChar(bitPattern: byte) }
        pointer[utf8.count] = 0
        return pointer
    }

    /// A `malloc`'d NUL-terminated copy of `string` for the caller, released by
    /// `ts_string_free` (which is `free`, so GLib's `g_free` releases it too: Vala's owned
    /// strings are freed that way).
    static func mallocCopy(_ string: String) throws -> UnsafeMutablePointer<CChar> {
        guard let copy = string.withCString({ strdup($0) }) else {
            throw TokenStoreError(.ioError, "Out of memory for a string.")
        }
        return copy
    }

    /// The library version as a C string that lives as long as the process (written once, by
    /// the thread-safe lazy initialization of a static, and never written again).
    nonisolated(unsafe) static let version: UnsafePointer<CChar> = UnsafePointer(copy(TokenStoreVersion.string))
}
