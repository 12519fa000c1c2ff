-- TokenStore schema, version 1.
-- Nothing in here is readable without the data key: identifiers are keyed BLAKE2b
-- hashes, secrets and names live inside XChaCha20-Poly1305 sealed blobs. Columns in
-- the clear hold only counts, kinds, timestamps and fixed reason codes.

-- One row: the store's random id (bound into every sealed value).
CREATE TABLE store_info (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    store_id    BLOB NOT NULL CHECK (length(store_id) = 16),
    created_at  INTEGER NOT NULL
) STRICT;

-- Data keys known to this store. The key itself lives in the key provider (the Secret
-- Service); `key_check` is a sealed constant that tells a wrong key from a tampered row.
CREATE TABLE data_keys (
    key_id      BLOB PRIMARY KEY CHECK (length(key_id) = 16),
    status      TEXT NOT NULL CHECK (status IN ('active', 'next', 'retired')),
    key_check   BLOB NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX data_keys_one_active ON data_keys(status) WHERE status = 'active';

-- Keychain items. `lookup` = keyed hash of (service, account, kind);
-- `account_ref` = keyed hash of (service, account).
CREATE TABLE items (
    lookup      BLOB PRIMARY KEY,
    account_ref BLOB NOT NULL,
    kind        INTEGER NOT NULL,
    key_id      BLOB NOT NULL,
    sealed      BLOB NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX items_by_account ON items(account_ref);

-- Accounts whose logout has begun: no read offers their refresh token any more.
CREATE TABLE account_marks (
    account_ref BLOB PRIMARY KEY,
    logging_out INTEGER NOT NULL DEFAULT 0,
    updated_at  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- Credential state per Apple user id. `user_ref` = keyed hash of the user id; the id
-- itself is kept sealed so that a key rotation can recompute the hash.
CREATE TABLE credential_states (
    user_ref    BLOB PRIMARY KEY,
    key_id      BLOB NOT NULL,
    sealed_user BLOB NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('authorized', 'revoked', 'notFound')),
    updated_at  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE credential_history (
    id          INTEGER PRIMARY KEY,
    user_ref    BLOB NOT NULL,
    at          INTEGER NOT NULL,
    from_state  TEXT NOT NULL,
    to_state    TEXT NOT NULL,
    reason      TEXT NOT NULL,
    detail      TEXT
) STRICT;
CREATE INDEX credential_history_by_user ON credential_history(user_ref, id);

-- The pending-revocation outbox: refresh tokens on their way to being revoked at the
-- authorization server. `sealed` holds the token with its account and user id.
CREATE TABLE pending_revocations (
    entry_id        BLOB PRIMARY KEY CHECK (length(entry_id) = 16),
    account_ref     BLOB NOT NULL,
    key_id          BLOB NOT NULL,
    sealed          BLOB NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error      TEXT,
    failed_code     TEXT,
    created_at      INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX pending_revocations_due ON pending_revocations(next_attempt_at);
