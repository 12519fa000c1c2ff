import FoundationEssentials

/// What a policy needs before a store may be opened under it: a policy this process cannot
/// enforce is refused, typed, rather than pretended.
enum AccessPolicyGate {
    /// - Throws: `lockSourceUnavailable` for ``AccessPolicy/whenUnlocked`` when nothing can say
    ///   when the session locks (neither logind nor a screensaver: ``SessionLockSource``; found,
    ///   the process's source is started and shared); `invalidInput` for ``AccessPolicy/userPresence(_:)``, which this
    ///   version cannot ask for yet (a store recording it stays closed to it: nothing is weakened).
    static func check(_ policy: AccessPolicy) throws {
        switch policy {
        case .afterFirstUnlock:
            return
        case .whenUnlocked:
            guard SessionLockSource.shared() == nil else { return }
            throw TokenStoreError(
                .lockSourceUnavailable,
                "The store's access policy is whenUnlocked, but this process cannot follow the desktop session's lock (no lock source: logind or a screensaver). The store was not opened.",
                hint: "Open it where the desktop session's lock can be followed (logind, or a screensaver on the session bus).")
        case .userPresence:
            throw TokenStoreError(
                .invalidInput,
                "The store's access policy is userPresence, which this version cannot ask for. The store was not opened.",
                hint: "Open it with a version that supports userPresence.")
        }
    }
}
