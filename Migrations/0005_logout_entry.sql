-- Schema version 5: the outbox entry a logout mark belongs to.
--
-- An account being logged out can also hold older outbox entries: a token replaced by a
-- sign-in, or left by an earlier logout, whose revocation is still pending. The local
-- clean-up and the credential state of a logout belong to the entry that logout queued;
-- an older entry settled first must not finish the logout, for the wrong user or with the
-- wrong reason. NULL in marks written before this version: any entry finishes them.

ALTER TABLE account_marks ADD COLUMN logout_entry BLOB;
