/* crashshim: an LD_PRELOAD library that counts a process's state-changing system calls in
 * process-wide order and, when asked, kills the process with SIGKILL just before the Nth one
 * (Tests/tokenctlTests/CrashEverySyscallTests.swift, RELIABILITY.md "crash_every_syscall").
 *
 * Counted (each call, whatever thread makes it): write, pwrite, pwrite64, writev, pwritev,
 * fsync, fdatasync, send, sendto, sendmsg, unlink, unlinkat, rename, renameat, renameat2,
 * ftruncate, ftruncate64, truncate. A write to standard input, output or error (fds 0-2) is
 * not counted: it changes nothing a crash could leave half done.
 *
 * Environment:
 *   TOKENSTORE_CRASH_COUNTER=PATH  the count is kept in this file (8 bytes, shared mapping),
 *                                  so it can be read after the process died, however it died
 *   TOKENSTORE_CRASH_AT=N          SIGKILL before the Nth counted call (1-based); 0 or unset:
 *                                  only count
 *
 * Built by the test with the system's C compiler (cc -shared -fPIC); not part of the library.
 * strace's inject=…:when=N counts per thread, which never reaches a later thread's first
 * calls (a renewal commits on another thread than the one that opened the store); this
 * counts in one process-wide sequence, with an atomic counter.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static _Atomic int64_t local_counter;
static _Atomic int64_t *counter = &local_counter;
static int64_t crash_at;

__attribute__((constructor)) static void crashshim_init(void) {
    const char *at = getenv("TOKENSTORE_CRASH_AT");
    if (at) crash_at = strtoll(at, NULL, 10);
    const char *path = getenv("TOKENSTORE_CRASH_COUNTER");
    if (!path || !*path) return;
    /* Raw system calls: the shim's own set-up is not counted. */
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    if (syscall(SYS_ftruncate, fd, (long)sizeof(int64_t)) == 0) {
        void *shared = mmap(NULL, sizeof(int64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (shared != MAP_FAILED) {
            counter = shared;
            atomic_store(counter, 0);
        }
    }
    syscall(SYS_close, fd);
}

/* One state-changing call is about to be made: count it, and die first when it is the Nth. */
static void crashshim_point(void) {
    int64_t n = atomic_fetch_add(counter, 1) + 1;
    if (crash_at > 0 && n == crash_at) {
        kill(getpid(), SIGKILL);
        for (;;) pause();
    }
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

ssize_t write(int fd, const void *buf, size_t count) {
    if (fd > 2) crashshim_point();
    return NEXT(write)(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    crashshim_point();
    return NEXT(pwrite)(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t offset) {
    crashshim_point();
    return NEXT(pwrite64)(fd, buf, count, offset);
}

ssize_t writev(int fd, const struct iovec *iov, int count) {
    if (fd > 2) crashshim_point();
    return NEXT(writev)(fd, iov, count);
}

ssize_t pwritev(int fd, const struct iovec *iov, int count, off_t offset) {
    crashshim_point();
    return NEXT(pwritev)(fd, iov, count, offset);
}

int fsync(int fd) {
    crashshim_point();
    return NEXT(fsync)(fd);
}

int fdatasync(int fd) {
    crashshim_point();
    return NEXT(fdatasync)(fd);
}

ssize_t send(int fd, const void *buf, size_t length, int flags) {
    crashshim_point();
    return NEXT(send)(fd, buf, length, flags);
}

ssize_t sendto(int fd, const void *buf, size_t length, int flags, const struct sockaddr *to, socklen_t tolen) {
    crashshim_point();
    return NEXT(sendto)(fd, buf, length, flags, to, tolen);
}

ssize_t sendmsg(int fd, const struct msghdr *message, int flags) {
    crashshim_point();
    return NEXT(sendmsg)(fd, message, flags);
}

int unlink(const char *path) {
    crashshim_point();
    return NEXT(unlink)(path);
}

int unlinkat(int dirfd, const char *path, int flags) {
    crashshim_point();
    return NEXT(unlinkat)(dirfd, path, flags);
}

int rename(const char *old, const char *new) {
    crashshim_point();
    return NEXT(rename)(old, new);
}

int renameat(int olddirfd, const char *old, int newdirfd, const char *new) {
    crashshim_point();
    return NEXT(renameat)(olddirfd, old, newdirfd, new);
}

int renameat2(int olddirfd, const char *old, int newdirfd, const char *new, unsigned int flags) {
    crashshim_point();
    return NEXT(renameat2)(olddirfd, old, newdirfd, new, flags);
}

int ftruncate(int fd, off_t length) {
    crashshim_point();
    return NEXT(ftruncate)(fd, length);
}

int ftruncate64(int fd, off64_t length) {
    crashshim_point();
    return NEXT(ftruncate64)(fd, length);
}

int truncate(const char *path, off_t length) {
    crashshim_point();
    return NEXT(truncate)(path, length);
}
