import FoundationEssentials

extension TokenStore {
    /// Options of a store, fixed at open.
    public struct Options: Sendable, Equatable {
        /// Rotate the data key when the last account is logged out (no items and no pending
        /// revocations left), so that ciphertext left in free pages, the WAL or old backups
        /// cannot be opened with the current key (crypto-erase). On by default.
        public var rotatesKeyAfterLastLogout: Bool

        /// Options with the defaults.
        public init(rotatesKeyAfterLastLogout: Bool = true) {
            self.rotatesKeyAfterLastLogout = rotatesKeyAfterLastLogout
        }
    }
}

