-- Schema version 8: key separation.
--
-- `data_keys.scheme` says how a key is used (KeyScheme): 1, the data key itself seals and is
-- the master key of the lookup subkey (every key made before this version); 2, the data key
-- is only a master key and sealing, lookups, fingerprints and MACs each use a subkey derived
-- from it. A store whose active key is of scheme 1 is re-sealed under a new key of scheme 2 at
-- its next open, by the key rotation (crash-safe, resumed at the next open). The column is not
-- authenticated, and need not be: each key check is sealed under the key's sealing key, so a
-- changed scheme makes the key check fail to open, never a downgrade.

ALTER TABLE data_keys ADD COLUMN scheme INTEGER NOT NULL DEFAULT 1;
