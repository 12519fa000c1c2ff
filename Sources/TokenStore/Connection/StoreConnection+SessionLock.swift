import FoundationEssentials
import Synchronization

extension StoreConnection {
    /// With `lock` held, whenever the policy in force is set: a ``AccessPolicy/whenUnlocked`` store
    /// follows the process's ``SessionLockSource`` from then on (and is locked at once when the
    /// session is). Where no source can be found (a policy recorded by another process meanwhile),
    /// the store is locked: nothing would say when the session locks.
    func followAccessPolicy() {
        if accessPolicy == .whenUnlocked, sessionLock == nil {
            guard let source = SessionLockSource.shared() else {
                if lockState.load(ordering: .acquiring) != LockReason.here.rawValue { wipeKey(.session) }
                return
            }
            sessionLock = source
            source.add(self)
        }
        applySessionLock()
    }

    /// On the session lock source's thread, after a lock or an unlock: the state as it is now.
    func followSessionLock() {
        try? withDatabase { _ in applySessionLock() }
    }

    /// With `lock` held: a locked session wipes the key (as ``lock(everywhere:)`` does: the
    /// read path then throws `storeLocked` at its one atomic load); an unlocked one lets the next
    /// call fetch the key again from its provider. An explicit lock is left as it is.
    func applySessionLock() {
        let state = LockReason(rawValue: lockState.load(ordering: .acquiring)) ?? .here
        let locked = accessPolicy == .whenUnlocked && (sessionLock?.isLocked ?? true)
        switch (locked, state) {
        case (true, .unlocked), (true, .released), (true, .everywhere):
            wipeKey(.session)
            logger.info("store locked with the desktop session")
        case (false, .session):
            setLockState(.released)
            logger.info("desktop session unlocked: the store's key is fetched again at the next call")
        default:
            break
        }
    }
}

extension TokenStore {
    /// What tells this process when the desktop session locks, for ``AccessPolicy/whenUnlocked``
    /// stores: `logind` or `screensaver`; nil when neither answers. Starts following it (once per process).
    package static var sessionLockSource: String? { SessionLockSource.shared()?.kind.rawValue }

    /// Whether the desktop session is locked, as the process's source says (false without one).
    package static var isSessionLocked: Bool { SessionLockSource.shared()?.isLocked ?? false }
}
