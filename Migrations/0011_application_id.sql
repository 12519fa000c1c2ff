-- Schema version 11: the file says it is a TokenStore store.
--
-- `PRAGMA application_id` (the 32-bit big-endian integer at offset 68 of the SQLite header) is
-- set to 0x546B5374, ASCII "TkSt". An open refuses a non-empty database that has neither this
-- id nor TokenStore's own tables (`notAStore`), before anything writes to it, so pointing a
-- store path at another program's database never changes that file. Stores made before this
-- version are recognised by their tables and get the id when they are migrated.

PRAGMA application_id = 1416319860;
