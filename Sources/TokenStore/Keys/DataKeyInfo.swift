import FoundationEssentials

/// One data key a store knows, for diagnostics (`tokenctl status`).
public struct DataKeyInfo: Sendable, Equatable {
    /// Where a key is in its life.
    public enum Status: String, Sendable {
        /// The key every row is sealed under.
        case active
        /// A rotation to this key has begun and has not switched yet.
        case next
        /// A rotation switched away from this key; its keyring item is being deleted.
        case retired
    }
    /// The key's id (hex).
    public let identifier: String
    public let status: Status
    public let createdAt: Date
}

