import CTokenStore
import TokenStore

// A store opened with options (include/tokenstore.h): ts_store_options_init,
// ts_store_open_with_options, ts_store_access_policy.

@c @implementation
public func ts_store_options_init(_ options: UnsafeMutablePointer<ts_store_options>!) {
    guard let options else { return }
    options.pointee = ts_store_options()
    options.pointee.struct_size = MemoryLayout<ts_store_options>.size
}

@c @implementation
public func ts_store_open_with_options(
    _ pathOrNull: UnsafePointer<CChar>!, _ appID: UnsafePointer<CChar>!, _ optionsOrNull: UnsafePointer<ts_store_options>!,
    _ out: UnsafeMutablePointer<OpaquePointer?>!, _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    CCall.run(err) {
        try CStoreOpen.run(out, pathOrNull, appID) { path, appID in
            let options = try StoreOptions(optionsOrNull).options  // checked before anything is opened
            return try TokenStore(path: path, appID: appID, options: options)
        }
    }
}

@c @implementation
public func ts_store_access_policy(
    _ store: OpaquePointer!, _ name: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>!,
    _ err: UnsafeMutablePointer<OpaquePointer?>!
) -> CInt {
    CCall.run(err) {
        let nameOut = try CInput.out(name, "name")
        nameOut.pointee = nil
        let handle = try storeHandles.lookUp(store)
        defer { withExtendedLifetime(handle) {} }  // alive until the call ends, however it is closed meanwhile
        nameOut.pointee = try CStrings.mallocCopy(handle.store.accessPolicy.name)
        return CCall.ok
    }
}

/// A `ts_store_options` read and checked into ``TokenStore/Options`` (as ``LogoutOptions``).
struct StoreOptions {
    /// The longest `lock_after_idle_ms`: 365 days.
    static let maxIdleMilliseconds: Int64 = 365 * 86_400_000

    /// The `struct_size`s taken: 0.4.0's, the first.
    static let knownSizes = [MemoryLayout<ts_store_options>.size]

    var options = TokenStore.Options()

    /// - Throws: `invalidInput` for a bad `struct_size`, a name that is not an access policy's
    ///   (``AccessPolicy/init(name:)``; the name is not repeated: it is the caller's text), or a
    ///   `lock_after_idle_ms` out of range.
    init(_ pointer: UnsafePointer<ts_store_options>?) throws {
        guard let pointer else { return }
        let raw = try CInput.versionedOptions(
            pointer, empty: ts_store_options(), knownSizes: Self.knownSizes, typeName: "ts_store_options")
        if let name = try CInput.optionalString(raw.access_policy, "access policy") {
            guard let policy = AccessPolicy(name: name) else {
                throw CInput.invalid(
                    "The access policy is not a policy name: afterFirstUnlock, whenUnlocked, userPresence, "
                        + "userPresence:session:SECONDS or userPresence:appLifecycle:SECONDS (SECONDS 1-999999999). Nothing was opened.")
            }
            options.accessPolicy = policy
        }
        guard raw.lock_after_idle_ms >= 0, raw.lock_after_idle_ms <= Self.maxIdleMilliseconds else {
            throw CInput.invalid("lock_after_idle_ms is not 0 (never) to \(Self.maxIdleMilliseconds) (365 days). Nothing was opened.")
        }
        if raw.lock_after_idle_ms > 0 { options.lockAfterIdle = .milliseconds(raw.lock_after_idle_ms) }
    }
}
