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
}
