import FoundationEssentials

/// What a policy needs before a store may be opened under it: a policy this process cannot
/// enforce is refused, typed, rather than pretended.
enum AccessPolicyGate {
    /// - Throws: `lockSourceUnavailable` for ``AccessPolicy/whenUnlocked`` when nothing can say
    ///   when the session locks (neither logind nor a screensaver: ``SessionLockSource``; found,
    ///   the process's source is started and shared). ``AccessPolicy/userPresence(_:)`` opens:
    ///   polkit is asked at the first read that needs it (a read then fails with
    ///   `lockSourceUnavailable` if no polkit answers), not at open, so `status` and the
    ///   metadata calls work without a prompt.
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
            return
        }
    }
}
