-- Schema version 4: a crypto-erase that is owed.
--
-- When a logout removes the store's last secret, the data key is rotated so that sealed
-- copies left behind (in a backup, in a page the file system kept) no longer open. That
-- rotation needs the key provider, which can be locked or gone at that moment. The
-- transaction that removes the last secret now records the debt here; the transaction
-- that switches to a new key clears it; a store that opens with it set rotates then.
-- Holds a time in milliseconds, or NULL when nothing is owed.

ALTER TABLE store_info ADD COLUMN erase_owed_since INTEGER;
