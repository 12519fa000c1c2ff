import AuthSession
import CTokenStore
import TokenStore

// Cancel handles (include/tokenstore.h): ts_cancel_new, ts_cancel_trigger, ts_cancel_free; the
// `_cancellable` forms of the long calls take one.

/// The cancel handles (`ts_cancel *`).
let cancelHandles = HandleTable<CancelHandle>(tag: 3, what: "cancel")

/// `ts_cancel *`: cancels the calls running with it, and refuses the later ones.
final class CancelHandle: Sendable {
    private struct State {
        var triggered = false
        var next: UInt64 = 0
        var running: [UInt64: @Sendable () -> Void] = [:]
    }

    private let state = Locked(State())

    var isTriggered: Bool { state.withLock { $0.triggered } }

    /// Cancels every registered call now (their cancel actions run on this thread, outside the
    /// lock) and every later one at its registration.
    func trigger() {
        let actions = state.withLock { state in
            state.triggered = true
            defer { state.running.removeAll() }
            return Array(state.running.values)
        }
        for action in actions { action() }
    }

    /// Registers what cancels one running call; when the handle is triggered already, runs it
    /// at once and returns nil. Otherwise the id for ``unregister(_:)``.
    func register(_ cancel: @escaping @Sendable () -> Void) -> UInt64? {
        let id: UInt64? = state.withLock { state in
            guard !state.triggered else { return nil }
            state.next += 1
            state.running[state.next] = cancel
            return state.next
        }
        if id == nil { cancel() }
        return id
    }

    func unregister(_ id: UInt64) {
        _ = state.withLock { $0.running.removeValue(forKey: id) }
    }

    /// Runs `body` with `onCancel` registered on `handle` (nil: no handle, `body` alone): a
    /// trigger while `body` runs calls `onCancel` (at once if it came before the registration).
    static func whileRunning<T>(
        _ handle: CancelHandle?, onCancel: @escaping @Sendable () -> Void, _ body: () throws -> T
    ) rethrows -> T {
        let registration = handle?.register(onCancel)
        defer { if let registration { handle?.unregister(registration) } }
        return try body()
    }

    /// The handle behind `pointer` (nil for NULL), refusing one that was triggered already:
    /// the call then changes nothing.
    /// - Throws: `cancelled`; `invalidInput` (another kind of handle); `storeClosed` (freed).
    static func lookUp(_ pointer: OpaquePointer?) throws -> CancelHandle? {
        guard let pointer else { return nil }
        let handle = try cancelHandles.lookUp(pointer)
        if handle.isTriggered { throw AuthSessionError(.cancelled, "The call was cancelled before it started; nothing was changed.") }
        return handle
    }
}

@c @implementation
public func ts_cancel_new(_ out: UnsafeMutablePointer<OpaquePointer?>!, _ err: UnsafeMutablePointer<OpaquePointer?>!) -> CInt {
    CCall.run(err) {
        let out = try CInput.out(out, "cancel handle")
        out.pointee = cancelHandles.insert(CancelHandle())
        return CCall.ok
    }
}

@c @implementation
public func ts_cancel_trigger(_ cancel: OpaquePointer!) {
    // NULL, freed and foreign handles are ignored (the header says so): nothing to cancel.
    guard let cancel, let handle = try? cancelHandles.lookUp(cancel) else { return }
    handle.trigger()
}

@c @implementation
public func ts_cancel_free(_ cancel: OpaquePointer!) {
    cancelHandles.remove(cancel)
}

@c @implementation
public func ts_session_access_token_cancellable(
    _ session: OpaquePointer!, _ account: UnsafePointer<CChar>!, _ audienceOrNull: UnsafePointer<CChar>!,
    _ scopesSpaceSeparated: UnsafePointer<CChar>!, _ minTTLSeconds: CInt, _ cancelOrNull: OpaquePointer!,
    _ token: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>!, _ length: UnsafeMutablePointer<Int>!,
    _ expiresAt: UnsafeMutablePointer<Int64>!, _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    sessionAccessToken(session, account, audienceOrNull, scopesSpaceSeparated, minTTLSeconds, cancelOrNull, token, length, expiresAt, err)
}

@c @implementation
public func ts_session_logout_cancellable(
    _ session: OpaquePointer!, _ account: UnsafePointer<CChar>!, _ cancelOrNull: OpaquePointer!,
    _ out: UnsafeMutablePointer<ts_logout_outcome>!, _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    sessionLogout(session, account, cancelOrNull, out, err)
}

@c @implementation
public func ts_session_resume_cancellable(
    _ session: OpaquePointer!, _ cancelOrNull: OpaquePointer!, _ stillPending: UnsafeMutablePointer<CInt>!,
    _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    sessionResume(session, cancelOrNull, stillPending, err)
}

@c @implementation
public func ts_session_sign_in_browser_cancellable(
    _ session: OpaquePointer!, _ account: UnsafePointer<CChar>!, _ optionsOrNull: UnsafePointer<ts_sign_in_options>!,
    _ cancelOrNull: OpaquePointer!, _ userIDOrNull: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>!,
    _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    sessionSignInBrowser(session, account, optionsOrNull, cancelOrNull, userIDOrNull, err)
}
