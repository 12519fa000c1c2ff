import FoundationEssentials

/// What ``TokenStore/rotateDataKey(batchSize:progress:)`` did.
public struct KeyRotationReport: Sendable, Equatable {
    /// The key the store used before (hex id).
    public let previousKeyIdentifier: String
    /// The key the store uses now (hex id).
    public let newKeyIdentifier: String
    /// Rows re-sealed under the new key (items, pending revocations, credential states).
    public let rowsResealed: Int
    /// Batch transactions run (not counting the switch).
    public let batches: Int
    /// True when an interrupted rotation was picked up and finished.
    public let resumed: Bool
}

