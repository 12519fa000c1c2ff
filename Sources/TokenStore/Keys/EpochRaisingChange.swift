import FoundationEssentials

/// The changes that raise the store epoch (see ``StoreEpoch``): the one list of them.
///
/// A copy of the file taken before any of these, put back, would undo a logout or a key
/// switch unnoticed (a token never revoked, a user un-revoked, cleared entries back). The
/// record layer reports each one it makes inside its transaction
/// (``Database/requireEpochRaise(_:)``); the transaction's owner (``StoreConnection``) then
/// raises the file's epoch once, before the commit, and registers the key provider's raise
/// for after it. A transaction that reports one and does not raise it is refused
/// (`ioError`, nothing written). A new logout-like transaction raises the epoch by making one
/// of these changes through the record layer, or by adding a case here and reporting it.
///
/// Covered (``Database/coveringEpochRaise(_:)``): the last step of a logout (the revocation's
/// result recorded, the account's entries deleted, the user recorded `revoked`) needs no raise
/// of its own when the account is marked logging out by the very entry being settled: the
/// first step (``SessionLedger/beginLogout(account:reason:)``) queued it and raised the epoch,
/// so a copy from before the logout is already refused, and a copy from between the two steps
/// holds the token in the outbox with the account marked logging out — no read offers its
/// tokens, `resume` revokes it, and a writing open finishes the local part
/// (``SessionLedger/finishInterruptedLogouts(olderThan:)``). A logout is thus one key provider
/// write (gnome-keyring rewrites its whole file for each), not two.
enum EpochRaisingChange: String, CaseIterable, Sendable {
    /// An outbox entry was queued (`OutboxRecord.insert`):
    /// without it, the token would never be revoked.
    case outboxEntryQueued
    /// A user was recorded `revoked` (`CredentialHistory.append`):
    /// an older copy would show the user authorized again.
    case userRecordedRevoked
    /// A logout or clear deleted an account's local entries (``SessionLedger``): an older copy
    /// would bring them back.
    case localEntriesDeleted
    /// A key rotation switched the active data key (``KeyRotation``): an older copy is sealed
    /// with the retired key.
    case keySwitched
    /// A key slot was added or removed (``KeySlots``): an older copy would bring a removed
    /// slot back (a recovery key or a keyring item given up).
    case keySlotsChanged
}
