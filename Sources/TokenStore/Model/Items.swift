import FoundationEssentials

/// What an item holds. The raw value is the name used by `tokenctl --kind`.
public enum ItemKind: String, Sendable, CaseIterable, CustomStringConvertible {
    /// An Auth0 refresh token.
    case refreshToken = "refresh-token"
    /// The Apple user identifier (`sub`) of the account.
    case appleUserID = "apple-user-id"
    /// A cached access token, with its expiry and granted scopes.
    case accessToken = "access-token"
    /// Any other secret the app keeps, with an optional label.
    case generic
    /// The ID token of the account's last sign-in (kept for the profile and `id_token_hint`).
    case idToken = "id-token"
    /// The account's profile from its ID tokens: `sub`, name and email (see ``UserProfile``).
    case profile

    var code: UInt8 {
        switch self {
        case .refreshToken: return 1
        case .appleUserID: return 2
        case .accessToken: return 3
        case .generic: return 4
        case .idToken: return 5
        case .profile: return 6
        }
    }

    init?(code: Int64) {
        guard let kind = Self.allCases.first(where: { Int64($0.code) == code }) else { return nil }
        self = kind
    }

    public var description: String { rawValue }

    /// The kinds a sign-in writes and a logout removes.
    static let session: [ItemKind] = [.refreshToken, .appleUserID, .accessToken, .idToken, .profile]
}

/// The address of one item: an account and a kind, like a keychain's generic password.
///
/// The account's names are identifiers: they are stored only inside sealed blobs and are
/// never written to logs or error messages.
public struct ItemKey: Sendable, Hashable {
    public var account: AccountID
    public var kind: ItemKind

    public init(account: AccountID, kind: ItemKind) {
        self.account = account
        self.kind = kind
    }

    /// The item of the same account with another kind.
    func sibling(_ kind: ItemKind) -> ItemKey { ItemKey(account: account, kind: kind) }

    /// The same names as `other`, byte for byte (see ``AccountID``).
    func hasSameBytes(as other: ItemKey) -> Bool {
        kind == other.kind && account.hasSameBytes(as: other.account)
    }
}

/// Non-secret attributes kept (sealed) with an item.
public struct ItemAttributes: Sendable, Equatable {
    /// A label a person can read, for generic items.
    public var label: String?
    /// When the secret stops being valid (access tokens).
    public var expiresAt: Date?
    /// The scopes the secret was granted (access tokens).
    public var scopes: [String]

    public init(label: String? = nil, expiresAt: Date? = nil, scopes: [String] = []) {
        self.label = label
        self.expiresAt = expiresAt
        self.scopes = scopes
    }
}

/// An item with its secret, as returned by ``TokenStore/item(for:)``.
public struct StoredItem: Sendable {
    public let key: ItemKey
    public let secret: SecretBytes
    public let attributes: ItemAttributes
    public let createdAt: Date
    public let updatedAt: Date
    /// A short fingerprint of the secret, keyed for this store (see ``TokenStore/fingerprint(of:)``).
    public let fingerprint: String
}

/// An item's metadata without its secret, as listed by ``TokenStore/items()``.
public struct ItemInfo: Sendable {
    public let key: ItemKey
    public let attributes: ItemAttributes
    public let createdAt: Date
    public let updatedAt: Date
    /// A short fingerprint of the secret, keyed for this store (see ``TokenStore/fingerprint(of:)``).
    public let fingerprint: String
    /// The secret's length in bytes.
    public let byteCount: Int
}

/// One account of the store (metadata only).
public struct AccountInfo: Sendable, Hashable {
    public let account: AccountID
    /// The kinds of item the account has.
    public let kinds: Set<ItemKind>
    /// Whether a logout has begun and not yet finished for this account.
    public let isLoggingOut: Bool
}

/// Limits on what the store accepts; larger input is `invalidInput`, nothing written.
public enum StoreLimits {
    /// Longest service or account name, in UTF-8 bytes.
    public static let maxIdentifierBytes = 4_096
    /// Largest secret, in bytes.
    public static let maxSecretBytes = 1 << 20
    /// Longest label, in UTF-8 bytes.
    public static let maxLabelBytes = 1_024
    /// Most scopes on one access token.
    public static let maxScopes = 256
    /// The dates the store accepts (an expiry, a due time): years 1 to 9999.
    public static let dates = Date(timeIntervalSince1970: -62_135_596_800)...Date(timeIntervalSince1970: 253_402_300_799)
}
