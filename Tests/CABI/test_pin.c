/*
 * ts_store_open_with_pin: a store opened with its TPM + PIN key slot, the PIN handed over as
 * bytes. Compiled by scripts/test-cabi through pkg-config against the installed prefix (plain and
 * under AddressSanitizer) and run under `env -i`:
 *
 *   test_pin args STORE   the keyring store STORE is made with a row ("pin-row"); then, with no
 *                         TPM asked: a NULL PIN with a length, PINs of 0, 3 and 65 bytes, NULL
 *                         out, NULL app id, a non-UTF-8 path (invalidInput); STORE has no PIN
 *                         slot (wrongKeyProvider, a hint naming ts_store_open); a path where no
 *                         store is (invalidInput, no file made). Every failure leaves `*out` NULL and the row readable.
 *   test_pin pin STORE    STORE has a PIN slot for "4821" (tokenctl slot add tpm-pin) on the
 *                         swtpm of $TOKENSTORE_TPM_TCTI, whose owner allows 3 wrong PINs: the
 *                         right PIN opens it and reads the row (also after a lock and unlock,
 *                         which unseals with the PIN again); wrong PINs are wrongPIN with
 *                         2, 1, 0 tries left (the right PIN in between opens it: nothing
 *                         changed); then the right PIN too is tpmLockedOut; the keyring still
 *                         opens the store with every row. No message holds a PIN.
 *
 * Exit status 0 when every check passes; each failure is printed with its line.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <tokenstore.h>

static int failures = 0;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "test_pin.c:%d: check failed: %s\n", __LINE__, #cond);   \
            failures++;                                                              \
        }                                                                            \
    } while (0)

static const char *const app_id = "org.example.cabi";
static const uint8_t right_pin[] = {'4', '8', '2', '1'};
static const uint8_t wrong_pin[] = {'9', '9', '0', '7'};

/* TS_ERROR with `code`, `*out` NULL, a message holding `wanted` (NULL: any) and neither PIN;
 * frees the error. */
static void expect_error(int status, ts_error **err, ts_store *store, const char *code, const char *wanted) {
    CHECK(status == TS_ERROR);
    CHECK(store == NULL);
    CHECK(*err != NULL);
    if (*err == NULL) return;
    const char *message = ts_error_message(*err);
    if (strcmp(ts_error_code(*err), code) != 0 || (wanted && strstr(message, wanted) == NULL))
        fprintf(stderr, "  expected %s (%s), got %s: %s\n", code, wanted ? wanted : "", ts_error_code(*err), message);
    CHECK(strcmp(ts_error_code(*err), code) == 0);
    CHECK(wanted == NULL || strstr(message, wanted) != NULL);
    CHECK(strstr(message, "4821") == NULL && strstr(message, "9907") == NULL);
    ts_error_free(*err);
    *err = NULL;
}

static void expect_row(ts_store *store) {
    uint8_t *bytes = NULL;
    size_t length = 0;
    ts_error *err = NULL;
    CHECK(ts_item_get(store, NULL, "pin-row", TS_KIND_GENERIC, &bytes, &length, &err) == TS_OK);
    CHECK(err == NULL && length == 5 && bytes != NULL && memcmp(bytes, "kept!", 5) == 0);
    if (err) ts_error_free(err);
    ts_bytes_free(bytes, length);
}

static int open_with(const char *path, const uint8_t *pin, size_t length, ts_store **store, ts_error **err) {
    *store = NULL;
    return ts_store_open_with_pin(path, app_id, pin, length, store, err);
}

/* Opening `path` with `pin` fails with `code` (see expect_error). */
static void expect_refused(const char *path, const uint8_t *pin, size_t length, const char *code, const char *wanted) {
    ts_store *store = NULL;
    ts_error *err = NULL;
    int status = open_with(path, pin, length, &store, &err);
    expect_error(status, &err, store, code, wanted);
    ts_store_close(store);
}

static int test_args(const char *path) {
    ts_store *store = NULL;
    ts_error *err = NULL;
    CHECK(ts_store_open(path, app_id, &store, &err) == TS_OK);
    if (store == NULL) return 1;
    CHECK(ts_item_set(store, NULL, "pin-row", TS_KIND_GENERIC, (const uint8_t *)"kept!", 5, &err) == TS_OK);
    ts_store_close(store);
    store = NULL;

    const uint8_t long_pin[65] = {0};
    expect_refused(path, NULL, 4, "invalidInput", "NULL");
    expect_refused(path, NULL, 0, "invalidInput", "4");
    expect_refused(path, right_pin, 3, "invalidInput", "4");
    expect_refused(path, long_pin, sizeof long_pin, "invalidInput", "64");
    expect_refused(path, right_pin, (size_t)-1, "invalidInput", NULL);
    int status = ts_store_open_with_pin(path, NULL, right_pin, 4, &store, &err);
    expect_error(status, &err, store, "invalidInput", NULL);
    status = ts_store_open_with_pin("\xff\xfe", app_id, right_pin, 4, &store, &err);
    expect_error(status, &err, store, "invalidInput", NULL);
    CHECK(ts_store_open_with_pin(path, app_id, right_pin, 4, NULL, &err) == TS_ERROR);
    CHECK(err != NULL && strcmp(ts_error_code(err), "invalidInput") == 0);
    ts_error_free(err);
    err = NULL;
    /* A keyring store without a PIN slot: the typed error with a hint C can follow, the store as it was. */
    expect_refused(path, right_pin, sizeof right_pin, "wrongKeyProvider",
                   "no TPM PIN key slot: open it with ts_store_open");
    /* No store at the path: refused (a PIN slot is added to an existing store), no file made. */
    char absent[4200];
    snprintf(absent, sizeof absent, "%s.absent", path);
    expect_refused(absent, right_pin, sizeof right_pin, "invalidInput", "does not make a store");
    struct stat info;
    CHECK(stat(absent, &info) != 0);

    CHECK(ts_store_open(path, app_id, &store, &err) == TS_OK);
    if (store) expect_row(store);
    ts_store_close(store);
    return failures;
}

static int test_pin(const char *path) {
    ts_store *store = NULL;
    ts_error *err = NULL;
    CHECK(open_with(path, right_pin, sizeof right_pin, &store, &err) == TS_OK);
    if (err) fprintf(stderr, "  right PIN: %s: %s\n", ts_error_code(err), ts_error_message(err));
    if (store == NULL) return 1; /* the error is freed at exit */
    expect_row(store);
    /* Locked, then unlocked: the key unsealed again with the PIN the store holds. */
    CHECK(ts_store_lock(store, 0, &err) == TS_OK);
    uint8_t *bytes = NULL;
    size_t length = 0;
    CHECK(ts_item_get(store, NULL, "pin-row", TS_KIND_GENERIC, &bytes, &length, &err) == TS_ERROR);
    CHECK(err != NULL && strcmp(ts_error_code(err), "storeLocked") == 0);
    ts_error_free(err);
    err = NULL;
    CHECK(ts_store_unlock(store, 0, &err) == TS_OK);
    if (err) {
        fprintf(stderr, "  unlock: %s: %s\n", ts_error_code(err), ts_error_message(err));
        ts_error_free(err);
        err = NULL;
    }
    expect_row(store);
    ts_store_close(store);

    /* The TPM counts each wrong PIN; the owner set 3 (tpm2_dictionarylockout -n 3). */
    expect_refused(path, wrong_pin, sizeof wrong_pin, "wrongPIN", "allows 2 more wrong PINs");
    CHECK(open_with(path, right_pin, sizeof right_pin, &store, &err) == TS_OK);
    if (store) expect_row(store);
    ts_store_close(store);
    store = NULL;
    expect_refused(path, wrong_pin, sizeof wrong_pin, "wrongPIN", "allows 1 more wrong PIN ");
    expect_refused(path, wrong_pin, sizeof wrong_pin, "wrongPIN", "now in dictionary-attack lockout");
    /* Locked out: the right PIN too, with when it recovers. */
    expect_refused(path, right_pin, sizeof right_pin, "tpmLockedOut", "again within");

    /* Nothing lost: the keyring slot opens it with its row. */
    CHECK(ts_store_open(path, app_id, &store, &err) == TS_OK);
    if (store) expect_row(store);
    ts_store_close(store);
    return failures;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "args") == 0) return test_args(argv[2]) ? 1 : 0;
    if (argc == 3 && strcmp(argv[1], "pin") == 0) return test_pin(argv[2]) ? 1 : 0;
    fprintf(stderr, "usage: test_pin args|pin STORE\n");
    return 64;
}
