/* What the store's change watcher needs that Swift's Glibc module leaves out: an eventfd (the
 * watcher thread's wake-up) and utimensat with UTIME_NOW (a macro Swift cannot import). */
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/stat.h>

/* eventfd(2), non-blocking and close-on-exec: the in-process wake-up of a change watcher. */
static inline int tokenstore_wake_fd(void) {
    return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

/* Sets the modification time of `path` (not following a symlink) to now, changing nothing
 * else: after a commit that logged changes, the store's -wal gets an IN_ATTRIB event that
 * watching processes wake on (the commit is complete by then; the write of its frames may be
 * seen by a reader before the commit is). Returns 0, or -1 with errno (ENOENT: no -wal). */
static inline int tokenstore_touch_now(const char *path) {
    struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
    return utimensat(AT_FDCWD, path, now, AT_SYMLINK_NOFOLLOW);
}
