-- Schema version 13: the authorization server's discovery documents, sealed.
--
-- The session layer kept the OpenID Connect discovery document of an `issuer:` configuration in
-- a plain JSON file beside the store, read back without any check: whoever could write the
-- folder chose where the refresh token went and faked logouts. The document now lives here,
-- one row per configured issuer, filed under the keyed hash of the issuer and sealed with the
-- document's bytes exactly as fetched (and the RFC 8414 document that supplied a missing
-- revocation endpoint), so a copy read back passes the same checks as a fetched one and an
-- edited, swapped or truncated row is an integrity failure that `verify` reports. Nothing
-- readable is added to the file.

CREATE TABLE discovery (
    lookup      BLOB PRIMARY KEY,
    key_id      BLOB NOT NULL,
    sealed      BLOB NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE rotation_discovery (
    old_lookup  BLOB PRIMARY KEY,
    old_sealed  BLOB NOT NULL,
    lookup      BLOB NOT NULL,
    sealed      BLOB NOT NULL
) STRICT, WITHOUT ROWID;
