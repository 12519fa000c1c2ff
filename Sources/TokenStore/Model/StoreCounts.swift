/// Counts of what a store holds (no secrets, no identifiers).
public struct StoreCounts: Sendable, Equatable {
    public let items: Int
    public let accounts: Int
    public let pendingRevocations: Int
    public let credentialStates: Int
}
