/*
 * ts_store_open_with_options, ts_store_options_init and ts_store_access_policy: a store opened
 * with an access policy and an idle lock; and ts_store_key_slots, its key slots. Compiled by scripts/test-cabi through pkg-config against
 * the installed prefix (plain and under AddressSanitizer) and run under `env -i`:
 *
 *   test_options args STORE         no lock source on the bus: names that are not policies, a
 *                                   bad struct_size, lock_after_idle_ms out of range, NULL out
 *                                   (invalidInput, nothing opened: no file made at a new path);
 *                                   NULL options and afterFirstUnlock open STORE (policy
 *                                   "afterFirstUnlock"); whenUnlocked is lockSourceUnavailable, the
 *                                   record left afterFirstUnlock; userPresence:session:300 opens
 *                                   another store (polkit is asked at a read, not at open) whose
 *                                   read is refused with no polkit to ask (lockSourceUnavailable, or
 *                                   userPresenceDenied where a polkit answers); lock_after_idle_ms 300:
 *                                   calls keep the handle open, 800 ms idle lock it (storeLocked),
 *                                   ts_store_unlock reads again; a closed handle is storeClosed.
 *   test_options screensaver STORE  a screensaver stand-in (Tests/DBusMock/freedesktop_screensaver.py)
 *                                   owns org.freedesktop.ScreenSaver on the session bus, unlocked:
 *                                   whenUnlocked opens STORE (policy "whenUnlocked"); SetActive(true)
 *                                   locks the handle (storeLocked), SetActive(false) unlocks it; the
 *                                   policy is recorded: NULL options and afterFirstUnlock reopen it
 *                                   whenUnlocked.
 *   test_options slots TWO NEW      ts_store_key_slots: TWO was given a recovery slot by `tokenctl slot
 *                                   add recovery`: slots 1 "secret-service" and 2 "recovery", in id
 *                                   order, made within the last 10 minutes, the array NULL-terminated;
 *                                   NEW (made here) has one, "secret-service"; NULL out is invalidInput,
 *                                   a closed handle storeClosed; ts_key_slots_free(NULL) is ignored.
 *
 * Exit status 0 when every check passes; each failure is printed with its line.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <tokenstore.h>

static int failures = 0;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "test_options.c:%d: check failed: %s\n", __LINE__, #cond); \
            failures++;                                                               \
        }                                                                             \
    } while (0)

static const char *const app_id = "org.example.cabi";

static void sleep_ms(long ms) {
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
}

/* TS_ERROR with `code`, `*out` NULL, a message holding `wanted` (NULL: any) that does not repeat
 * the code; frees the error. */
static void expect_error(int line, int status, ts_error **err, ts_store *store, const char *code, const char *wanted) {
    int ok = status == TS_ERROR && store == NULL && *err != NULL;
    if (ok) {
        const char *message = ts_error_message(*err);
        ok = strcmp(ts_error_code(*err), code) == 0 && (wanted == NULL || strstr(message, wanted) != NULL) &&
             strstr(message, code) == NULL;
    }
    if (!ok) {
        fprintf(stderr, "test_options.c:%d: expected %s (%s), got status %d, %s: %s\n", line, code, wanted ? wanted : "",
                status, *err ? ts_error_code(*err) : "no error", *err ? ts_error_message(*err) : "");
        failures++;
    }
    ts_error_free(*err);
    *err = NULL;
}

static int open_with(const char *path, const char *policy, int64_t idle_ms, ts_store **store, ts_error **err) {
    ts_store_options options;
    ts_store_options_init(&options);
    options.access_policy = policy;
    options.lock_after_idle_ms = idle_ms;
    *store = NULL;
    return ts_store_open_with_options(path, app_id, &options, store, err);
}

/* Opening `path` with `policy` and `idle_ms` fails with `code`. */
static void expect_refused(int line, const char *path, const char *policy, int64_t idle_ms, const char *code,
                           const char *wanted) {
    ts_store *store = NULL;
    ts_error *err = NULL;
    int status = open_with(path, policy, idle_ms, &store, &err);
    expect_error(line, status, &err, store, code, wanted);
    ts_store_close(store);
}

/* The store's policy name is `wanted`. */
static void expect_policy(int line, ts_store *store, const char *wanted) {
    char *name = NULL;
    ts_error *err = NULL;
    int status = ts_store_access_policy(store, &name, &err);
    if (status != TS_OK || name == NULL || strcmp(name, wanted) != 0) {
        fprintf(stderr, "test_options.c:%d: expected the policy %s, got status %d, %s (%s)\n", line, wanted, status,
                name ? name : "NULL", err ? ts_error_message(err) : "");
        failures++;
    }
    ts_error_free(err);
    ts_string_free(name);
}

/* Reading the row gives TS_OK (`code` NULL) or TS_ERROR with `code`. */
static void expect_read(int line, ts_store *store, const char *code) {
    uint8_t *bytes = NULL;
    size_t length = 0;
    ts_error *err = NULL;
    int status = ts_item_get(store, NULL, "policy-row", TS_KIND_GENERIC, &bytes, &length, &err);
    int ok = code == NULL ? status == TS_OK && length == 5 && memcmp(bytes, "kept!", 5) == 0
                          : status == TS_ERROR && err != NULL && strcmp(ts_error_code(err), code) == 0;
    if (!ok) {
        fprintf(stderr, "test_options.c:%d: read: expected %s, got status %d %s\n", line, code ? code : "the row", status,
                err ? ts_error_code(err) : "");
        failures++;
    }
    ts_error_free(err);
    ts_bytes_free(bytes, length);
}

static int is_locked(ts_store *store) {
    int locked = -1;
    ts_error *err = NULL;
    CHECK(ts_store_is_locked(store, &locked, &err) == TS_OK);
    ts_error_free(err);
    return locked;
}

static int test_args(const char *path) {
    ts_store *store = NULL;
    ts_error *err = NULL;
    char absent[4200];
    snprintf(absent, sizeof absent, "%s.absent", path);
    struct stat info;

    /* Refused before anything is opened: no file at a new path. */
    const char *bad[] = {"", "sometimes", "whenunlocked", "userPresence:session", "userPresence:session:0",
                         "userPresence:session:-5", "userPresence:session:9999999999", "userPresence:forever:5",
                         "afterFirstUnlock:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_refused(__LINE__, absent, bad[i], 0, "invalidInput", "not a policy name");
    expect_refused(__LINE__, absent, "\xff\xfe", 0, "invalidInput", "UTF-8");
    expect_refused(__LINE__, absent, NULL, -1, "invalidInput", "lock_after_idle_ms");
    expect_refused(__LINE__, absent, NULL, INT64_C(365) * 86400000 + 1, "invalidInput", "lock_after_idle_ms");
    ts_store_options options;
    ts_store_options_init(&options);
    CHECK(options.struct_size == sizeof options && options.access_policy == NULL && options.lock_after_idle_ms == 0);
    ts_store_options_init(NULL); /* ignored */
    options.struct_size = sizeof options - 1;
    int status = ts_store_open_with_options(absent, app_id, &options, &store, &err);
    expect_error(__LINE__, status, &err, store, "invalidInput", "struct_size");
    options.struct_size = sizeof options + 8;
    status = ts_store_open_with_options(absent, app_id, &options, &store, &err);
    expect_error(__LINE__, status, &err, store, "invalidInput", "newer");
    ts_store_options_init(&options);
    CHECK(ts_store_open_with_options(absent, app_id, &options, NULL, &err) == TS_ERROR);
    CHECK(err != NULL && strcmp(ts_error_code(err), "invalidInput") == 0);
    ts_error_free(err);
    err = NULL;
    status = ts_store_open_with_options(absent, NULL, &options, &store, &err);
    expect_error(__LINE__, status, &err, store, "invalidInput", NULL);
    /* A policy this process cannot enforce, for a store that does not exist yet: nothing made. */
    options.access_policy = "whenUnlocked";
    status = ts_store_open_with_options(absent, app_id, &options, &store, &err);
    expect_error(__LINE__, status, &err, store, "lockSourceUnavailable", "lock");
    options.access_policy = NULL;
    CHECK(stat(absent, &info) != 0);

    /* NULL options: ts_store_open; a new store records afterFirstUnlock. */
    CHECK(ts_store_open_with_options(path, app_id, NULL, &store, &err) == TS_OK);
    if (store == NULL) {
        fprintf(stderr, "  open: %s: %s\n", ts_error_code(err), ts_error_message(err));
        return 1;
    }
    expect_policy(__LINE__, store, "afterFirstUnlock");
    CHECK(ts_item_set(store, NULL, "policy-row", TS_KIND_GENERIC, (const uint8_t *)"kept!", 5, &err) == TS_OK);
    CHECK(ts_store_access_policy(store, NULL, &err) == TS_ERROR);
    CHECK(err != NULL && strcmp(ts_error_code(err), "invalidInput") == 0);
    ts_error_free(err);
    err = NULL;
    ts_store_close(store);
    char *name = NULL;
    CHECK(ts_store_access_policy(store, &name, &err) == TS_ERROR && name == NULL);
    CHECK(err != NULL && strcmp(ts_error_code(err), "storeClosed") == 0);
    ts_error_free(err);
    err = NULL;

    /* Stronger policies this process cannot enforce: refused, the record as it was. */
    expect_refused(__LINE__, path, "whenUnlocked", 0, "lockSourceUnavailable", "lock");
    CHECK(open_with(path, "afterFirstUnlock", 0, &store, &err) == TS_OK);
    if (store == NULL) return 1;
    expect_policy(__LINE__, store, "afterFirstUnlock");
    expect_read(__LINE__, store, NULL);
    ts_store_close(store);

    /* userPresence opens (polkit is asked at a read, not at open), here on another store: with no
     * polkit to ask (no system bus under env -i, or the test app's action not installed) its row is
     * refused, never served. */
    char other[4096];
    snprintf(other, sizeof other, "%s.presence.sqlite", path);
    CHECK(open_with(other, "userPresence:session:300", 0, &store, &err) == TS_OK);
    if (store == NULL) return 1;
    expect_policy(__LINE__, store, "userPresence:session:300");
    CHECK(ts_item_set(store, NULL, "policy-row", TS_KIND_GENERIC, (const uint8_t *)"kept!", 5, &err) == TS_OK);
    uint8_t *gated = NULL;
    size_t gated_length = 0;
    int gated_status = ts_item_get(store, NULL, "policy-row", TS_KIND_GENERIC, &gated, &gated_length, &err);
    CHECK(gated_status == TS_ERROR && gated == NULL && err != NULL &&
          (strcmp(ts_error_code(err), "lockSourceUnavailable") == 0 || strcmp(ts_error_code(err), "userPresenceDenied") == 0));
    ts_error_free(err);
    err = NULL;
    ts_bytes_free(gated, gated_length);
    ts_store_close(store);

    /* The idle lock: calls every 100 ms keep it open; 800 ms without one lock it. */
    CHECK(open_with(path, NULL, 300, &store, &err) == TS_OK);
    if (store == NULL) return 1;
    for (int i = 0; i < 5; i++) {
        expect_read(__LINE__, store, NULL);
        sleep_ms(100);
    }
    CHECK(is_locked(store) == 0);
    sleep_ms(800);
    CHECK(is_locked(store) == 1);
    expect_read(__LINE__, store, "storeLocked");
    CHECK(ts_store_unlock(store, 0, &err) == TS_OK);
    expect_read(__LINE__, store, NULL);
    ts_store_close(store);
    /* Without the option the same store stays open. */
    CHECK(open_with(path, NULL, 0, &store, &err) == TS_OK);
    if (store == NULL) return 1;
    expect_read(__LINE__, store, NULL);
    sleep_ms(800);
    CHECK(is_locked(store) == 0);
    expect_read(__LINE__, store, NULL);
    ts_store_close(store);
    ts_error_free(err);
    return failures;
}

/* Sets the stand-in screensaver's state (it emits ActiveChanged). */
static void screensaver(int active) {
    char command[256];
    snprintf(command, sizeof command,
             "/usr/bin/gdbus call --session --dest org.freedesktop.ScreenSaver --object-path /org/freedesktop/ScreenSaver "
             "--method org.freedesktop.ScreenSaver.SetActive %s >/dev/null",
             active ? "true" : "false");
    CHECK(system(command) == 0);
}

/* Waits up to 2 s for the handle's lock state to become `locked`. */
static int wait_locked(ts_store *store, int locked) {
    for (int i = 0; i < 200; i++) {
        if (is_locked(store) == locked) return 1;
        sleep_ms(10);
    }
    return 0;
}

static int test_screensaver(const char *path) {
    ts_store *store = NULL;
    ts_error *err = NULL;
    CHECK(open_with(path, "whenUnlocked", 0, &store, &err) == TS_OK);
    if (store == NULL) {
        fprintf(stderr, "  open whenUnlocked: %s: %s\n", ts_error_code(err), ts_error_message(err));
        ts_error_free(err);
        return 1;
    }
    expect_policy(__LINE__, store, "whenUnlocked");
    CHECK(ts_item_set(store, NULL, "policy-row", TS_KIND_GENERIC, (const uint8_t *)"kept!", 5, &err) == TS_OK);
    expect_read(__LINE__, store, NULL);
    screensaver(1);
    CHECK(wait_locked(store, 1));
    expect_read(__LINE__, store, "storeLocked");
    screensaver(0);
    CHECK(wait_locked(store, 0));
    expect_read(__LINE__, store, NULL);
    ts_store_close(store);

    /* Recorded: a plain open and a weaker policy get whenUnlocked. */
    CHECK(ts_store_open_with_options(path, app_id, NULL, &store, &err) == TS_OK);
    if (store) expect_policy(__LINE__, store, "whenUnlocked");
    ts_store_close(store);
    CHECK(open_with(path, "afterFirstUnlock", 0, &store, &err) == TS_OK);
    if (store) {
        expect_policy(__LINE__, store, "whenUnlocked");
        expect_read(__LINE__, store, NULL);
    }
    ts_store_close(store);
    ts_error_free(err);
    return failures;
}

/* `store`'s slots are `kinds` (ids 1, 2, ...), each made within the last 10 minutes. */
static void expect_slots(int line, ts_store *store, const char *const *kinds, size_t count) {
    ts_key_slot **slots = NULL;
    ts_error *err = NULL;
    int status = ts_store_key_slots(store, &slots, &err);
    if (status != TS_OK || slots == NULL) {
        fprintf(stderr, "test_options.c:%d: ts_store_key_slots: status %d %s\n", line, status, err ? ts_error_message(err) : "");
        failures++;
        ts_error_free(err);
        return;
    }
    int64_t now = (int64_t)time(NULL);
    size_t found = 0;
    for (; slots[found] != NULL; found++) {
        const ts_key_slot *slot = slots[found];
        int ok = found < count && slot->struct_size == sizeof(ts_key_slot) && slot->id == (int64_t)found + 1 &&
                 slot->kind != NULL && strcmp(slot->kind, kinds[found]) == 0 && slot->created_at <= now + 1 &&
                 slot->created_at > now - 600;
        if (!ok) {
            fprintf(stderr, "test_options.c:%d: slot %zu: id %lld kind %s created %lld (now %lld), expected %s\n", line, found,
                    (long long)slot->id, slot->kind ? slot->kind : "NULL", (long long)slot->created_at, (long long)now,
                    found < count ? kinds[found] : "no more slots");
            failures++;
        }
    }
    if (found != count) {
        fprintf(stderr, "test_options.c:%d: %zu slots, expected %zu\n", line, found, count);
        failures++;
    }
    ts_key_slots_free(slots);
}

static int test_slots(const char *two, const char *path) {
    ts_store *store = NULL;
    ts_error *err = NULL;
    CHECK(ts_store_open(two, app_id, &store, &err) == TS_OK);
    if (store == NULL) return 1;
    static const char *const both[] = {"secret-service", "recovery"};
    expect_slots(__LINE__, store, both, 2);
    CHECK(ts_store_key_slots(store, NULL, &err) == TS_ERROR);
    CHECK(err != NULL && strcmp(ts_error_code(err), "invalidInput") == 0);
    ts_error_free(err);
    err = NULL;
    ts_store_close(store);
    ts_key_slot **slots = NULL;
    CHECK(ts_store_key_slots(store, &slots, &err) == TS_ERROR && slots == NULL);
    CHECK(err != NULL && strcmp(ts_error_code(err), "storeClosed") == 0);
    ts_error_free(err);
    err = NULL;
    ts_key_slots_free(NULL);

    CHECK(ts_store_open(path, app_id, &store, &err) == TS_OK);
    if (store == NULL) return 1;
    static const char *const one[] = {"secret-service"};
    expect_slots(__LINE__, store, one, 1);
    ts_store_close(store);
    return failures;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "slots") == 0) return test_slots(argv[2], argv[3]) == 0 ? 0 : 1;
    if (argc == 3 && strcmp(argv[1], "args") == 0) return test_args(argv[2]) == 0 ? 0 : 1;
    if (argc == 3 && strcmp(argv[1], "screensaver") == 0) return test_screensaver(argv[2]) == 0 ? 0 : 1;
    fprintf(stderr, "usage: test_options args|screensaver STORE | slots TWO NEW\n");
    return 2;
}
