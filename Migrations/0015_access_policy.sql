-- Schema version 15: the store's access policy and its lock for every process, under a MAC.
--
-- `access_policy` names when the store's secrets may be read (TokenStore's `AccessPolicy`:
-- `afterFirstUnlock`, `whenUnlocked`, `userPresence`, `userPresence:session:SECONDS`,
-- `userPresence:appLifecycle:SECONDS`). `locked_everywhere` is 1 while the store is locked for
-- every process (`tokenctl lock`; `tokenctl unlock` clears it): a process notices the change
-- through `PRAGMA data_version` on its next call and drops (or fetches again) its data key.
-- `access_mac` authenticates both: a keyed BLAKE2b under the data key's MAC subkey over the
-- table, the store id, the policy and the lock byte. The open that applies this version records
-- the default policy (`afterFirstUnlock`, unlocked); from then on a missing, edited or swapped
-- record is tampering (`integrityCheckFailed`). An open asking for a weaker policy than the
-- recorded one gets the recorded one: only an explicit `setAccessPolicy` lowers it.

ALTER TABLE store_info ADD COLUMN access_policy TEXT;
ALTER TABLE store_info ADD COLUMN locked_everywhere INTEGER NOT NULL DEFAULT 0;
ALTER TABLE store_info ADD COLUMN access_mac BLOB;
