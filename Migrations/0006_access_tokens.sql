-- Schema version 6: the access-token cache, one sealed row per (account, audience, scope set).
--
-- Auth0 issues access tokens per API (`audience`) from one refresh token (Multi-Resource
-- Refresh Tokens). The cache kept one access token per account as an item: two audiences or
-- two scope sets evicted each other on every call. Each cached token now has a row of its
-- own, found by the keyed hash of (service, account, audience, scope set) and listed by its
-- account's keyed hash; the names, audience, scopes, expiry and token are sealed. A session
-- keeps at most a few rows per account (the oldest is evicted). Nothing readable is added.

CREATE TABLE access_tokens (
    id          INTEGER PRIMARY KEY,
    lookup      BLOB NOT NULL UNIQUE,
    account_ref BLOB NOT NULL,
    key_id      BLOB NOT NULL,
    sealed      BLOB NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;

CREATE INDEX access_tokens_by_account ON access_tokens(account_ref);

CREATE TABLE rotation_access_tokens (
    old_lookup  BLOB PRIMARY KEY,
    old_sealed  BLOB NOT NULL,
    lookup      BLOB NOT NULL,
    account_ref BLOB NOT NULL,
    sealed      BLOB NOT NULL
) STRICT, WITHOUT ROWID;

-- The one access-token item (kind 3) an earlier session kept per account is no longer read
-- by the session (the next call refreshes into this table); a logout still deletes it, and an
-- app's own items of that kind are left alone.
