-- Schema version 14: the change log, sealed (cross-process change events).
--
-- Every write transaction that adds or removes an account's refresh token, changes a user's
-- credential state, renews an account's tokens or switches the data key appends one row per
-- change, in commit order. A process watching the store (`TokenStore.changes`) is woken by
-- inotify on the database's folder, reads the rows after the last one it saw and diffs its
-- snapshot of the store when rows it never saw were pruned. Each row is sealed under the data
-- key, bound to its sequence number: the account names and user ids it names are never in the
-- clear, and a row moved to another place does not open. The newest 512 rows are kept; a key
-- switch re-seals them under the new key in the switch's transaction.

CREATE TABLE change_log (
    seq         INTEGER PRIMARY KEY,
    key_id      BLOB NOT NULL,
    sealed      BLOB NOT NULL,
    at          INTEGER NOT NULL
) STRICT;
