#ifndef TOKENSTORE_FAULT_VFS_H
#define TOKENSTORE_FAULT_VFS_H

/* A fault-injecting SQLite VFS for tests only, the way SQLite tests itself: it wraps the
 * default "unix" VFS and fails the Nth xWrite, xSync or xRead (counted from when it is armed)
 * of every file opened through it. Registered under the name "tokenstore-faulty", never as
 * the default VFS. */

enum {
    TOKENSTORE_FAULT_NONE = 0,
    TOKENSTORE_FAULT_WRITE = 1, /* the Nth xWrite fails with SQLITE_IOERR_WRITE */
    TOKENSTORE_FAULT_SYNC = 2,  /* the Nth xSync fails with SQLITE_IOERR_FSYNC */
    TOKENSTORE_FAULT_READ = 3,  /* the Nth xRead fails with SQLITE_IOERR_READ */
    TOKENSTORE_FAULT_FULL = 4   /* the Nth xWrite fails with SQLITE_FULL */
};

/* Registers the VFS (once; later calls do nothing). Returns an SQLite result code. */
int tokenstore_faultvfs_register(void);
/* The name to pass to sqlite3_open_v2. */
const char *tokenstore_faultvfs_name(void);
/* Fails the nth (1-based) call of `kind` from now on, once; resets the counters. */
void tokenstore_faultvfs_arm(int kind, int nth);
/* No more faults. The counters keep their values. */
void tokenstore_faultvfs_disarm(void);
/* Calls of the armed kind since it was armed. */
int tokenstore_faultvfs_calls(void);
/* Faults injected since it was armed (0 or 1). */
int tokenstore_faultvfs_fired(void);

#endif
