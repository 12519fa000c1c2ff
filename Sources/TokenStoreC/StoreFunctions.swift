import CTokenStore
import TokenStore

// ts_version, stores, items, credential state and errors (include/tokenstore.h).

@c @implementation
public func ts_version() -> UnsafePointer<CChar>! {
    CStrings.version
}

@c @implementation
public func ts_store_open(
    _ pathOrNull: UnsafePointer<CChar>!, _ appID: UnsafePointer<CChar>!, _ out: UnsafeMutablePointer<OpaquePointer?>!,
    _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    CCall.run(err) {
        try CStoreOpen.run(out, pathOrNull, appID) { path, appID in try TokenStore(path: path, appID: appID) }
    }
}

/// The steps every `ts_store_open*` call shares: `out` checked and cleared, the path (NULL: the
/// app's default) and the app id read, then `open`'s store filed as a handle in `out`.
enum CStoreOpen {
    static func run(
        _ out: UnsafeMutablePointer<OpaquePointer?>!, _ pathOrNull: UnsafePointer<CChar>!, _ appID: UnsafePointer<CChar>!,
        _ open: (_ path: String, _ appID: String) throws -> TokenStore
    ) throws -> CInt {
        let out = try CInput.out(out, "store")
        out.pointee = nil
        let path = try CInput.optionalString(pathOrNull, "path")
        let appID = try CInput.string(appID, "app id")
        let store = try open(path ?? TokenStore.defaultPath(appID: appID), appID)
        out.pointee = storeHandles.insert(StoreHandle(store))
        return CCall.ok
    }
}

@c @implementation
public func ts_store_protection(
    _ store: OpaquePointer!, _ tier: UnsafeMutablePointer<ts_protection>!,
    _ reasonOrNull: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>!, _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    CCall.run(err) {
        let tierOut = try CInput.out(tier, "tier")
        reasonOrNull?.pointee = nil
        let handle = try storeHandles.lookUp(store)
        defer { withExtendedLifetime(handle) {} }  // alive until the call ends, however it is closed meanwhile
        let protection = try handle.store.protection()
        tierOut.pointee = try CProtection.value(of: protection.tier)
        if let reasonOrNull { reasonOrNull.pointee = try CStrings.mallocCopy(protection.reason) }
        return CCall.ok
    }
}

@c @implementation
public func ts_store_lock(_ store: OpaquePointer!, _ allProcesses: CInt, _ err: UnsafeMutablePointer<OpaquePointer?>!) -> CInt {
    CCall.run(err) {
        let handle = try storeHandles.lookUp(store)
        defer { withExtendedLifetime(handle) {} }
        try handle.store.lock(allProcesses: allProcesses != 0)
        return CCall.ok
    }
}

@c @implementation
public func ts_store_unlock(_ store: OpaquePointer!, _ allProcesses: CInt, _ err: UnsafeMutablePointer<OpaquePointer?>!) -> CInt {
    CCall.run(err) {
        let handle = try storeHandles.lookUp(store)
        defer { withExtendedLifetime(handle) {} }
        try handle.store.unlock(allProcesses: allProcesses != 0)
        return CCall.ok
    }
}

@c @implementation
public func ts_store_is_locked(
    _ store: OpaquePointer!, _ locked: UnsafeMutablePointer<CInt>!, _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    CCall.run(err) {
        let lockedOut = try CInput.out(locked, "locked")
        let handle = try storeHandles.lookUp(store)
        defer { withExtendedLifetime(handle) {} }
        lockedOut.pointee = handle.store.isLocked ? 1 : 0
        return CCall.ok
    }
}

@c @implementation
public func ts_store_close(_ store: OpaquePointer!) {
    storeHandles.remove(store)
}

@c @implementation
public func ts_item_set(
    _ store: OpaquePointer!, _ service: UnsafePointer<CChar>!, _ account: UnsafePointer<CChar>!, _ kind: ts_kind,
    _ bytes: UnsafePointer<UInt8>!, _ length: Int, _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    CCall.run(err) {
        let handle = try storeHandles.lookUp(store)
        defer { withExtendedLifetime(handle) {} }  // alive until the call ends, however it is closed meanwhile
        let key = try ItemKey(account: CInput.account(service: service, account: account), kind: CInput.kind(kind))
        try handle.store.set(CInput.secret(bytes, length), for: key)
        return CCall.ok
    }
}

@c @implementation
public func ts_item_get(
    _ store: OpaquePointer!, _ service: UnsafePointer<CChar>!, _ account: UnsafePointer<CChar>!, _ kind: ts_kind,
    _ bytes: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>!, _ length: UnsafeMutablePointer<Int>!,
    _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    itemGet(store, service, account, kind, nil, bytes, length, err)
}

@c @implementation
public func ts_item_get_cancellable(
    _ store: OpaquePointer!, _ service: UnsafePointer<CChar>!, _ account: UnsafePointer<CChar>!, _ kind: ts_kind,
    _ cancelOrNull: OpaquePointer!, _ bytes: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>!,
    _ length: UnsafeMutablePointer<Int>!, _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    itemGet(store, service, account, kind, cancelOrNull, bytes, length, err)
}

/// ts_item_get and its cancellable form. A cancel handle ends a user-presence check that waits
/// on polkit (``PresenceCancellation``: polkit is told, its dialog closes, nothing is read).
private func itemGet(
    _ store: OpaquePointer?, _ service: UnsafePointer<CChar>?, _ account: UnsafePointer<CChar>?, _ kind: ts_kind,
    _ cancelOrNull: OpaquePointer?, _ bytes: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?,
    _ length: UnsafeMutablePointer<Int>?, _ err: UnsafeMutablePointer<OpaquePointer?>?
) -> CInt {
    CCall.run(err) {
        let bytesOut = try CInput.out(bytes, "bytes")
        let lengthOut = try CInput.out(length, "length")
        bytesOut.pointee = nil
        lengthOut.pointee = 0
        let handle = try storeHandles.lookUp(store)
        defer { withExtendedLifetime(handle) {} }  // alive until the call ends, however it is closed meanwhile
        let key = try ItemKey(account: CInput.account(service: service, account: account), kind: CInput.kind(kind))
        let cancel = try CancelHandle.lookUp(cancelOrNull)  // triggered already: cancelled, nothing read
        let presence = PresenceCancellation()
        let secret = try CancelHandle.whileRunning(cancel, onCancel: { presence.cancel() }) {
            try presence.bind { try handle.store.secret(for: key) }
        }
        guard let secret else { return CCall.notFound }
        SecretBuffer.hand(secret, to: bytesOut, length: lengthOut)
        return CCall.ok
    }
}

@c @implementation
public func ts_item_delete(
    _ store: OpaquePointer!, _ service: UnsafePointer<CChar>!, _ account: UnsafePointer<CChar>!, _ kind: ts_kind,
    _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    CCall.run(err) {
        let handle = try storeHandles.lookUp(store)
        defer { withExtendedLifetime(handle) {} }  // alive until the call ends, however it is closed meanwhile
        let key = try ItemKey(account: CInput.account(service: service, account: account), kind: CInput.kind(kind))
        try handle.store.delete(key)
        return CCall.ok
    }
}

@c @implementation
public func ts_bytes_free(_ bytes: UnsafeMutablePointer<UInt8>!, _ length: Int) {
    guard let bytes else { return }
    SecretBuffer.free(bytes, length: length)
}

@c @implementation
public func ts_credential_state(
    _ store: OpaquePointer!, _ userID: UnsafePointer<CChar>!, _ out: UnsafeMutablePointer<ts_state>!,
    _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    CCall.run(err) {
        let out = try CInput.out(out, "state")
        let handle = try storeHandles.lookUp(store)
        defer { withExtendedLifetime(handle) {} }  // alive until the call ends, however it is closed meanwhile
        let userID = try CInput.string(userID, "user id")
        switch try handle.store.credentialState(forUserID: userID) {
        case .authorized: out.pointee = TS_STATE_AUTHORIZED
        case .revoked: out.pointee = TS_STATE_REVOKED
        case .notFound: out.pointee = TS_STATE_NOT_FOUND
        }
        return CCall.ok
    }
}

@c @implementation
public func ts_harden_process(_ err: UnsafeMutablePointer<OpaquePointer?>!) -> CInt {
    CCall.run(err) {
        try TokenStore.hardenProcess()
        return CCall.ok
    }
}

@c @implementation
public func ts_error_code(_ error: OpaquePointer!) -> UnsafePointer<CChar>! {
    guard let error else { return nil }
    return UnsafePointer(ErrorBox.borrow(error).code)
}

@c @implementation
public func ts_error_message(_ error: OpaquePointer!) -> UnsafePointer<CChar>! {
    guard let error else { return nil }
    return UnsafePointer(ErrorBox.borrow(error).message)
}

@c @implementation
public func ts_error_free(_ error: OpaquePointer!) {
    guard let error else { return }
    Unmanaged<ErrorBox>.fromOpaque(UnsafeRawPointer(error)).release()
}

/// The C value of each protection tier (`ts_protection`, include/tokenstore.h), read by
/// ts_store_protection from the tier's place in ``ProtectionTier/abiOrder``: a tier the Swift
/// library adds is appended there and in the header, and needs nothing here.
enum CProtection {
    /// The C value of `tier`: its place in ``ProtectionTier/abiOrder``, which the header's
    /// `ts_protection` numbers follow.
    /// - Throws: `ioError` for a tier this C ABI has no value for (a library built without it).
    static func value(of tier: ProtectionTier) throws -> ts_protection {
        guard let index = ProtectionTier.abiOrder.firstIndex(of: tier) else {
            throw TokenStoreError(.ioError, "The protection tier '\(tier.rawValue)' has no ts_protection value in this library.")
        }
        return ts_protection(rawValue: numericCast(index))
    }
}
