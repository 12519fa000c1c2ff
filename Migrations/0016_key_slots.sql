-- Schema version 16: key slots (several ways to one data key).
--
-- Each row is one way in: the kind of key provider that keeps the data key for this slot
-- (`secret-service`, `tpm`, `portal`, `passphrase`), or `recovery` for a recovery key.
-- `key_ref` is the key id the slot's provider files the data key under (for the first slot of
-- a store made before this version: the data key's own id, so its key item or file is kept as
-- it is); `sealed` is the data key wrapped for the slot when the table itself holds it (a
-- recovery key: XChaCha20-Poly1305 under an Argon2id-stretched key), NULL when the provider
-- keeps it. `mac` authenticates the row (a keyed BLAKE2b under the data key's MAC subkey over
-- the table, the store id, the row's columns and the active key id); `key_slot_set.mac`
-- authenticates which rows exist, so a removed or added row is seen too.
--
-- A store with no row has one implicit slot: its recorded key provider (`store_info.key_provider`).
-- The first slot added to such a store writes that one as row 1 first. Adding or removing a slot
-- raises the store epoch. New tables only (no ALTER), so this migration and another one of the
-- same release may be applied in either order.

CREATE TABLE key_slots (
    id          INTEGER PRIMARY KEY,
    kind        TEXT NOT NULL,
    key_ref     BLOB NOT NULL,
    sealed      BLOB,
    created_at  INTEGER NOT NULL,
    mac         BLOB NOT NULL
) STRICT;

CREATE TABLE key_slot_set (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    mac  BLOB NOT NULL
) STRICT;
