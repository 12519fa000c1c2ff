import FoundationEssentials

/// The local-only account operations, without an authorization server: what `tokenctl clear`
/// and `tokenctl discard` do. Each is one ledger transaction, then the maintenance it may
/// leave owed (``TokenStore/withOwedMaintenance(when:_:)``), as the session does after a logout.
/// For package use (tokenctl): an app goes through `TokenSession`.
package struct LocalAccounts: Sendable {
    let store: TokenStore

    /// Removes `account`'s local entries without revoking anything
    /// (``SessionLedger/clearLocally(account:reason:)``), then runs the owed maintenance.
    /// - Returns: whether anything was removed, and the maintenance's failure (the entries are
    ///   removed whatever it is; the maintenance stays owed for the next open).
    /// - Warning: the refresh token stays valid at the server until it expires.
    package func clear(account: AccountID) throws -> (cleared: Bool, maintenanceError: (any Error)?) {
        // Nothing removed, nothing can be owed by it: no maintenance (the open ran it).
        let (cleared, error) = try store.withOwedMaintenance(when: { $0 }) { try store.ledger.clearLocally(account: account) }
        return (cleared, error)
    }

    /// Gives up on the outbox entry `id` (as `tokenctl pending` lists it), also one whose row
    /// does not open, then runs the owed maintenance. An entry that opens is recorded under its
    /// user, an unreadable one as ``SessionLedger/discardUnreadablePendingRevocation(id:)`` says.
    /// - Returns: whether there was such an entry, whether its row was unreadable, and the
    ///   maintenance's failure.
    /// - Warning: the refresh token may still be valid at the server.
    package func discardPendingRevocation(id: String) throws
        -> (discarded: Bool, unreadable: Bool, maintenanceError: (any Error)?)
    {
        let ((discarded, unreadable), error) = try store.withOwedMaintenance { () throws -> (Bool, Bool) in
            if let entry = try store.ledger.pendingRevocationList().entries.first(where: { $0.id == id }) {
                try store.ledger.discardPendingRevocation(entry)
                return (true, false)
            }
            let discarded = try store.ledger.discardUnreadablePendingRevocation(id: id)
            return (discarded, discarded)
        }
        return (discarded, unreadable, error)
    }
}

extension TokenStore {
    /// The local-only account operations (``LocalAccounts``).
    package var localAccounts: LocalAccounts { LocalAccounts(store: self) }

    /// "Transaction, then maintenance", the one way: runs `transaction` (logout-like ledger
    /// calls), then ``performOwedMaintenance()`` — the crypto-erase once the last secret is
    /// gone, an interrupted rotation — outside its transactions. A failure of the maintenance
    /// is returned, not thrown: the transaction has committed, and what is owed runs at the
    /// next open. An error of `transaction` is thrown, and no maintenance runs; nor does it
    /// when `when` says the value changed nothing.
    package func withOwedMaintenance<T>(
        when changed: (T) -> Bool = { _ in true }, _ transaction: () throws -> T
    ) throws -> (value: T, maintenanceError: (any Error)?) {
        let value = try transaction()
        return (value, changed(value) ? owedMaintenanceError() : nil)
    }

    /// Runs ``performOwedMaintenance()``; returns its error instead of throwing it (the second
    /// half of ``withOwedMaintenance(when:_:)``, for a caller whose transaction is `async`).
    package func owedMaintenanceError() -> (any Error)? {
        do {
            try performOwedMaintenance()
            return nil
        } catch {
            return error
        }
    }
}
