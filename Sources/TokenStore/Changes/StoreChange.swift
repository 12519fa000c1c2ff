/// A change to a store, made by this process or any other that has the same store open: what
/// ``TokenStore/changes`` and ``TokenStore/observeChanges(_:)`` deliver.
///
/// An event names at most an account (service and name) and an Apple user id, identifiers the
/// app itself stored, and credential states. It never carries a token, a secret, a fingerprint
/// or a key id. Events reach only a process that opened the store with its data key: the log
/// they are read from is sealed in the store file (nothing about them is written in the clear
/// anywhere), and ``description`` shows no identifier.
///
/// `storeLocked` / `storeUnlocked` are this store object's own state (its data key wiped or
/// fetched again), whatever the reason; they are not logged in the file. More kinds may come:
/// switch with a `default`.
public enum StoreChange: Sendable, Hashable, CustomStringConvertible {
    /// The account got a refresh token it did not have (a sign-in, or an app's own `set`).
    case accountAdded(AccountID)
    /// The account's refresh token left it (a logout began, the server refused it, the entries
    /// were cleared or deleted): it is signed out.
    case accountRemoved(AccountID)
    /// A user's credential state changed (`authorized` at a sign-in, `revoked` at a logout, a
    /// revocation relayed from Apple, a rejected refresh).
    case credentialStateChanged(userID: String, from: CredentialState, to: CredentialState)
    /// A renewal stored new tokens for the account (a new access token, and a rotated refresh
    /// token when the server rotates them).
    case tokensRenewed(AccountID)
    /// The store switched to a new data key (a rotation, or the crypto-erase after the last logout).
    case keyRotated
    /// This store object became locked (its data key wiped): an explicit ``TokenStore/lock(allProcesses:)``
    /// here, a lock for every process set by any process, the idle lock, or the desktop session's
    /// lock for a ``AccessPolicy/whenUnlocked`` store. Once per transition.
    case storeLocked
    /// This store object became unlocked again (an explicit unlock, a lock for every process
    /// cleared by any process, the desktop session unlocked). Once per transition.
    case storeUnlocked

    /// The kind, without what it names.
    public var kind: Kind {
        switch self {
        case .accountAdded: return .accountAdded
        case .accountRemoved: return .accountRemoved
        case .credentialStateChanged: return .credentialStateChanged
        case .tokensRenewed: return .tokensRenewed
        case .keyRotated: return .keyRotated
        case .storeLocked: return .storeLocked
        case .storeUnlocked: return .storeUnlocked
        }
    }

    /// The account the change is about, if any.
    public var account: AccountID? {
        switch self {
        case .accountAdded(let account), .accountRemoved(let account), .tokensRenewed(let account): return account
        case .credentialStateChanged, .keyRotated, .storeLocked, .storeUnlocked: return nil
        }
    }

    /// `accountRemoved(AccountID(…))`, `credentialStateChanged([redacted], authorized → revoked)`:
    /// never an identifier.
    public var description: String {
        switch self {
        case .accountAdded(let account), .accountRemoved(let account), .tokensRenewed(let account):
            return "\(kind.rawValue)(\(account))"
        case .credentialStateChanged(_, let from, let to):
            return "credentialStateChanged([redacted], \(from.rawValue) → \(to.rawValue))"
        case .keyRotated, .storeLocked, .storeUnlocked:
            return kind.rawValue
        }
    }

    /// The kinds of ``StoreChange``, with stable names (the C ABI's and GObject signals' names
    /// come from them).
    public enum Kind: String, Sendable, CaseIterable {
        case accountAdded, accountRemoved, credentialStateChanged, tokensRenewed, keyRotated, storeLocked, storeUnlocked

        /// The stored code of the kind (in the sealed change log); never reused.
        var code: UInt8 {
            switch self {
            case .accountAdded: return 1
            case .accountRemoved: return 2
            case .credentialStateChanged: return 3
            case .tokensRenewed: return 4
            case .keyRotated: return 5
            case .storeLocked: return 6  // never logged: a store object's own state
            case .storeUnlocked: return 7
            }
        }

        init?(code: UInt8) {
            guard let kind = Self.allCases.first(where: { $0.code == code }) else { return nil }
            self = kind
        }
    }
}
