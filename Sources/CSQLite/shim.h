#include <sqlite3.h>

/* Helpers for the few SQLite macros and variadic calls Swift cannot import. */

static inline sqlite3_destructor_type tokenstore_sqlite_transient(void) {
    return SQLITE_TRANSIENT;
}

/* sqlite3_db_config is variadic: one non-variadic wrapper per option we set. */
static inline int tokenstore_sqlite_db_config_int(sqlite3 *db, int option, int value) {
    return sqlite3_db_config(db, option, value, (int *)0);
}

/* Reads back a boolean connection option (SQLITE_DBCONFIG_ENABLE_TRIGGER, ...): -1 leaves it unchanged. */
static inline int tokenstore_sqlite_db_config_read(sqlite3 *db, int option, int *value) {
    return sqlite3_db_config(db, option, -1, value);
}
