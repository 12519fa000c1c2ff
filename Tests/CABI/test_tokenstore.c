/*
 * The C ABI end to end, compiled with gcc through `pkg-config --cflags --libs tokenstore`
 * against an installed prefix and run under `env -i` (plus the private keyring's D-Bus
 * address) by scripts/test-cabi, which also runs it under AddressSanitizer.
 *
 *   test_tokenstore version  EXPECTED          ts_version() is EXPECTED
 *   test_tokenstore items    STORE             open, set/get/delete, not found, bad input
 *   test_tokenstore tampered STORE             the row scripts/test-cabi altered: integrityCheckFailed
 *   test_tokenstore locked   STORE             the keyring is locked: keyringLocked
 *   test_tokenstore nobus    STORE             no session bus: secretServiceUnavailable, a C hint
 *   test_tokenstore session  STORE URL USER    credential state, access token, logout, resume
 *
 * Exit status 0 when every check passes; each failure is printed with its line.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tokenstore.h>

static int failures = 0;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "test_tokenstore.c:%d: check failed: %s\n", __LINE__, #cond); \
            failures++;                                                              \
        }                                                                            \
    } while (0)

/* The message reads once after the code: not "TokenStoreError.code: ..." nor "code: ...". */
static int names_code_again(const ts_error *err) {
    const char *message = ts_error_message(err), *code = ts_error_code(err);
    size_t length = strlen(code);
    return strncmp(message, "TokenStoreError.", 16) == 0 || strncmp(message, "AuthSessionError.", 17) == 0
           || (strncmp(message, code, length) == 0 && message[length] == ':');
}

/* Checks that `status` is TS_ERROR with `code` and a message that does not repeat it, then
 * frees the error. */
#define CHECK_ERROR(status, err, code)                                               \
    do {                                                                             \
        CHECK((status) == TS_ERROR);                                                 \
        CHECK((err) != NULL);                                                        \
        if (err) {                                                                   \
            if (strcmp(ts_error_code(err), (code)) != 0)                             \
                fprintf(stderr, "  got %s: %s\n", ts_error_code(err), ts_error_message(err)); \
            CHECK(strcmp(ts_error_code(err), (code)) == 0);                          \
            CHECK(ts_error_message(err) != NULL && strlen(ts_error_message(err)) > 0); \
            if (names_code_again(err)) fprintf(stderr, "  message: %s\n", ts_error_message(err)); \
            CHECK(!names_code_again(err));                                           \
            ts_error_free(err);                                                      \
            (err) = NULL;                                                            \
        }                                                                            \
    } while (0)

/* Checks that `status` is TS_ERROR with `code` and that its message holds `wanted` and not
 * `unwanted` (NULL: not checked), then frees the error. */
static void check_error_text(int status, ts_error **err, const char *code, const char *wanted, const char *unwanted) {
    CHECK(status == TS_ERROR && *err != NULL);
    if (*err == NULL) return;
    const char *message = ts_error_message(*err);
    fprintf(stderr, "  %s: %s\n", ts_error_code(*err), message);
    CHECK(strcmp(ts_error_code(*err), code) == 0);
    CHECK(strstr(message, wanted) != NULL);
    CHECK(unwanted == NULL || strstr(message, unwanted) == NULL);
    CHECK(!names_code_again(*err));
    ts_error_free(*err);
    *err = NULL;
}

/* Opens the store or exits: nothing else can be checked without it. */
static ts_store *open_store(const char *path) {
    ts_store *store = NULL;
    ts_error *err = NULL;
    if (ts_store_open(path, "org.example.cabi", &store, &err) != TS_OK) {
        fprintf(stderr, "ts_store_open: %s: %s\n", ts_error_code(err), ts_error_message(err));
        ts_error_free(err);
        exit(1);
    }
    return store;
}

/* A watch callback for a watch that only has to start. */
static void on_any_change(const ts_change *change, void *user_data) {
    (void)change;
    (void)user_data;
}

static void expect_item(ts_store *store, const char *account, ts_kind kind, const char *value) {
    uint8_t *bytes = NULL;
    size_t length = 0;
    ts_error *err = NULL;
    int status = ts_item_get(store, NULL, account, kind, &bytes, &length, &err);
    CHECK(status == TS_OK);
    CHECK(err == NULL);
    CHECK(length == strlen(value));
    CHECK(bytes != NULL && memcmp(bytes, value, length) == 0);
    ts_bytes_free(bytes, length);
}

static int test_version(const char *expected) {
    CHECK(strcmp(ts_version(), expected) == 0);
    CHECK(ts_version() == ts_version()); /* a static string */
    return failures;
}

static int test_items(const char *path) {
    ts_store *store = open_store(path);
    ts_error *err = NULL;
    const uint8_t secret[] = {'r', 't', '-', 0x00, 0xff, '1'}; /* binary, with a NUL */

    /* set/get round trip of binary bytes; replace; delete */
    CHECK(ts_item_set(store, NULL, "alice", TS_KIND_GENERIC, secret, sizeof secret, &err) == TS_OK);
    CHECK(err == NULL);
    uint8_t *bytes = NULL;
    size_t length = 0;
    CHECK(ts_item_get(store, NULL, "alice", TS_KIND_GENERIC, &bytes, &length, &err) == TS_OK);
    CHECK(length == sizeof secret && memcmp(bytes, secret, sizeof secret) == 0);
    ts_bytes_free(bytes, length);
    CHECK(ts_item_set(store, "auth0", "alice", TS_KIND_GENERIC, (const uint8_t *)"v2", 2, NULL) == TS_OK);
    expect_item(store, "alice", TS_KIND_GENERIC, "v2");
    /* another service is another item */
    CHECK(ts_item_set(store, "other-service", "alice", TS_KIND_GENERIC, (const uint8_t *)"o", 1, NULL) == TS_OK);
    expect_item(store, "alice", TS_KIND_GENERIC, "v2");
    CHECK(ts_item_delete(store, NULL, "alice", TS_KIND_GENERIC, &err) == TS_OK);
    CHECK(ts_item_delete(store, NULL, "alice", TS_KIND_GENERIC, &err) == TS_OK); /* absent: still OK */

    /* not found: a status, no error, NULL/0 out */
    bytes = (uint8_t *)secret;
    length = 99;
    CHECK(ts_item_get(store, NULL, "alice", TS_KIND_GENERIC, &bytes, &length, &err) == TS_NOT_FOUND);
    CHECK(err == NULL && bytes == NULL && length == 0);
    ts_bytes_free(NULL, 0); /* ignored */

    /* the cancellable get: NULL and an open handle read as ts_item_get does; a triggered handle
     * is "cancelled" at once with NULL/0 out (the cancel of a read waiting on polkit is tested
     * against the polkit stand-in in Tests/TokenStoreTests, UserPresenceTests) */
    ts_cancel *read_cancel = NULL;
    CHECK(ts_cancel_new(&read_cancel, &err) == TS_OK && read_cancel != NULL);
    CHECK(ts_item_set(store, NULL, "erin", TS_KIND_GENERIC, secret, sizeof secret, &err) == TS_OK);
    CHECK(ts_item_get_cancellable(store, NULL, "erin", TS_KIND_GENERIC, NULL, &bytes, &length, &err) == TS_OK);
    CHECK(length == sizeof secret && memcmp(bytes, secret, sizeof secret) == 0);
    ts_bytes_free(bytes, length);
    CHECK(ts_item_get_cancellable(store, NULL, "erin", TS_KIND_GENERIC, read_cancel, &bytes, &length, &err) == TS_OK);
    CHECK(length == sizeof secret && memcmp(bytes, secret, sizeof secret) == 0);
    ts_bytes_free(bytes, length);
    CHECK(ts_item_get_cancellable(store, NULL, "nobody", TS_KIND_GENERIC, read_cancel, &bytes, &length, &err) == TS_NOT_FOUND);
    CHECK(err == NULL && bytes == NULL && length == 0);
    ts_cancel_trigger(read_cancel);
    bytes = (uint8_t *)secret;
    length = 99;
    CHECK_ERROR(ts_item_get_cancellable(store, NULL, "erin", TS_KIND_GENERIC, read_cancel, &bytes, &length, &err), err, "cancelled");
    CHECK(bytes == NULL && length == 0);
    ts_cancel_free(read_cancel);
    CHECK(ts_item_delete(store, NULL, "erin", TS_KIND_GENERIC, &err) == TS_OK);

    /* bad input: typed errors, nothing stored, no crash */
    int status = ts_item_set(store, NULL, "empty", TS_KIND_ACCESS_TOKEN, NULL, 0, &err); /* empty secret */
    CHECK_ERROR(status, err, "invalidInput");
    status = ts_item_set(store, NULL, NULL, TS_KIND_GENERIC, secret, 1, &err);
    CHECK_ERROR(status, err, "invalidInput");
    status = ts_item_set(store, NULL, "bob", (ts_kind)42, secret, 1, &err);
    CHECK_ERROR(status, err, "invalidInput");
    status = ts_item_set(store, NULL, "bob", TS_KIND_GENERIC, NULL, 5, &err);
    CHECK_ERROR(status, err, "invalidInput");
    status = ts_item_set(store, NULL, "bob", TS_KIND_GENERIC, secret, (size_t)-1, &err);
    CHECK_ERROR(status, err, "invalidInput");
    status = ts_item_set(store, NULL, "bob", TS_KIND_GENERIC, secret, (size_t)(1 << 20) + 1, &err);
    CHECK_ERROR(status, err, "invalidInput");
    status = ts_item_set(store, NULL, "b\xff\xfe", TS_KIND_GENERIC, secret, 1, &err); /* not UTF-8 */
    CHECK_ERROR(status, err, "invalidInput");
    status = ts_item_get(store, NULL, "bob", TS_KIND_GENERIC, NULL, &length, &err);
    CHECK_ERROR(status, err, "invalidInput");
    status = ts_item_get(NULL, NULL, "bob", TS_KIND_GENERIC, &bytes, &length, &err);
    CHECK_ERROR(status, err, "invalidInput");
    char *huge = malloc(8192);
    memset(huge, 'a', 8191);
    huge[8191] = 0;
    status = ts_item_delete(store, NULL, huge, TS_KIND_GENERIC, &err);
    CHECK_ERROR(status, err, "invalidInput");
    free(huge);
    CHECK(ts_item_set(store, NULL, NULL, TS_KIND_GENERIC, secret, 1, NULL) == TS_ERROR); /* err NULL: fine */
    /* The message says what is wrong once, after the code. */
    status = ts_item_set(store, NULL, "", TS_KIND_GENERIC, secret, 1, &err);
    check_error_text(status, &err, "invalidInput", "account", NULL);

    /* Every kind of tokenctl's --kind: the ID token and the profile too (the profile must be a
     * sign-in's profile JSON, which only that kind checks). */
    CHECK(ts_item_set(store, NULL, "dave", TS_KIND_ID_TOKEN, (const uint8_t *)"eyJ.id.token", 12, &err) == TS_OK);
    expect_item(store, "dave", TS_KIND_ID_TOKEN, "eyJ.id.token");
    CHECK(ts_item_delete(store, NULL, "dave", TS_KIND_ID_TOKEN, &err) == TS_OK);
    status = ts_item_set(store, NULL, "dave", TS_KIND_PROFILE, (const uint8_t *)"not json", 8, &err);
    check_error_text(status, &err, "invalidInput", "profile", NULL);
    CHECK(ts_item_get(store, NULL, "dave", TS_KIND_PROFILE, &bytes, &length, &err) == TS_NOT_FOUND);
    CHECK(ts_item_get(store, NULL, "bob", TS_KIND_GENERIC, &bytes, &length, NULL) == TS_NOT_FOUND);
    ts_store *none = NULL;
    status = ts_store_open(NULL, "not an app id", &none, &err);
    CHECK_ERROR(status, err, "invalidInput");
    CHECK(none == NULL);
    status = ts_store_open(path, "org.example.cabi", NULL, &err);
    CHECK_ERROR(status, err, "invalidInput");
    ts_state state;
    status = ts_credential_state(store, NULL, &state, &err);
    CHECK_ERROR(status, err, "invalidInput");
    CHECK(ts_credential_state(store, "000999.nobody.apple", &state, &err) == TS_OK);
    CHECK(state == TS_STATE_NOT_FOUND);

    /* the protection tier: a Secret Service store is "keyring", with the reason a higher tier is not in use */
    ts_protection tier = TS_PROTECTION_HARDWARE;
    char *reason = NULL;
    CHECK(ts_store_protection(store, &tier, &reason, &err) == TS_OK);
    CHECK(tier == TS_PROTECTION_KEYRING);
    CHECK(reason != NULL && strlen(reason) > 0);
    ts_string_free(reason);
    CHECK(ts_store_protection(store, &tier, NULL, &err) == TS_OK && tier == TS_PROTECTION_KEYRING);
    status = ts_store_protection(store, NULL, NULL, &err);
    CHECK_ERROR(status, err, "invalidInput");
    /* tiers are appended, never renumbered: a software TPM (swtpm, mssim, a simulator) is its own tier */
    CHECK(TS_PROTECTION_HARDWARE == 0 && TS_PROTECTION_PASSPHRASE == 3 && TS_PROTECTION_SOFTWARE_TPM == 4);

    /* the lock: every call is storeLocked until unlock; all_processes reaches another handle */
    int locked = -1;
    CHECK(ts_store_is_locked(store, &locked, &err) == TS_OK && locked == 0);
    CHECK(ts_store_lock(store, 0, &err) == TS_OK);
    CHECK(ts_store_is_locked(store, &locked, &err) == TS_OK && locked == 1);
    uint8_t *locked_bytes = NULL;
    size_t locked_length = 0;
    status = ts_item_get(store, NULL, "nobody", TS_KIND_GENERIC, &locked_bytes, &locked_length, &err);
    CHECK_ERROR(status, err, "storeLocked");
    CHECK(ts_store_unlock(store, 0, &err) == TS_OK);
    CHECK(ts_store_is_locked(store, &locked, &err) == TS_OK && locked == 0);
    CHECK(ts_item_set(store, NULL, "locker", TS_KIND_GENERIC, (const uint8_t *)"kept", 4, &err) == TS_OK);
    ts_store *watcher = open_store(path);
    CHECK(ts_store_lock(store, 1, &err) == TS_OK);
    CHECK(ts_store_is_locked(watcher, &locked, &err) == TS_OK && locked == 0); /* not noticed before its next call */
    status = ts_item_get(watcher, NULL, "locker", TS_KIND_GENERIC, &locked_bytes, &locked_length, &err);
    CHECK_ERROR(status, err, "storeLocked");
    CHECK(ts_store_is_locked(watcher, &locked, &err) == TS_OK && locked == 1);
    /* a handle opened while the lock for every process is recorded is locked from the start, and
     * a watch on it starts (its starting point needs nothing sealed) */
    ts_store *opened_locked = open_store(path);
    CHECK(ts_store_is_locked(opened_locked, &locked, &err) == TS_OK && locked == 1);
    ts_watch *locked_watch = NULL;
    CHECK(ts_store_watch(opened_locked, on_any_change, NULL, &locked_watch, &err) == TS_OK && locked_watch != NULL);
    ts_watch_free(locked_watch);
    ts_store_close(opened_locked);
    status = ts_store_is_locked(opened_locked, &locked, &err);
    CHECK_ERROR(status, err, "storeClosed");
    status = ts_store_is_locked(store, NULL, &err);
    CHECK_ERROR(status, err, "invalidInput");
    status = ts_store_unlock(watcher, 0, &err);
    CHECK_ERROR(status, err, "storeLocked");
    CHECK(ts_store_unlock(watcher, 1, &err) == TS_OK);
    expect_item(watcher, "locker", TS_KIND_GENERIC, "kept");
    expect_item(store, "locker", TS_KIND_GENERIC, "kept");
    ts_store_close(watcher);
    status = ts_store_lock(NULL, 0, &err);
    CHECK_ERROR(status, err, "invalidInput");

    /* a second handle on the same file sees the same items */
    ts_store *second = open_store(path);
    CHECK(ts_item_set(store, NULL, "victim", TS_KIND_REFRESH_TOKEN, (const uint8_t *)"tamper-me", 9, NULL) == TS_OK);
    expect_item(second, "victim", TS_KIND_REFRESH_TOKEN, "tamper-me");
    CHECK(ts_item_set(second, NULL, "bystander", TS_KIND_GENERIC, (const uint8_t *)"intact", 6, NULL) == TS_OK);
    ts_store_close(second);
    ts_store_close(store);
    ts_store_close(NULL);
    ts_error_free(NULL);
    CHECK(ts_error_code(NULL) == NULL && ts_error_message(NULL) == NULL);
    return failures;
}

static int test_tampered(const char *path) {
    ts_store *store = open_store(path);
    ts_error *err = NULL;
    uint8_t *bytes = NULL;
    size_t length = 0;
    int status = ts_item_get(store, NULL, "victim", TS_KIND_REFRESH_TOKEN, &bytes, &length, &err);
    CHECK(bytes == NULL);
    if (err) CHECK(strstr(ts_error_message(err), "tamper-me") == NULL);
    CHECK_ERROR(status, err, "integrityCheckFailed");
    expect_item(store, "bystander", TS_KIND_GENERIC, "intact"); /* the other rows still read */
    ts_store_close(store);
    return failures;
}

static int test_locked(const char *path) {
    ts_store *store = NULL;
    ts_error *err = NULL;
    int status = ts_store_open(path, "org.example.cabi", &store, &err);
    CHECK(store == NULL);
    /* A hint a C caller can follow, not the Swift-only allowsUserInteraction. */
    check_error_text(status, &err, "keyringLocked", "tokenctl unlock", "allowsUserInteraction");
    return failures;
}

/* No session bus at all (run without DBUS_SESSION_BUS_ADDRESS or DISPLAY): a new store cannot
 * keep its key. The hint is what ts_store_open's caller can do, not PassphraseKeyProvider. */
static int test_nobus(const char *path) {
    ts_store *store = NULL;
    ts_error *err = NULL;
    int status = ts_store_open(path, "org.example.cabi", &store, &err);
    CHECK(store == NULL);
    check_error_text(status, &err, "secretServiceUnavailable", "DBUS_SESSION_BUS_ADDRESS", "PassphraseKeyProvider");
    return failures;
}

static int test_session(const char *path, const char *url, const char *user) {
    ts_store *store = open_store(path);
    ts_error *err = NULL;
    ts_state state;
    CHECK(ts_credential_state(store, user, &state, &err) == TS_OK);
    CHECK(state == TS_STATE_AUTHORIZED);

    ts_session *session = NULL;
    int status = ts_session_new(store, "ftp://127.0.0.1/", "tokenstore-test", &session, &err);
    CHECK_ERROR(status, err, "insecureConfiguration");
    /* The same server by its issuer (OIDC Discovery; the Auth0-shaped test server names "{url}/"). */
    status = ts_session_new_issuer(store, "http://example.com/realms/x", "tokenstore-test", &session, &err);
    CHECK_ERROR(status, err, "insecureConfiguration");
    char issuer[512];
    snprintf(issuer, sizeof issuer, "%s/", url);
    ts_session *by_issuer = NULL;
    CHECK(ts_session_new_issuer(store, issuer, "tokenstore-test", &by_issuer, &err) == TS_OK);
    {
        uint8_t *issued = NULL;
        size_t issued_length = 0;
        status = ts_session_access_token(by_issuer, "alice", NULL, "openid", 60, &issued, &issued_length, NULL, &err);
        if (status != TS_OK) fprintf(stderr, "  access token by issuer: %s: %s\n", ts_error_code(err), ts_error_message(err));
        CHECK(status == TS_OK && issued != NULL && issued_length > 0);
        ts_bytes_free(issued, issued_length);
    }
    ts_session_free(by_issuer);
    CHECK(ts_session_new(store, url, "tokenstore-test", &session, &err) == TS_OK);
    ts_store_close(store); /* the session keeps the store open */

    uint8_t *token = NULL;
    size_t length = 0;
    int64_t expires_at = -1;
    status = ts_session_access_token(session, "alice", NULL, "openid", 60, &token, &length, &expires_at, &err);
    if (status != TS_OK) fprintf(stderr, "  access token: %s: %s\n", ts_error_code(err), ts_error_message(err));
    CHECK(status == TS_OK);
    CHECK(token != NULL && length > 0);
    CHECK(expires_at > (int64_t)time(NULL) + 60);
    ts_bytes_free(token, length);
    status = ts_session_access_token(session, "alice", NULL, NULL, -1, &token, &length, NULL, &err);
    CHECK_ERROR(status, err, "invalidInput");
    status = ts_session_access_token(session, "nobody", NULL, "", 0, &token, &length, NULL, &err);
    CHECK_ERROR(status, err, "interactionRequired");

    ts_logout_outcome outcome = (ts_logout_outcome)-1;
    status = ts_session_logout(session, "alice", &outcome, &err);
    if (status != TS_OK) fprintf(stderr, "  logout: %s: %s\n", ts_error_code(err), ts_error_message(err));
    CHECK(status == TS_OK);
    CHECK(outcome == TS_LOGOUT_REVOKED);
    CHECK(ts_session_logout(session, "alice", &outcome, &err) == TS_OK);
    CHECK(outcome == TS_LOGOUT_NOT_FOUND);
    int still_pending = -1;
    CHECK(ts_session_resume(session, &still_pending, &err) == TS_OK);
    CHECK(still_pending == 0);
    CHECK(ts_session_resume(session, NULL, &err) == TS_OK);

    store = open_store(path);
    CHECK(ts_credential_state(store, user, &state, &err) == TS_OK);
    CHECK(state == TS_STATE_REVOKED);
    uint8_t *bytes = NULL;
    CHECK(ts_item_get(store, NULL, "alice", TS_KIND_REFRESH_TOKEN, &bytes, &length, &err) == TS_NOT_FOUND);
    ts_store_close(store);
    ts_session_free(session);
    ts_session_free(NULL);
    return failures;
}

/* The claims (the middle part, base64url-decoded, NUL-terminated) of the compact JWT `jwt`
 * into `out`; 0 when it is not one or does not fit. */
static int jwt_claims(const char *jwt, char *out, size_t size) {
    const char *start = strchr(jwt, '.');
    const char *end = start ? strchr(start + 1, '.') : NULL;
    if (!end) return 0;
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    unsigned bits = 0, count = 0;
    size_t n = 0;
    for (const char *c = start + 1; c < end; c++) {
        const char *at = strchr(alphabet, *c);
        if (!at || !*c) return 0;
        bits = (bits << 6) | (unsigned)(at - alphabet);
        count += 6;
        if (count >= 8) {
            count -= 8;
            if (n + 1 >= size) return 0;
            out[n++] = (char)((bits >> count) & 0xff);
        }
    }
    out[n] = 0;
    return 1;
}

/* A session signed in with `tokenctl login --dpop` (issue 27): bound, a proof for its API. */
static int test_dpop(const char *path, const char *url) {
    ts_store *store = open_store(path);
    ts_error *err = NULL;
    ts_session *session = NULL;
    CHECK(ts_session_new(store, url, "tokenstore-test", &session, &err) == TS_OK);
    ts_store_close(store);
    int bound = -1;
    CHECK(ts_session_is_dpop_bound(session, "alice", &bound, &err) == TS_OK && bound == 1);
    CHECK(ts_session_is_dpop_bound(session, "nobody", &bound, &err) == TS_OK && bound == 0);
    char api[512];
    snprintf(api, sizeof api, "%s/userinfo?page=2#top", url);
    char *proof = NULL;
    int status = ts_session_dpop_proof(session, "alice", "GET", api, &proof, &err);
    if (status != TS_OK) fprintf(stderr, "  dpop proof: %s: %s\n", ts_error_code(err), ts_error_message(err));
    CHECK(status == TS_OK && proof != NULL);
    if (proof) {
        /* base64url of {"typ":"dpop+jwt","alg":"ES256", : the header's start */
        CHECK(strncmp(proof, "eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2Iiw", 43) == 0);
        int dots = 0;
        for (const char *c = proof; *c; c++) dots += *c == '.';
        CHECK(dots == 2);
        ts_string_free(proof);
    }
    proof = NULL;
    status = ts_session_dpop_proof(session, "alice", "GET", "ftp://example.com/x", &proof, &err);
    CHECK_ERROR(status, err, "insecureConfiguration");
    CHECK(proof == NULL);
    status = ts_session_dpop_proof(session, "nobody", "GET", api, &proof, &err);
    CHECK_ERROR(status, err, "invalidRequest");
    status = ts_session_dpop_proof(session, "alice", "GET", api, NULL, &err);
    CHECK_ERROR(status, err, "invalidInput");
    /* An API's DPoP-Nonce (RFC 9449 9): kept, and the next proof carries it (its payload,
     * base64url, holds "nonce":"cabi-nonce_1"). */
    CHECK(ts_session_record_dpop_nonce(session, api, "cabi-nonce_1", &err) == TS_OK);
    status = ts_session_dpop_proof(session, "alice", "GET", api, &proof, &err);
    CHECK(status == TS_OK && proof != NULL);
    if (proof) {
        char claims[2048];
        CHECK(jwt_claims(proof, claims, sizeof claims) && strstr(claims, "\"nonce\":\"cabi-nonce_1\"") != NULL);
        ts_string_free(proof);
        proof = NULL;
    }
    CHECK_ERROR(ts_session_record_dpop_nonce(session, api, "has space", &err), err, "invalidRequest");
    CHECK_ERROR(ts_session_record_dpop_nonce(session, api, "", &err), err, "invalidRequest");
    CHECK_ERROR(ts_session_record_dpop_nonce(session, "ftp://example.com/x", "n", &err), err, "insecureConfiguration");
    CHECK_ERROR(ts_session_record_dpop_nonce(session, api, NULL, &err), err, "invalidInput");
    CHECK_ERROR(ts_session_record_dpop_nonce(NULL, api, "n", &err), err, "invalidInput");
    ts_logout_outcome outcome = (ts_logout_outcome)-1;
    CHECK(ts_session_logout(session, "alice", &outcome, &err) == TS_OK && outcome == TS_LOGOUT_REVOKED);
    ts_session_free(session);
    return failures;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "version") == 0) return test_version(argv[2]) ? 1 : 0;
    if (argc >= 3 && strcmp(argv[1], "items") == 0) return test_items(argv[2]) ? 1 : 0;
    if (argc >= 4 && strcmp(argv[1], "dpop") == 0) return test_dpop(argv[2], argv[3]) ? 1 : 0;
    if (argc >= 3 && strcmp(argv[1], "tampered") == 0) return test_tampered(argv[2]) ? 1 : 0;
    if (argc >= 3 && strcmp(argv[1], "locked") == 0) return test_locked(argv[2]) ? 1 : 0;
    if (argc >= 3 && strcmp(argv[1], "nobus") == 0) return test_nobus(argv[2]) ? 1 : 0;
    if (argc >= 5 && strcmp(argv[1], "session") == 0) return test_session(argv[2], argv[3], argv[4]) ? 1 : 0;
    fprintf(stderr, "usage: test_tokenstore version|items|tampered|locked|nobus|session ...\n");
    return 64;
}
