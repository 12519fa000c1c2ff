import FoundationEssentials

/// When a store's secrets may be read: the Linux counterpart of Apple's keychain accessibility
/// classes and its `userPresence` access-control flag, with Auth0's policy windows.
///
/// Chosen at open (``TokenStore/Options/accessPolicy``) and recorded in the store under its MAC,
/// so another process cannot weaken it: an open asking for a weaker policy than the recorded one
/// gets the recorded one; a stronger one is recorded. Only ``TokenStore/setAccessPolicy(_:)``
/// lowers it. The recorded name is ``name`` (`tokenctl --access-policy NAME`).
public enum AccessPolicy: Sendable, Hashable, CustomStringConvertible {
    /// Readable whenever the process has the store open (today's behaviour; the default). The
    /// data key stays in guarded memory for the life of the store object, unless the store is
    /// locked explicitly (``TokenStore/lock(allProcesses:)``).
    case afterFirstUnlock
    /// Readable only while the desktop session is unlocked: the data key is wiped when it locks,
    /// and every read or write fails with `storeLocked` until it unlocks (the key is then fetched
    /// again from its provider at the next call). The lock comes from logind (the caller's
    /// session's `Lock` / `Unlock` signals and `LockedHint`), else from a screensaver on the
    /// session bus (`ActiveChanged`); with neither, the open throws `lockSourceUnavailable`.
    case whenUnlocked
    /// Reading a secret first needs the user's presence (a polkit authorization with user
    /// interaction for the app's action, `<app id>.tokenstore.read`), within the window of the
    /// given ``UserPresence``: the refresh token (a renewal too) and generic items always, the
    /// kinds in ``TokenStore/Options/userPresenceAlsoFor`` too. Denied or dismissed:
    /// `userPresenceDenied`, nothing read or changed; no polkit on the system bus:
    /// `lockSourceUnavailable`. Presence, not key protection: the data key is held as under
    /// ``afterFirstUnlock``.
    case userPresence(UserPresence)

    /// How long one proof of the user's presence lasts, and who shares it.
    public enum UserPresence: Sendable, Hashable {
        /// Every read asks.
        case always
        /// One proof lasts `seconds` from the proof, for every store object of the store in this
        /// process and for the other processes of the user's login session (recorded, under the
        /// store's MAC, in `$XDG_RUNTIME_DIR`, which ends with the session).
        case session(seconds: Int)
        /// One proof lasts `seconds` from the proof, for every store object of the store in this
        /// process, and ends with the process: another process asks again.
        case appLifecycle(seconds: Int)
    }

    /// The recorded (and `tokenctl`) name: `afterFirstUnlock`, `whenUnlocked`, `userPresence`,
    /// `userPresence:session:SECONDS`, `userPresence:appLifecycle:SECONDS`.
    public var name: String {
        switch self {
        case .afterFirstUnlock: return "afterFirstUnlock"
        case .whenUnlocked: return "whenUnlocked"
        case .userPresence(.always): return "userPresence"
        case .userPresence(.session(let seconds)): return "userPresence:session:\(seconds)"
        case .userPresence(.appLifecycle(let seconds)): return "userPresence:appLifecycle:\(seconds)"
        }
    }

    public var description: String { name }

    /// The policy named `name` (as ``name`` writes it), or nil.
    public init?(name: String) {
        let parts = name.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        switch parts.count {
        case 1 where parts[0] == "afterFirstUnlock": self = .afterFirstUnlock
        case 1 where parts[0] == "whenUnlocked": self = .whenUnlocked
        case 1 where parts[0] == "userPresence": self = .userPresence(.always)
        case 3 where parts[0] == "userPresence":
            guard parts[2].utf8.count <= 9, parts[2].utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
                let seconds = Int(parts[2]), seconds > 0
            else { return nil }
            switch parts[1] {
            case "session": self = .userPresence(.session(seconds: seconds))
            case "appLifecycle": self = .userPresence(.appLifecycle(seconds: seconds))
            default: return nil
            }
        default: return nil
        }
    }

    /// How much the policy holds back, for the "never weaker than recorded" rule: a policy with
    /// a higher rank protects at least as much. Within `userPresence`, asking every time beats a
    /// window that ends with the process, which beats one that does not; a shorter window beats
    /// a longer one.
    var strength: (rank: Int, window: Int) {
        switch self {
        case .afterFirstUnlock: return (0, 0)
        case .whenUnlocked: return (1, 0)
        case .userPresence(.session(let seconds)): return (2, -seconds)
        case .userPresence(.appLifecycle(let seconds)): return (3, -seconds)
        case .userPresence(.always): return (4, 0)
        }
    }

    /// Whether `self` protects less than `other`.
    func isWeaker(than other: AccessPolicy) -> Bool { strength < other.strength }

    /// The stronger of the two.
    static func stronger(_ a: AccessPolicy, _ b: AccessPolicy) -> AccessPolicy { a.isWeaker(than: b) ? b : a }
}
