import AuthSession
import CTokenStore
import Glibc
import TokenStore

// Change events and the accounts (include/tokenstore.h): ts_store_watch, ts_watch_free,
// ts_store_accounts, ts_store_account_status, ts_strings_free.

/// The watches (`ts_watch *`).
let watchHandles = HandleTable<WatchHandle>(tag: 4, what: "watch")

/// `ts_watch *`: a subscription to a store's changes, holding the store open.
final class WatchHandle: Sendable {
    let observation: StoreChangeObservation
    let storeHandle: StoreHandle
    init(_ observation: StoreChangeObservation, storeHandle: StoreHandle) {
        self.observation = observation
        self.storeHandle = storeHandle
    }
}

/// The app's callback and its data, called from the store's watcher thread.
private struct ChangeCallback: @unchecked Sendable {  // the app vouches for `userData` across threads (the header says so)
    let function: ts_change_fn
    let userData: UnsafeMutableRawPointer?

    func call(_ change: StoreChange) {
        var event = ts_change()
        event.struct_size = MemoryLayout<ts_change>.size
        event.from = TS_STATE_NOT_FOUND
        event.to = TS_STATE_NOT_FOUND
        func state(_ state: CredentialState) -> ts_state {
            switch state {
            case .authorized: return TS_STATE_AUTHORIZED
            case .revoked: return TS_STATE_REVOKED
            case .notFound: return TS_STATE_NOT_FOUND
            }
        }
        switch change {
        case .accountAdded(let account), .accountRemoved(let account), .tokensRenewed(let account):
            event.kind = change.kind == .accountAdded
                ? TS_CHANGE_ACCOUNT_ADDED : change.kind == .accountRemoved ? TS_CHANGE_ACCOUNT_REMOVED : TS_CHANGE_TOKENS_RENEWED
            account.service.withCString { service in
                account.name.withCString { name in
                    event.service = service
                    event.account = name
                    function(&event, userData)
                }
            }
        case .credentialStateChanged(let userID, let from, let to):
            event.kind = TS_CHANGE_CREDENTIAL_STATE
            event.from = state(from)
            event.to = state(to)
            userID.withCString { user in
                event.user_id = user
                function(&event, userData)
            }
        case .keyRotated, .storeLocked, .storeUnlocked:
            event.kind = change == .keyRotated
                ? TS_CHANGE_KEY_ROTATED : change == .storeLocked ? TS_CHANGE_STORE_LOCKED : TS_CHANGE_STORE_UNLOCKED
            function(&event, userData)
        }
    }
}

@c @implementation
public func ts_store_watch(
    _ store: OpaquePointer!, _ callback: ts_change_fn!, _ userData: UnsafeMutableRawPointer!,
    _ out: UnsafeMutablePointer<OpaquePointer?>!, _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    CCall.run(err) {
        let out = try CInput.out(out, "watch")
        out.pointee = nil
        guard let callback else { throw CInput.invalid("The callback is NULL.") }
        let handle = try storeHandles.lookUp(store)
        let target = ChangeCallback(function: callback, userData: userData)
        let observation = try handle.store.observeChanges { target.call($0) }
        out.pointee = watchHandles.insert(WatchHandle(observation, storeHandle: handle))
        return CCall.ok
    }
}

@c @implementation
public func ts_watch_free(_ watch: OpaquePointer!) {
    // Cancelled before the handle goes: once this returns, the callback is not running (unless
    // this is called from inside it) and is never called again.
    guard let watch, let handle = try? watchHandles.lookUp(watch) else { return }
    handle.observation.cancel()
    watchHandles.remove(watch)
}

@c @implementation
public func ts_store_accounts(
    _ store: OpaquePointer!, _ accounts: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>!,
    _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    CCall.run(err) {
        let out = try CInput.out(accounts, "accounts")
        out.pointee = nil
        let handle = try storeHandles.lookUp(store)
        defer { withExtendedLifetime(handle) {} }  // alive until the call ends, however it is closed meanwhile
        let names = try handle.store.accounts().filter { $0.account.service == AccountID.defaultService }.map(\.account.name)
        let array = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: names.count + 1)
        array.initialize(repeating: nil, count: names.count + 1)
        for (index, name) in names.enumerated() {
            guard let copy = strdup(name) else {
                ts_strings_free(array)
                throw TokenStoreError(.ioError, "Out of memory for the account names.")
            }
            array[index] = copy
        }
        out.pointee = array
        return CCall.ok
    }
}

@c @implementation
public func ts_store_account_status(
    _ store: OpaquePointer!, _ account: UnsafePointer<CChar>!, _ userIDOrNull: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>!,
    _ signedIn: UnsafeMutablePointer<CInt>!, _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    CCall.run(err) {
        userIDOrNull?.pointee = nil
        let signedInOut = try CInput.out(signedIn, "signed in")
        signedInOut.pointee = 0
        let handle = try storeHandles.lookUp(store)
        defer { withExtendedLifetime(handle) {} }  // alive until the call ends, however it is closed meanwhile
        let account = AccountID(try CInput.string(account, "account"))
        signedInOut.pointee = try handle.store.ledger.hasRefreshToken(account: account) ? 1 : 0
        if let userIDOrNull, let userID = try handle.store.appleUserID(account: account) {
            userIDOrNull.pointee = try CStrings.mallocCopy(userID)
        }
        return CCall.ok
    }
}

@c @implementation
public func ts_strings_free(_ strings: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>!) {
    guard let strings else { return }
    var index = 0
    while let string = strings[index] {
        ts_string_free(string)
        index += 1
    }
    strings.deallocate()
}
