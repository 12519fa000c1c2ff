#include "CFaultVFS.h"

#include <sqlite3.h>
#include <string.h>

/* One open file: our sqlite3_file header, then the real file of the wrapped VFS. */
typedef struct FaultFile {
    sqlite3_file base;
    sqlite3_file *real;
} FaultFile;

static sqlite3_vfs *real_vfs;
static sqlite3_vfs fault_vfs;
static int armed_kind;
static int armed_nth;
static int calls;
static int fired;

static const char *const vfs_name = "tokenstore-faulty";

/* Whether this call of `kind` is the one to fail. */
static int should_fail(int kind) {
    int current = __atomic_load_n(&armed_kind, __ATOMIC_SEQ_CST);
    int counted = kind == current || (kind == TOKENSTORE_FAULT_WRITE && current == TOKENSTORE_FAULT_FULL);
    if (!counted) return 0;
    int n = __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST);
    if (n != __atomic_load_n(&armed_nth, __ATOMIC_SEQ_CST)) return 0;
    __atomic_add_fetch(&fired, 1, __ATOMIC_SEQ_CST);
    return 1;
}

static sqlite3_file *real_file(sqlite3_file *file) { return ((FaultFile *)file)->real; }

static int f_close(sqlite3_file *file) {
    sqlite3_file *real = real_file(file);
    int rc = real->pMethods ? real->pMethods->xClose(real) : SQLITE_OK;
    file->pMethods = 0;
    return rc;
}

static int f_read(sqlite3_file *file, void *buffer, int amount, sqlite3_int64 offset) {
    if (should_fail(TOKENSTORE_FAULT_READ)) return SQLITE_IOERR_READ;
    sqlite3_file *real = real_file(file);
    return real->pMethods->xRead(real, buffer, amount, offset);
}

static int f_write(sqlite3_file *file, const void *buffer, int amount, sqlite3_int64 offset) {
    if (should_fail(TOKENSTORE_FAULT_WRITE)) {
        return __atomic_load_n(&armed_kind, __ATOMIC_SEQ_CST) == TOKENSTORE_FAULT_FULL ? SQLITE_FULL : SQLITE_IOERR_WRITE;
    }
    sqlite3_file *real = real_file(file);
    return real->pMethods->xWrite(real, buffer, amount, offset);
}

static int f_truncate(sqlite3_file *file, sqlite3_int64 size) {
    sqlite3_file *real = real_file(file);
    return real->pMethods->xTruncate(real, size);
}

static int f_sync(sqlite3_file *file, int flags) {
    if (should_fail(TOKENSTORE_FAULT_SYNC)) return SQLITE_IOERR_FSYNC;
    sqlite3_file *real = real_file(file);
    return real->pMethods->xSync(real, flags);
}

static int f_file_size(sqlite3_file *file, sqlite3_int64 *size) {
    sqlite3_file *real = real_file(file);
    return real->pMethods->xFileSize(real, size);
}

static int f_lock(sqlite3_file *file, int level) {
    sqlite3_file *real = real_file(file);
    return real->pMethods->xLock(real, level);
}

static int f_unlock(sqlite3_file *file, int level) {
    sqlite3_file *real = real_file(file);
    return real->pMethods->xUnlock(real, level);
}

static int f_check_reserved_lock(sqlite3_file *file, int *out) {
    sqlite3_file *real = real_file(file);
    return real->pMethods->xCheckReservedLock(real, out);
}

static int f_file_control(sqlite3_file *file, int op, void *arg) {
    sqlite3_file *real = real_file(file);
    return real->pMethods->xFileControl(real, op, arg);
}

static int f_sector_size(sqlite3_file *file) {
    sqlite3_file *real = real_file(file);
    return real->pMethods->xSectorSize(real);
}

static int f_device_characteristics(sqlite3_file *file) {
    sqlite3_file *real = real_file(file);
    return real->pMethods->xDeviceCharacteristics(real);
}

static int f_shm_map(sqlite3_file *file, int region, int size, int extend, void volatile **out) {
    sqlite3_file *real = real_file(file);
    if (real->pMethods->iVersion < 2 || !real->pMethods->xShmMap) return SQLITE_IOERR_SHMMAP;
    return real->pMethods->xShmMap(real, region, size, extend, out);
}

static int f_shm_lock(sqlite3_file *file, int offset, int n, int flags) {
    sqlite3_file *real = real_file(file);
    return real->pMethods->xShmLock(real, offset, n, flags);
}

static void f_shm_barrier(sqlite3_file *file) {
    sqlite3_file *real = real_file(file);
    real->pMethods->xShmBarrier(real);
}

static int f_shm_unmap(sqlite3_file *file, int delete_flag) {
    sqlite3_file *real = real_file(file);
    return real->pMethods->xShmUnmap(real, delete_flag);
}

/* Memory-mapped reads would bypass xRead: refuse them (mmap_size is 0 by default anyway). */
static int f_fetch(sqlite3_file *file, sqlite3_int64 offset, int amount, void **out) {
    (void)file; (void)offset; (void)amount;
    *out = 0;
    return SQLITE_OK;
}

static int f_unfetch(sqlite3_file *file, sqlite3_int64 offset, void *pointer) {
    (void)file; (void)offset; (void)pointer;
    return SQLITE_OK;
}

static const sqlite3_io_methods fault_methods = {
    3, f_close, f_read, f_write, f_truncate, f_sync, f_file_size, f_lock, f_unlock, f_check_reserved_lock,
    f_file_control, f_sector_size, f_device_characteristics, f_shm_map, f_shm_lock, f_shm_barrier, f_shm_unmap,
    f_fetch, f_unfetch,
};

static int f_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *file, int flags, int *out_flags) {
    (void)vfs;
    FaultFile *wrapper = (FaultFile *)file;
    wrapper->real = (sqlite3_file *)(wrapper + 1);
    memset(wrapper->real, 0, (size_t)real_vfs->szOsFile);
    int rc = real_vfs->xOpen(real_vfs, name, wrapper->real, flags, out_flags);
    if (rc != SQLITE_OK) {
        if (wrapper->real->pMethods) wrapper->real->pMethods->xClose(wrapper->real);
        file->pMethods = 0;
        return rc;
    }
    file->pMethods = &fault_methods;
    return SQLITE_OK;
}

static int f_delete(sqlite3_vfs *vfs, const char *name, int sync_dir) {
    (void)vfs;
    return real_vfs->xDelete(real_vfs, name, sync_dir);
}

static int f_access(sqlite3_vfs *vfs, const char *name, int flags, int *out) {
    (void)vfs;
    return real_vfs->xAccess(real_vfs, name, flags, out);
}

static int f_full_pathname(sqlite3_vfs *vfs, const char *name, int size, char *out) {
    (void)vfs;
    return real_vfs->xFullPathname(real_vfs, name, size, out);
}

static int f_randomness(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    return real_vfs->xRandomness(real_vfs, size, out);
}

static int f_sleep(sqlite3_vfs *vfs, int microseconds) {
    (void)vfs;
    return real_vfs->xSleep(real_vfs, microseconds);
}

static int f_current_time(sqlite3_vfs *vfs, double *out) {
    (void)vfs;
    return real_vfs->xCurrentTime(real_vfs, out);
}

static int f_get_last_error(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    return real_vfs->xGetLastError ? real_vfs->xGetLastError(real_vfs, size, out) : 0;
}

static int f_current_time_int64(sqlite3_vfs *vfs, sqlite3_int64 *out) {
    (void)vfs;
    return real_vfs->xCurrentTimeInt64(real_vfs, out);
}

int tokenstore_faultvfs_register(void) {
    static int registered;
    if (__atomic_load_n(&registered, __ATOMIC_SEQ_CST)) return SQLITE_OK;
    int rc = sqlite3_initialize();
    if (rc != SQLITE_OK) return rc;
    if (sqlite3_vfs_find(vfs_name)) return SQLITE_OK;
    real_vfs = sqlite3_vfs_find("unix");
    if (!real_vfs) return SQLITE_ERROR;
    memset(&fault_vfs, 0, sizeof fault_vfs);
    fault_vfs.iVersion = 2;
    fault_vfs.szOsFile = (int)sizeof(FaultFile) + real_vfs->szOsFile;
    fault_vfs.mxPathname = real_vfs->mxPathname;
    fault_vfs.zName = vfs_name;
    fault_vfs.xOpen = f_open;
    fault_vfs.xDelete = f_delete;
    fault_vfs.xAccess = f_access;
    fault_vfs.xFullPathname = f_full_pathname;
    fault_vfs.xRandomness = f_randomness;
    fault_vfs.xSleep = f_sleep;
    fault_vfs.xCurrentTime = f_current_time;
    fault_vfs.xGetLastError = f_get_last_error;
    fault_vfs.xCurrentTimeInt64 = f_current_time_int64;
    rc = sqlite3_vfs_register(&fault_vfs, 0);
    if (rc == SQLITE_OK) __atomic_store_n(&registered, 1, __ATOMIC_SEQ_CST);
    return rc;
}

const char *tokenstore_faultvfs_name(void) { return vfs_name; }

void tokenstore_faultvfs_arm(int kind, int nth) {
    __atomic_store_n(&armed_kind, TOKENSTORE_FAULT_NONE, __ATOMIC_SEQ_CST);
    __atomic_store_n(&calls, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&fired, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&armed_nth, nth, __ATOMIC_SEQ_CST);
    __atomic_store_n(&armed_kind, kind, __ATOMIC_SEQ_CST);
}

void tokenstore_faultvfs_disarm(void) { __atomic_store_n(&armed_kind, TOKENSTORE_FAULT_NONE, __ATOMIC_SEQ_CST); }

int tokenstore_faultvfs_calls(void) { return __atomic_load_n(&calls, __ATOMIC_SEQ_CST); }

int tokenstore_faultvfs_fired(void) { return __atomic_load_n(&fired, __ATOMIC_SEQ_CST); }
