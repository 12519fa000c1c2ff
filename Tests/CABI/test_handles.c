/*
 * The C ABI's handles and buffers under misuse (review N5, N10, N6), compiled and run by
 * scripts/test-cabi like test_tokenstore.c (plain and under AddressSanitizer).
 *
 *   test_handles race   STORE [ROUNDS]   4 threads call ts_item_get in a loop while the main
 *                                        thread closes the store after 0.5-10 ms: no crash,
 *                                        every failing call is storeClosed; the same with
 *                                        ts_session_resume and ts_session_free; stale handles
 *   test_handles bytes  STORE            ts_bytes_free with a wrong length, a foreign pointer,
 *                                        twice or after a write in front of the buffer aborts
 *                                        with a message; the buffers are
 *                                        excluded from core dumps (VmFlags dd)
 *   test_handles harden                  ts_harden_process: not dumpable, RLIMIT_CORE 0 0
 *   test_handles watch  STORE            ts_store_watch: a second connection's sign-in and
 *                                        logout arrive as ACCOUNT_ADDED / ACCOUNT_REMOVED (on
 *                                        the watcher thread), none after ts_watch_free;
 *                                        ts_store_accounts, ts_store_account_status
 *
 * Exit status 0 when every check passes; each failure is printed with its line.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tokenstore.h>

static int failures = 0;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "test_handles.c:%d: check failed: %s\n", __LINE__, #cond); \
            failures++;                                                               \
        }                                                                             \
    } while (0)

static ts_store *open_store(const char *path) {
    ts_store *store = NULL;
    ts_error *err = NULL;
    if (ts_store_open(path, "org.example.cabi.handles", &store, &err) != TS_OK) {
        fprintf(stderr, "ts_store_open: %s: %s\n", ts_error_code(err), ts_error_message(err));
        ts_error_free(err);
        exit(1);
    }
    return store;
}

/* ---- race ----------------------------------------------------------------------------- */

struct reader {
    pthread_t thread;
    ts_store *store;
    ts_session *session; /* set: the reader calls ts_session_resume instead of ts_item_get */
    long reads;
    long closed;      /* calls that failed with storeClosed */
    long other;       /* calls that failed otherwise, or read a wrong value */
    char other_code[64];
};

static void *read_until_closed(void *argument) {
    struct reader *reader = argument;
    for (;;) {
        uint8_t *bytes = NULL;
        size_t length = 0;
        ts_error *err = NULL;
        if (reader->session) {
            int pending = -1;
            int status = ts_session_resume(reader->session, &pending, &err);
            if (status == TS_OK && pending == 0) {
                reader->reads++;
                continue;
            }
            if (status == TS_OK) reader->other++;
        }
        int status = reader->session ? TS_ERROR
                                     : ts_item_get(reader->store, NULL, "race", TS_KIND_GENERIC, &bytes, &length, &err);
        if (status == TS_OK) {
            if (length != 10 || memcmp(bytes, "race-value", 10) != 0) reader->other++;
            ts_bytes_free(bytes, length);
            reader->reads++;
            continue;
        }
        if (status == TS_ERROR && err && strcmp(ts_error_code(err), "storeClosed") == 0) {
            reader->closed++;
        } else {
            reader->other++;
            snprintf(reader->other_code, sizeof reader->other_code, "%s", err ? ts_error_code(err) : "status");
        }
        ts_error_free(err);
        return NULL;
    }
}

static int test_race(const char *path, int rounds) {
    ts_store *store = open_store(path);
    CHECK(ts_item_set(store, NULL, "race", TS_KIND_GENERIC, (const uint8_t *)"race-value", 10, NULL) == TS_OK);
    ts_store_close(store);
    unsigned seed = 24;
    long reads = 0, closed = 0, other = 0;
    for (int round = 0; round < rounds; round++) {
        enum { readers = 4 };
        struct reader reader[readers];
        store = open_store(path);
        for (int i = 0; i < readers; i++) {
            memset(&reader[i], 0, sizeof reader[i]);
            reader[i].store = store;
            CHECK(pthread_create(&reader[i].thread, NULL, read_until_closed, &reader[i]) == 0);
        }
        struct timespec pause = {0, 500000 + (long)(rand_r(&seed) % 9500) * 1000};
        nanosleep(&pause, NULL);
        ts_store_close(store);
        ts_store_close(store); /* closing twice is ignored */
        for (int i = 0; i < readers; i++) {
            pthread_join(reader[i].thread, NULL);
            reads += reader[i].reads;
            closed += reader[i].closed;
            other += reader[i].other;
            if (reader[i].other) fprintf(stderr, "  round %d: a call failed with %s\n", round, reader[i].other_code);
        }
        /* The closed handle stays refused: storeClosed, not a crash. */
        ts_error *err = NULL;
        CHECK(ts_item_delete(store, NULL, "race", TS_KIND_GENERIC, &err) == TS_ERROR);
        CHECK(err && strcmp(ts_error_code(err), "storeClosed") == 0);
        ts_error_free(err);
    }
    CHECK(other == 0);
    CHECK(closed == 4L * rounds);

    /* The same with a session freed under readers (ts_session_resume: nothing queued, no network). */
    long session_calls = 0, session_closed = 0, session_other = 0;
    for (int round = 0; round < rounds / 3; round++) {
        enum { readers = 4 };
        struct reader reader[readers];
        store = open_store(path);
        ts_session *session = NULL;
        CHECK(ts_session_new(store, "http://127.0.0.1:9/", "tokenstore-test", &session, NULL) == TS_OK);
        ts_store_close(store); /* the session keeps the store open */
        for (int i = 0; i < readers; i++) {
            memset(&reader[i], 0, sizeof reader[i]);
            reader[i].session = session;
            CHECK(pthread_create(&reader[i].thread, NULL, read_until_closed, &reader[i]) == 0);
        }
        struct timespec pause = {0, 500000 + (long)(rand_r(&seed) % 9500) * 1000};
        nanosleep(&pause, NULL);
        ts_session_free(session);
        for (int i = 0; i < readers; i++) {
            pthread_join(reader[i].thread, NULL);
            session_calls += reader[i].reads;
            session_closed += reader[i].closed;
            session_other += reader[i].other;
            if (reader[i].other) fprintf(stderr, "  session round %d: a call failed with %s\n", round, reader[i].other_code);
        }
    }
    CHECK(session_other == 0);
    CHECK(session_closed == 4L * (rounds / 3));

    /* A session outlives a closed store handle; a freed session is refused too. */
    store = open_store(path);
    ts_session *session = NULL;
    CHECK(ts_session_new(store, "http://127.0.0.1:9/", "tokenstore-test", &session, NULL) == TS_OK);
    ts_store_close(store);
    ts_error *err = NULL;
    ts_session *late = NULL;
    CHECK(ts_session_new(store, "http://127.0.0.1:9/", "tokenstore-test", &late, &err) == TS_ERROR);
    CHECK(err && strcmp(ts_error_code(err), "storeClosed") == 0 && late == NULL);
    ts_error_free(err);
    err = NULL;
    ts_session_free(session);
    ts_session_free(session);
    CHECK(ts_session_resume(session, NULL, &err) == TS_ERROR);
    CHECK(err && strcmp(ts_error_code(err), "storeClosed") == 0);
    ts_error_free(err);
    err = NULL;
    /* A session handle is not a store handle. */
    store = open_store(path);
    CHECK(ts_session_new(store, "http://127.0.0.1:9/", "tokenstore-test", &session, NULL) == TS_OK);
    CHECK(ts_item_delete((ts_store *)session, NULL, "race", TS_KIND_GENERIC, &err) == TS_ERROR);
    CHECK(err && strcmp(ts_error_code(err), "invalidInput") == 0);
    ts_error_free(err);
    ts_session_free(session);
    ts_store_close(store);
    printf("METRIC c_close_race rounds=%d reads=%ld store_closed=%ld other=%ld session_rounds=%d session_calls=%ld "
           "session_closed=%ld session_other=%ld\n", rounds, reads, closed, other, rounds / 3, session_calls,
           session_closed, session_other);
    return failures;
}

/* ---- bytes ---------------------------------------------------------------------------- */

/* Runs `misuse` in a child: true when it died of SIGABRT with "ts_bytes_free" on stderr. */
static int aborts_with_message(void (*misuse)(void *), void *argument) {
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) return 0;
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        dup2(pipe_fds[1], 2);
        close(pipe_fds[0]);
        misuse(argument);
        _exit(0); /* not detected */
    }
    close(pipe_fds[1]);
    char text[512] = {0};
    size_t used = 0;
    ssize_t got;
    while (used < sizeof text - 1 && (got = read(pipe_fds[0], text + used, sizeof text - 1 - used)) > 0) used += (size_t)got;
    close(pipe_fds[0]);
    int status = 0;
    waitpid(child, &status, 0);
    int ok = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(text, "libtokenstore: ts_bytes_free:") != NULL;
    if (!ok) fprintf(stderr, "  child status %d, stderr: %s\n", status, text);
    return ok;
}

struct buffer { uint8_t *bytes; size_t length; };

static void free_with_wrong_length(void *argument) {
    struct buffer *buffer = argument;
    ts_bytes_free(buffer->bytes, buffer->length + 1);
}

static void free_twice(void *argument) {
    struct buffer *buffer = argument;
    ts_bytes_free(buffer->bytes, buffer->length);
    ts_bytes_free(buffer->bytes, buffer->length);
}

static void free_after_underflow(void *argument) {
    struct buffer *buffer = argument;
    buffer->bytes[-16] ^= 0x01; /* a write in front of the bytes: the header's magic */
    ts_bytes_free(buffer->bytes, buffer->length);
}

static void free_foreign(void *argument) {
    (void)argument;
    uint8_t *foreign = malloc(64);
    memset(foreign, 0x5a, 64);
    ts_bytes_free(foreign + 16, 16);
}

/* True when the mapping holding `address` in /proc/self/smaps has VmFlags "dd" (MADV_DONTDUMP). */
static int excluded_from_dumps(const void *address) {
    FILE *smaps = fopen("/proc/self/smaps", "r");
    if (!smaps) return 0;
    char line[512];
    int inside = 0, found = 0;
    uintptr_t target = (uintptr_t)address;
    while (fgets(line, sizeof line, smaps)) {
        unsigned long start, end;
        if (sscanf(line, "%lx-%lx ", &start, &end) == 2) { /* a mapping's first line */
            inside = target >= start && target < end;
        } else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            found = strstr(line, " dd") != NULL;
            break;
        }
    }
    fclose(smaps);
    return found;
}

static int test_bytes(const char *path) {
    ts_store *store = open_store(path);
    CHECK(ts_item_set(store, NULL, "bytes", TS_KIND_GENERIC, (const uint8_t *)"bytes-value", 11, NULL) == TS_OK);
    struct buffer buffer = {NULL, 0};
    CHECK(ts_item_get(store, NULL, "bytes", TS_KIND_GENERIC, &buffer.bytes, &buffer.length, NULL) == TS_OK);
    CHECK(buffer.length == 11);
    CHECK(excluded_from_dumps(buffer.bytes));
    CHECK(aborts_with_message(free_with_wrong_length, &buffer));
    CHECK(aborts_with_message(free_twice, &buffer));
    CHECK(aborts_with_message(free_foreign, NULL));
    CHECK(aborts_with_message(free_after_underflow, &buffer));
    ts_bytes_free(buffer.bytes, buffer.length); /* the right length: fine (the children's frees were theirs) */
    ts_store_close(store);
    return failures;
}

/* ---- harden --------------------------------------------------------------------------- */

static int test_harden(void) {
    CHECK(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 1);
    ts_error *err = NULL;
    CHECK(ts_harden_process(&err) == TS_OK && err == NULL);
    CHECK(ts_harden_process(NULL) == TS_OK); /* again: harmless */
    CHECK(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0);
    struct rlimit core = {1, 1};
    CHECK(getrlimit(RLIMIT_CORE, &core) == 0 && core.rlim_cur == 0 && core.rlim_max == 0);
    return failures;
}

/* ---- watch ---------------------------------------------------------------------------- */

struct seen {
    pthread_mutex_t lock;
    int added, removed, locked, unlocked, other, on_caller;
    pthread_t caller;
};

static void on_change(const ts_change *change, void *user_data) {
    struct seen *seen = user_data;
    pthread_mutex_lock(&seen->lock);
    if (pthread_equal(pthread_self(), seen->caller)) seen->on_caller++;
    if (change->kind == TS_CHANGE_STORE_LOCKED || change->kind == TS_CHANGE_STORE_UNLOCKED) {
        if (change->account || change->user_id) seen->other++; /* nothing named */
        else if (change->kind == TS_CHANGE_STORE_LOCKED) seen->locked++;
        else seen->unlocked++;
    } else if (change->struct_size >= sizeof *change && change->account && strcmp(change->account, "watched") == 0
        && change->service && strcmp(change->service, "auth0") == 0 && change->user_id == NULL) {
        if (change->kind == TS_CHANGE_ACCOUNT_ADDED) seen->added++;
        else if (change->kind == TS_CHANGE_ACCOUNT_REMOVED) seen->removed++;
        else seen->other++;
    } else {
        seen->other++;
    }
    pthread_mutex_unlock(&seen->lock);
}

static int wait_for(struct seen *seen, int *counter, int wanted) {
    for (int i = 0; i < 5000; i++) {
        pthread_mutex_lock(&seen->lock);
        int value = *counter;
        pthread_mutex_unlock(&seen->lock);
        if (value >= wanted) return 1;
        struct timespec pause = {0, 1000000L};
        nanosleep(&pause, NULL);
    }
    return 0;
}

static int test_watch(const char *path) {
    ts_store *store = open_store(path);
    ts_store *other = open_store(path); /* a second connection: its commits reach the first only through the file */
    ts_error *err = NULL;
    ts_watch *watch = NULL;
    struct seen seen;
    memset(&seen, 0, sizeof seen);
    pthread_mutex_init(&seen.lock, NULL);
    seen.caller = pthread_self();
    CHECK(ts_store_watch(store, NULL, &seen, &watch, &err) == TS_ERROR && watch == NULL);
    ts_error_free(err);
    err = NULL;
    CHECK(ts_store_watch(store, on_change, &seen, &watch, &err) == TS_OK && watch != NULL);
    CHECK(ts_item_set(other, NULL, "watched", TS_KIND_REFRESH_TOKEN, (const uint8_t *)"rt", 2, &err) == TS_OK);
    CHECK(wait_for(&seen, &seen.added, 1));
    char **accounts = NULL;
    CHECK(ts_store_accounts(store, &accounts, &err) == TS_OK && accounts != NULL);
    CHECK(accounts && accounts[0] && strcmp(accounts[0], "watched") == 0 && accounts[1] == NULL);
    ts_strings_free(accounts);
    ts_strings_free(NULL);
    int signed_in = -1;
    char *user_id = (char *)"unchanged";
    CHECK(ts_store_account_status(store, "watched", &user_id, &signed_in, &err) == TS_OK);
    CHECK(signed_in == 1 && user_id == NULL);
    CHECK(ts_item_delete(other, NULL, "watched", TS_KIND_REFRESH_TOKEN, &err) == TS_OK);
    CHECK(wait_for(&seen, &seen.removed, 1));
    CHECK(ts_store_account_status(store, "watched", NULL, &signed_in, &err) == TS_OK && signed_in == 0);
    CHECK(ts_store_lock(store, 0, &err) == TS_OK && wait_for(&seen, &seen.locked, 1));
    CHECK(ts_store_unlock(store, 0, &err) == TS_OK && wait_for(&seen, &seen.unlocked, 1));
    ts_watch_free(watch);
    ts_watch_free(watch); /* twice: ignored */
    ts_watch_free(NULL);
    CHECK(ts_item_set(other, NULL, "watched", TS_KIND_REFRESH_TOKEN, (const uint8_t *)"rt", 2, &err) == TS_OK);
    struct timespec pause = {0, 300000000L};
    nanosleep(&pause, NULL);
    pthread_mutex_lock(&seen.lock);
    CHECK(seen.added == 1 && seen.removed == 1 && seen.locked == 1 && seen.unlocked == 1 && seen.other == 0
          && seen.on_caller == 0);
    pthread_mutex_unlock(&seen.lock);
    ts_store_close(other);
    ts_store_close(store);
    return failures;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "race") == 0) return test_race(argv[2], argc >= 4 ? atoi(argv[3]) : 150) ? 1 : 0;
    if (argc >= 3 && strcmp(argv[1], "bytes") == 0) return test_bytes(argv[2]) ? 1 : 0;
    if (argc >= 2 && strcmp(argv[1], "harden") == 0) return test_harden() ? 1 : 0;
    if (argc >= 3 && strcmp(argv[1], "watch") == 0) return test_watch(argv[2]) ? 1 : 0;
    fprintf(stderr, "usage: test_handles race|bytes|harden|watch ...\n");
    return 64;
}
