-- Schema version 3: `items` becomes an ordinary rowid table with a UNIQUE `lookup`.
--
-- In a WITHOUT ROWID table a row longer than about 1,000 bytes (4 KiB pages) spills into an
-- overflow page of its own, and a sealed access token (a JWT) is that long: every item took
-- a whole page (≈ 4.7 KiB on disk) and every read an extra page. SQLite's documentation
-- advises WITHOUT ROWID only for rows well under 1/20 of a page. A rowid table keeps rows up
-- to ≈ 4,000 bytes in the leaf, and the UNIQUE index on `lookup` stays small and dense.
-- Same columns, same meaning; nothing readable is added.

CREATE TABLE items_v3 (
    id          INTEGER PRIMARY KEY,
    lookup      BLOB NOT NULL UNIQUE,
    account_ref BLOB NOT NULL,
    kind        INTEGER NOT NULL,
    key_id      BLOB NOT NULL,
    sealed      BLOB NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;

INSERT INTO items_v3(lookup, account_ref, kind, key_id, sealed, created_at, updated_at)
SELECT lookup, account_ref, kind, key_id, sealed, created_at, updated_at FROM items;

DROP TABLE items;
ALTER TABLE items_v3 RENAME TO items;
CREATE INDEX items_by_account ON items(account_ref);
