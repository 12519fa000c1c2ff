/* glibc's GNU extensions that Swift's Glibc module leaves out (it is built without
 * _GNU_SOURCE): close-on-exec descriptors made atomically, so a program spawned by another
 * thread never inherits a socket of the loopback listener, and closefrom for posix_spawn. */
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "peer_uid.h"

extern int accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);

/* accept4(2): the accepted socket made non-blocking and close-on-exec at once. */
static inline int tokenstore_accept_cloexec_nonblock(int fd) {
    return accept4(fd, (struct sockaddr *)0, (socklen_t *)0, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

/* posix_spawn_file_actions_addclosefrom_np (glibc 2.34+): the child closes every descriptor >= from. */
static inline int tokenstore_spawn_add_closefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

/* prctl(2) is variadic and does not import into Swift. PR_SET_DUMPABLE 0: no core dump of this
 * process, and other processes of the same user can no longer ptrace it or read its memory
 * through /proc/PID/mem (a process holding secrets in memory, such as tokenctl). */
static inline int tokenstore_set_not_dumpable(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

/* prctl(PR_GET_DUMPABLE): 1 when the process may dump core and be traced by its user, 0 when not. */
static inline int tokenstore_is_dumpable(void) {
    return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
}

/* prctl(PR_SET_NAME): names the calling thread (the kernel keeps the first 15 bytes). */
static inline int tokenstore_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

/* setrlimit(RLIMIT_CORE, {0, 0}): the kernel writes no core file of this process, and neither
 * may a child it starts (the hard limit cannot be raised again without privilege). */
static inline int tokenstore_disable_core_files(void) {
    struct rlimit none = {0, 0};
    return setrlimit(RLIMIT_CORE, &none);
}

#include "change_watch.h"
