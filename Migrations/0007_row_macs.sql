-- Schema version 7: MACs over the columns that steer revocation and record history.
--
-- The outbox's schedule (`attempts`, `next_attempt_at`, `failed_code`, `last_error`), the
-- logout marks (`logging_out`, `logout_entry`) and the credential history are kept in the
-- clear, outside any sealed blob. Without the data key they could be edited to postpone or
-- stop a revocation, or to rewrite the history, unnoticed. Each such row now carries a keyed
-- MAC (BLAKE2b under the lookup subkey, in a domain of its own) over its table, its row key
-- and those columns; a history row's MAC also covers the previous row of the same user, and
-- a credential state seals the MAC of its user's last history row.
--
-- NULL in rows written before this version: "unauthenticated, legacy". How each table reads
-- such a row (and when it gets its MAC) is in RELIABILITY.md ("Row MACs"). An empty MAC
-- marks a row that failed its check under an earlier key (kept, and still reported).
-- Nothing readable is added.

ALTER TABLE pending_revocations ADD COLUMN mac BLOB;
ALTER TABLE account_marks ADD COLUMN mac BLOB;
ALTER TABLE credential_history ADD COLUMN mac BLOB;
