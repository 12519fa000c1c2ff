-- Key management, schema version 2: the work tables of a key rotation and the record of
-- store resets.
--
-- A rotation re-seals rows in batches into the rotation_* tables, sealed under the 'next'
-- data key, while the live tables stay untouched under the 'active' key (so every reader
-- keeps working and a crash between batches loses nothing). One transaction then swaps
-- the re-sealed rows in and makes the 'next' key 'active'. `old_sealed` is the live blob a
-- shadow row was made from: a live row rewritten after its batch no longer matches and is
-- re-sealed again in the switch. Like every other table, nothing here is readable without
-- a data key.

CREATE TABLE rotation_items (
    old_lookup  BLOB PRIMARY KEY,
    old_sealed  BLOB NOT NULL,
    lookup      BLOB NOT NULL,
    account_ref BLOB NOT NULL,
    sealed      BLOB NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE rotation_pending (
    entry_id    BLOB PRIMARY KEY,
    old_sealed  BLOB NOT NULL,
    account_ref BLOB NOT NULL,
    sealed      BLOB NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE rotation_states (
    old_user_ref BLOB PRIMARY KEY,
    old_sealed   BLOB NOT NULL,
    user_ref     BLOB NOT NULL,
    sealed_user  BLOB NOT NULL
) STRICT, WITHOUT ROWID;

-- Old keyed hash -> new keyed hash. domain 2 = account_ref, 3 = user_ref.
CREATE TABLE rotation_refs (
    domain  INTEGER NOT NULL,
    old_ref BLOB NOT NULL,
    new_ref BLOB NOT NULL,
    PRIMARY KEY (domain, old_ref)
) STRICT, WITHOUT ROWID;

-- One row per explicit reset after a lost data key. History rows with an id up to
-- `last_history_id` are keyed under a key that no longer exists.
CREATE TABLE store_resets (
    id               INTEGER PRIMARY KEY,
    at               INTEGER NOT NULL,
    last_history_id  INTEGER NOT NULL,
    items_destroyed  INTEGER NOT NULL,
    states_revoked   INTEGER NOT NULL,
    outbox_lost      INTEGER NOT NULL
) STRICT;
