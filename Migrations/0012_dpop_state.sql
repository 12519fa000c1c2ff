-- Schema version 12: the store's DPoP state (RFC 9449), sealed.
--
-- One row per entry, filed under the keyed hash of what it names (nothing readable is added):
-- the store's one DPoP key (its material as opaque bytes with where it lives: a software key's
-- scalar and point, or a TPM's sealed blob), the latest `DPoP-Nonce` of each server origin
-- (shared between the processes that open the store, so each does not pay a 400 first; last
-- writer wins), and per account the thumbprint its refresh token is bound to.

CREATE TABLE dpop_state (
    lookup      BLOB PRIMARY KEY,
    key_id      BLOB NOT NULL,
    sealed      BLOB NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE rotation_dpop_state (
    old_lookup  BLOB PRIMARY KEY,
    old_sealed  BLOB NOT NULL,
    lookup      BLOB NOT NULL,
    sealed      BLOB NOT NULL
) STRICT, WITHOUT ROWID;
