-- Schema version 9: the store epoch (rollback detection).
--
-- A counter raised by every logout and key rotation (a reset keeps it), kept twice: here, and in the key
-- provider next to the data key (a Secret Service item of its own, or a file beside the
-- wrapped keys). A database file restored from an older copy holds a lower epoch than the
-- key provider and opens as `storeRolledBack`. `epoch_mac` authenticates the value: a keyed
-- BLAKE2b under the data key's MAC subkey over the table, the store id and the epoch, so the
-- value cannot be raised without the key.
--
-- NULL in a store from before this version: epoch 0, and the key provider holds none either.

ALTER TABLE store_info ADD COLUMN epoch INTEGER;
ALTER TABLE store_info ADD COLUMN epoch_mac BLOB;
