-- Schema version 17: key slots that follow a key rotation.
--
-- `key_slot_boxes`: a slot added from this version on does not keep the data key itself. Its
-- provider keeps (or its row's `sealed` wraps) the secret half of an X25519 key pair made for
-- the slot; the row's box holds the public half and the data key sealed to it (libsodium
-- `crypto_box_seal`). A key rotation re-seals the new data key to each public key, so no slot's
-- secret (a PIN, a passphrase, a recovery key) is needed to rotate. The box's columns are part of
-- its `key_slots` row's MAC. A slot without a box keeps the data key itself (the store's first
-- slot, and slots added at version 16).
--
-- `rotation_slot_keys`: during a rotation, the new key pair of each slot whose provider needs
-- nobody (the keyring, the portal, the TPM), filed by that provider under `key_ref` before the
-- switch, so that a copy of the file from before the rotation opens with no slot key that is
-- left. MAC'd under the key that was active when they were written; emptied by the switch (or
-- a roll-back, which deletes the keys they name).
--
-- `retired_slot_keys`: the slot keys the switch replaced, deleted from their providers after
-- it (then their rows). MAC'd under the key the switch made active.
--
-- New tables only (no ALTER), so this migration and another one of the same release may be
-- applied in either order.

CREATE TABLE key_slot_boxes (
    slot_id     INTEGER PRIMARY KEY,
    public_key  BLOB NOT NULL,
    boxed_key   BLOB NOT NULL
) STRICT;

CREATE TABLE rotation_slot_keys (
    slot_id     INTEGER PRIMARY KEY,
    key_ref     BLOB NOT NULL,
    public_key  BLOB NOT NULL,
    mac         BLOB NOT NULL
) STRICT;

CREATE TABLE retired_slot_keys (
    kind        TEXT NOT NULL,
    key_ref     BLOB NOT NULL,
    mac         BLOB NOT NULL,
    PRIMARY KEY (kind, key_ref)
) STRICT;
