-- Schema version 10: every row MAC is present, and the store records its key provider.
--
-- Row MACs (version 7) left rows written before them with a NULL MAC, read as "legacy". Such
-- a NULL was indistinguishable from a MAC stripped by someone who can write the file but has
-- no key (review 2, N11). The open that applies this version holds the data key and gives every
-- legacy row its MAC in the same transaction (TokenStore's RowMACBackfill: an outbox schedule
-- in its neutral form, due at once; a logout mark in its fail-safe form; a credential history
-- chain as it stands, when it checks). From this version on a NULL MAC is tampering: the row is
-- unreadable (outbox), read fail-safe (mark) or breaks its chain (history), and verify reports it.
--
-- `key_provider` names the kind of key provider that made the data key (`secret-service`,
-- `portal`, `passphrase`; `tpm` reserved), written when a key is made and, for an older store,
-- by the open that applies this version. `key_provider_mac` authenticates it: a keyed BLAKE2b
-- under the data key's MAC subkey over the table, the store id and the kind. Opening with
-- another provider is `wrongKeyProvider` naming the recorded one (review 2, N7).

ALTER TABLE store_info ADD COLUMN key_provider TEXT;
ALTER TABLE store_info ADD COLUMN key_provider_mac BLOB;
