/*
 * Browser sign-in through the C ABI (ts_session_sign_in_browser), compiled with gcc through
 * `pkg-config --cflags --libs tokenstore` and run under `env -i` by scripts/test-cabi (also
 * under AddressSanitizer), against the local authorization server:
 *
 *   test_signin STORE URL USER USERAGENT
 *
 * URL is the server (any loopback port allowed for tokenstore-test, USER armed as its next
 * Apple user); USERAGENT is Tests/AuthServer/useragent.py, the scripted browser the app's
 * open_url callback starts, as a GTK app would call gtk_show_uri(). Checks, in order: bad
 * input (invalidInput, the callback never called), redirect paths that do not make a loopback
 * URI (insecureConfiguration), a port in use (loopbackUnavailable), a callback that fails
 * (browserUnavailable), a browser that never comes back (timedOut, nothing stored), then a
 * sign-in that works: the user id comes back, the callback ran once on the calling thread,
 * the user is authorized, a refresh token is stored, ts_session_access_token works, logout
 * revokes. Between them, ts_cancel: a sign-in cancelled while it waits for the browser. Then
 * the device sign-in (ts_session_sign_in_device): a NULL callback is
 * invalidInput; the callback runs once on the calling thread with the server's user code and
 * /activate URIs, approves the code at the server's control path, and the user is authorized.
 * Last, ts_session_logout_browser (check_logout_browser): the logout that also ends the
 * browser session at the provider, in a scripted browser that keeps its cookies.
 *
 * Exit status 0 when every check passes; each failure is printed with its line.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tokenstore.h>

static int failures = 0;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "test_signin.c:%d: check failed: %s\n", __LINE__, #cond); \
            failures++;                                                              \
        }                                                                            \
    } while (0)

/* Checks that `status` is TS_ERROR with `code`, then frees the error. */
#define CHECK_ERROR(status, err, code)                                               \
    do {                                                                             \
        CHECK((status) == TS_ERROR);                                                 \
        CHECK((err) != NULL);                                                        \
        if (err) {                                                                   \
            if (strcmp(ts_error_code(err), (code)) != 0)                             \
                fprintf(stderr, "  got %s: %s\n", ts_error_code(err), ts_error_message(err)); \
            CHECK(strcmp(ts_error_code(err), (code)) == 0);                          \
            ts_error_free(err);                                                      \
            (err) = NULL;                                                            \
        }                                                                            \
    } while (0)

/* What the open_url callback does, and what it saw. */
struct opener {
    const char *useragent; /* NULL: start nothing */
    const char *cookies;   /* the scripted browser's cookie jar (its profile); NULL: none kept */
    int result;            /* returned when nothing is started */
    pthread_t caller;
    int calls;
    int on_caller_thread;
    int loopback_start_url; /* the one-time http://127.0.0.1:PORT/start/<id>, no state or challenge */
};

static int open_url(const char *url, void *user_data) {
    struct opener *opener = user_data;
    __atomic_add_fetch(&opener->calls, 1, __ATOMIC_SEQ_CST);
    if (pthread_equal(pthread_self(), opener->caller)) opener->on_caller_thread++;
    if (strncmp(url, "http://127.0.0.1:", 17) == 0 && strstr(url, "/start/") != NULL && strchr(url, '?') == NULL
        && strstr(url, "code_challenge") == NULL && strstr(url, "state") == NULL)
        opener->loopback_start_url++;
    if (opener->useragent == NULL) return opener->result;
    /* The scripted browser checks the URL, then carries on in a detached child and exits 0,
     * as xdg-open does after starting a GUI browser. */
    char *argv[] = {"/usr/bin/python3", (char *)opener->useragent, (char *)url, NULL};
    char jar[1200];
    snprintf(jar, sizeof jar, "TOKENSTORE_USERAGENT_COOKIES=%s", opener->cookies ? opener->cookies : "");
    char *envp[] = {"TOKENSTORE_USERAGENT_DETACH=1", "TOKENSTORE_USERAGENT_TIMEOUT=120", opener->cookies ? jar : NULL,
                    NULL};
    pid_t pid;
    int status = 0;
    if (posix_spawn(&pid, argv[0], NULL, NULL, argv, envp) != 0) return 1;
    if (waitpid(pid, &status, 0) != pid) return 1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

/* What the device sign-in's user-code callback does, and what it saw: the user (this test)
 * approves the code at the server's test control path, as a person would on another device. */
struct approver {
    const char *url;  /* the server */
    const char *user; /* who approves (an Apple id) */
    pthread_t caller;
    int calls;
    int on_caller_thread;
    int shown_ok; /* a user code, the server's /activate page, its complete form */
    int approved;
};

static void on_user_code(const char *user_code, const char *verification_uri, const char *verification_uri_complete,
                         int expires_in, void *user_data) {
    struct approver *approver = user_data;
    approver->calls++;
    if (pthread_equal(pthread_self(), approver->caller)) approver->on_caller_thread++;
    size_t base = strlen(approver->url);
    if (strlen(user_code) > 0 && strncmp(verification_uri, approver->url, base) == 0
        && strcmp(verification_uri + base, "/activate") == 0 && verification_uri_complete != NULL
        && strstr(verification_uri_complete, user_code) != NULL && expires_in > 60)
        approver->shown_ok++;
    char body[256];
    snprintf(body, sizeof body, "{\"approve\": \"%s\", \"apple_id\": \"%s\"}", user_code, approver->user);
    char *argv[] = {"/usr/bin/python3", "-c",
                    "import sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1] + "
                    "'/__test/device', data=sys.argv[2].encode(), headers={'Content-Type': 'application/json'}), "
                    "timeout=30).read()",
                    (char *)approver->url, body, NULL};
    char *envp[] = {NULL};
    pid_t pid;
    int status = 0;
    if (posix_spawn(&pid, argv[0], NULL, NULL, argv, envp) != 0) return;
    if (waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0) approver->approved++;
}

static void options_with(ts_sign_in_options *options, struct opener *opener, const uint16_t *ports, size_t count) {
    ts_sign_in_options_init(options);
    memset(opener, 0, sizeof *opener);
    opener->caller = pthread_self();
    options->open_url = open_url;
    options->user_data = opener;
    options->ports = ports;
    options->port_count = count;
    options->timeout_seconds = 120;
}

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

/* A socket listening on 127.0.0.1 at a free port, which it returns in *port. */
static int listening_socket(uint16_t *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address;
    socklen_t length = sizeof address;
    memset(&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&address, sizeof address) != 0 || listen(fd, 1) != 0
        || getsockname(fd, (struct sockaddr *)&address, &length) != 0) {
        perror("listening socket");
        exit(1);
    }
    *port = ntohs(address.sin_port);
    return fd;
}

static void check_refused(ts_session *session, ts_store *store) {
    ts_sign_in_options options;
    struct opener opener;
    ts_error *err = NULL;
    char *user_id = (char *)"unchanged";
    const uint16_t any[] = {0};
    int status;

    /* Bad input: refused before anything binds or opens. */
    options_with(&options, &opener, any, 1);
    CHECK_ERROR(ts_session_sign_in_browser(NULL, "alice", &options, &user_id, &err), err, "invalidInput");
    CHECK(user_id == NULL); /* cleared first */
    CHECK_ERROR(ts_session_sign_in_browser(session, NULL, &options, NULL, &err), err, "invalidInput");
    options.struct_size = 0;
    CHECK_ERROR(ts_session_sign_in_browser(session, "alice", &options, NULL, &err), err, "invalidInput");
    options.struct_size = sizeof options + 8; /* a newer header's */
    CHECK_ERROR(ts_session_sign_in_browser(session, "alice", &options, NULL, &err), err, "invalidInput");
    options.struct_size = offsetof(ts_sign_in_options, dpop) - sizeof(void *); /* no header's */
    CHECK_ERROR(ts_session_sign_in_browser(session, "alice", &options, NULL, &err), err, "invalidInput");
    options_with(&options, &opener, NULL, 2);
    CHECK_ERROR(ts_session_sign_in_browser(session, "alice", &options, NULL, &err), err, "invalidInput");
    options_with(&options, &opener, any, 65);
    CHECK_ERROR(ts_session_sign_in_browser(session, "alice", &options, NULL, &err), err, "invalidInput");
    options_with(&options, &opener, any, (size_t)-1);
    CHECK_ERROR(ts_session_sign_in_browser(session, "alice", &options, NULL, &err), err, "invalidInput");
    options_with(&options, &opener, any, 1);
    options.timeout_seconds = -1;
    CHECK_ERROR(ts_session_sign_in_browser(session, "alice", &options, NULL, &err), err, "invalidInput");
    options.timeout_seconds = 86401;
    CHECK_ERROR(ts_session_sign_in_browser(session, "alice", &options, NULL, &err), err, "invalidInput");
    options.timeout_seconds = 120;
    options.scopes = "\xff\xfe";
    CHECK_ERROR(ts_session_sign_in_browser(session, "alice", &options, NULL, &err), err, "invalidInput");
    options.scopes = NULL;
    options.prompt = "sometimes"; /* not login, select_account, consent, none */
    CHECK_ERROR(ts_session_sign_in_browser(session, "alice", &options, NULL, &err), err, "invalidInput");
    options.prompt = NULL;
    options.max_age_set = 1;
    options.max_age_seconds = -1;
    CHECK_ERROR(ts_session_sign_in_browser(session, "alice", &options, NULL, &err), err, "invalidInput");
    options.max_age_set = 0;
    options.login_hint = "";
    CHECK_ERROR(ts_session_sign_in_browser(session, "alice", &options, NULL, &err), err, "invalidInput");
    options.login_hint = NULL;
    CHECK(opener.calls == 0);

    /* Redirect paths that do not make http://127.0.0.1:PORT/path: another host, a query. */
    options_with(&options, &opener, any, 1);
    options.redirect_path = "@attacker.example/callback";
    CHECK_ERROR(ts_session_sign_in_browser(session, "alice", &options, NULL, &err), err, "insecureConfiguration");
    options.redirect_path = "/callback?next=1";
    CHECK_ERROR(ts_session_sign_in_browser(session, "alice", &options, NULL, &err), err, "insecureConfiguration");
    options.redirect_path = "callback";
    CHECK_ERROR(ts_session_sign_in_browser(session, "alice", &options, NULL, &err), err, "insecureConfiguration");
    CHECK(opener.calls == 0);

    /* The only port is taken. */
    uint16_t taken;
    int fd = listening_socket(&taken);
    options_with(&options, &opener, &taken, 1);
    CHECK_ERROR(ts_session_sign_in_browser(session, "alice", &options, NULL, &err), err, "loopbackUnavailable");
    CHECK(opener.calls == 0);
    close(fd);

    /* The app could not open a browser. */
    options_with(&options, &opener, any, 1);
    opener.result = -1;
    CHECK_ERROR(ts_session_sign_in_browser(session, "alice", &options, NULL, &err), err, "browserUnavailable");
    CHECK(opener.calls == 1 && opener.on_caller_thread == 1 && opener.loopback_start_url == 1);

    /* A browser that never comes back: timedOut after the time-out, nothing stored. */
    options_with(&options, &opener, any, 1);
    options.timeout_seconds = 1;
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    status = ts_session_sign_in_browser(session, "alice", &options, NULL, &err);
    clock_gettime(CLOCK_MONOTONIC, &end);
    CHECK_ERROR(status, err, "timedOut");
    double seconds = (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9;
    CHECK(seconds >= 0.9 && seconds < 30);
    CHECK(opener.calls == 1);
    uint8_t *bytes = NULL;
    size_t length = 0;
    CHECK(ts_item_get(store, NULL, "alice", TS_KIND_REFRESH_TOKEN, &bytes, &length, &err) == TS_NOT_FOUND);
}

/* A sign-in on a thread of its own, with a cancel handle. */
struct cancellable_sign_in {
    ts_session *session;
    ts_cancel *cancel;
    ts_sign_in_options options;
    struct opener opener;
    int status;
    char code[64];
    struct timespec ended;
};

static void *run_cancellable_sign_in(void *argument) {
    struct cancellable_sign_in *run = argument;
    ts_error *err = NULL;
    run->opener.caller = pthread_self();
    run->status = ts_session_sign_in_browser_cancellable(run->session, "alice", &run->options, run->cancel, NULL, &err);
    clock_gettime(CLOCK_MONOTONIC, &run->ended);
    snprintf(run->code, sizeof run->code, "%s", err ? ts_error_code(err) : "");
    ts_error_free(err);
    return NULL;
}

/* ts_cancel: a sign-in waiting for the browser ends within milliseconds of the trigger, its
 * listener closed (the port binds again at once) and nothing stored; a handle triggered before
 * a call refuses it (logout: nothing changed); NULL, freed and foreign handles. */
static void pause_millis(long millis) {
    struct timespec pause = {millis / 1000, (millis % 1000) * 1000000L};
    nanosleep(&pause, NULL);
}

static void check_cancel(ts_session *session, ts_store *store) {
    ts_error *err = NULL;
    ts_cancel *cancel = NULL;
    CHECK_ERROR(ts_cancel_new(NULL, &err), err, "invalidInput");
    CHECK(ts_cancel_new(&cancel, &err) == TS_OK && cancel != NULL);
    uint16_t port;
    close(listening_socket(&port));
    struct cancellable_sign_in run;
    memset(&run, 0, sizeof run);
    run.session = session;
    run.cancel = cancel;
    options_with(&run.options, &run.opener, &port, 1); /* the opener starts nothing: the user never comes back */
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, run_cancellable_sign_in, &run) == 0);
    for (int i = 0; i < 10000 && __atomic_load_n(&run.opener.calls, __ATOMIC_SEQ_CST) == 0; i++) pause_millis(1);
    pause_millis(50); /* waiting for the redirect now */
    struct timespec triggered;
    clock_gettime(CLOCK_MONOTONIC, &triggered);
    ts_cancel_trigger(cancel);
    pthread_join(thread, NULL);
    double millis = (double)(run.ended.tv_sec - triggered.tv_sec) * 1e3 + (double)(run.ended.tv_nsec - triggered.tv_nsec) / 1e6;
    printf("METRIC cabi_cancel_sign_in ms=%.2f\n", millis);
    CHECK(run.opener.calls == 1);
    CHECK(run.status == TS_ERROR && strcmp(run.code, "cancelled") == 0);
    CHECK(millis < 100);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address;
    memset(&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    CHECK(bind(fd, (struct sockaddr *)&address, sizeof address) == 0); /* the listener is gone */
    close(fd);
    uint8_t *bytes = NULL;
    size_t length = 0;
    CHECK(ts_item_get(store, NULL, "alice", TS_KIND_REFRESH_TOKEN, &bytes, &length, &err) == TS_NOT_FOUND);

    /* Triggered already: later calls fail at once, changing nothing. */
    ts_logout_outcome outcome = TS_LOGOUT_REVOKED;
    CHECK_ERROR(ts_session_logout_cancellable(session, "alice", cancel, &outcome, &err), err, "cancelled");
    int pending = -1;
    CHECK_ERROR(ts_session_resume_cancellable(session, cancel, &pending, &err), err, "cancelled");
    int64_t expires_at = 0;
    CHECK_ERROR(ts_session_access_token_cancellable(session, "alice", NULL, NULL, 60, cancel, &bytes, &length, &expires_at, &err),
                err, "cancelled");
    /* NULL is the plain form; a handle of another kind is refused. */
    CHECK(ts_session_resume_cancellable(session, NULL, &pending, &err) == TS_OK && pending == 0);
    CHECK_ERROR(ts_session_resume_cancellable(session, (ts_cancel *)session, &pending, &err), err, "invalidInput");
    ts_cancel_free(cancel);
    ts_cancel_trigger(cancel); /* freed: ignored */
    ts_cancel_trigger(NULL);
    ts_cancel_free(cancel);
    ts_cancel_free(NULL);
    CHECK_ERROR(ts_session_resume_cancellable(session, cancel, &pending, &err), err, "storeClosed");
}

/* Whether `expression` (Python, over `d`, the JSON of GET URL PATH, or POST PATH BODY when
 * `body` is not NULL) holds at the test server. */
static int server_says(const char *url, const char *path, const char *body, const char *expression) {
    char *argv[] = {"/usr/bin/python3", "-c",
                    "import json, sys, urllib.request\n"
                    "data = sys.argv[3].encode() if sys.argv[3] else None\n"
                    "request = urllib.request.Request(sys.argv[1] + sys.argv[2], data=data, "
                    "headers={'Content-Type': 'application/json'})\n"
                    "d = json.load(urllib.request.urlopen(request, timeout=30))\n"
                    "sys.exit(0 if eval(sys.argv[4]) else 1)\n",
                    (char *)url, (char *)path, (char *)(body ? body : ""), (char *)expression, NULL};
    char *envp[] = {NULL};
    pid_t pid;
    int status = 0;
    if (posix_spawn(&pid, argv[0], NULL, NULL, argv, envp) != 0) return 0;
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Signs `account` in through the scripted browser with the cookie jar `cookies`; whether the
 * server showed its login page (no live browser session) for it. */
static int signed_in_with_login_page(ts_session *session, const char *account, const char *url, const char *useragent,
                                     const char *cookies, const char *hint) {
    ts_sign_in_options options;
    struct opener opener;
    const uint16_t any[] = {0};
    ts_error *err = NULL;
    options_with(&options, &opener, any, 1);
    opener.useragent = useragent;
    opener.cookies = cookies;
    options.login_hint = hint;
    int status = ts_session_sign_in_browser(session, account, &options, NULL, &err);
    if (status != TS_OK) fprintf(stderr, "  sign-in: %s: %s\n", ts_error_code(err), ts_error_message(err));
    CHECK(status == TS_OK);
    ts_error_free(err);
    return server_says(url, "/__test/oidc", NULL, "d['authorizations'][-1]['login_form']");
}

/* ts_session_logout_browser: the logout, then the provider's end-session endpoint through the
 * app's open_url (given the one-time start address, never the ID token); the next sign-in in
 * the same browser profile shows the login page again, and the server recorded the ended
 * session (OIDC: id_token_hint's sub, state). Bad input; a browser that cannot be started
 * (TS_BROWSER_SESSION_FAILED with browserUnavailable); a provider without an end-session
 * endpoint (TS_BROWSER_SESSION_NOT_ENDED, no browser opened). */
static void check_logout_browser(ts_store *store, const char *path, const char *url, const char *user,
                                 const char *useragent) {
    char issuer[600], cookies[1100], hinted[200], expected[400];
    snprintf(issuer, sizeof issuer, "%s/", url); /* the OIDC form: the discovery document's end_session_endpoint */
    snprintf(cookies, sizeof cookies, "%s.cookies.json", path);
    snprintf(hinted, sizeof hinted, "%s.logout", user);
    ts_session *session = NULL;
    ts_error *err = NULL, *browser_err = NULL;
    CHECK(ts_session_new_issuer(store, issuer, "tokenstore-test", &session, &err) == TS_OK);
    if (session == NULL) return;
    CHECK(signed_in_with_login_page(session, "carol", url, useragent, cookies, hinted));
    CHECK(!signed_in_with_login_page(session, "carol", url, useragent, cookies, NULL)); /* the session answers */

    ts_logout_options options;
    struct opener opener;
    const uint16_t any[] = {0};
    ts_logout_outcome outcome = (ts_logout_outcome)-1;
    ts_browser_session browser = (ts_browser_session)-1;
    /* Bad input: refused, nothing logged out, no browser. */
    ts_logout_options_init(&options);
    options.struct_size = sizeof options + 8;
    CHECK_ERROR(ts_session_logout_browser(session, "carol", &options, NULL, &outcome, &browser, &browser_err, &err), err,
                "invalidInput");
    ts_logout_options_init(&options);
    options.timeout_seconds = -1;
    CHECK_ERROR(ts_session_logout_browser(session, "carol", &options, NULL, &outcome, &browser, &browser_err, &err), err,
                "invalidInput");
    CHECK_ERROR(ts_session_logout_browser(session, "carol", NULL, NULL, NULL, &browser, NULL, &err), err, "invalidInput");
    CHECK_ERROR(ts_session_logout_browser(session, "carol", NULL, NULL, &outcome, NULL, NULL, &err), err, "invalidInput");
    ts_state state;
    CHECK(ts_credential_state(store, hinted, &state, &err) == TS_OK && state == TS_STATE_AUTHORIZED);

    ts_logout_options_init(&options);
    memset(&opener, 0, sizeof opener);
    opener.caller = pthread_self();
    opener.useragent = useragent;
    opener.cookies = cookies;
    options.ports = any;
    options.port_count = 1;
    options.timeout_seconds = 60;
    options.open_url = open_url;
    options.user_data = &opener;
    browser_err = (ts_error *)&opener; /* set to NULL by the call */
    int status = ts_session_logout_browser(session, "carol", &options, NULL, &outcome, &browser, &browser_err, &err);
    if (status != TS_OK) fprintf(stderr, "  logout: %s: %s\n", ts_error_code(err), ts_error_message(err));
    CHECK(status == TS_OK && outcome == TS_LOGOUT_REVOKED);
    if (browser_err) fprintf(stderr, "  browser: %s: %s\n", ts_error_code(browser_err), ts_error_message(browser_err));
    CHECK(browser == TS_BROWSER_SESSION_ENDED && browser_err == NULL);
    CHECK(opener.calls == 1 && opener.on_caller_thread == 1 && opener.loopback_start_url == 1);
    CHECK(ts_credential_state(store, hinted, &state, &err) == TS_OK && state == TS_STATE_REVOKED);
    snprintf(expected, sizeof expected,
             "d['end_sessions'][-1] == {'kind': 'oidc', 'id_token_hint_sub': 'apple|%s', 'state': True, 'ended': True}",
             hinted);
    CHECK(server_says(url, "/__test/oidc", NULL, expected));
    /* The provider's session is gone: the same browser profile gets the login page again. */
    CHECK(signed_in_with_login_page(session, "carol", url, useragent, cookies, hinted));

    /* No browser: the logout stands, the browser part failed with browserUnavailable. */
    ts_logout_options_init(&options);
    memset(&opener, 0, sizeof opener);
    opener.result = 1;
    options.ports = any;
    options.port_count = 1;
    options.open_url = open_url;
    options.user_data = &opener;
    CHECK(ts_session_logout_browser(session, "carol", &options, NULL, &outcome, &browser, &browser_err, &err) == TS_OK);
    CHECK(outcome == TS_LOGOUT_REVOKED && browser == TS_BROWSER_SESSION_FAILED && opener.calls == 1);
    CHECK(browser_err != NULL && strcmp(ts_error_code(browser_err), "browserUnavailable") == 0);
    CHECK(browser_err != NULL && strstr(ts_error_message(browser_err), "browserUnavailable") == NULL);
    ts_error_free(browser_err);
    browser_err = NULL;
    CHECK(ts_credential_state(store, hinted, &state, &err) == TS_OK && state == TS_STATE_REVOKED);
    ts_session_free(session);

    /* A provider whose discovery document names no end_session_endpoint (the Keycloak-shaped
     * profile): logged out, TS_BROWSER_SESSION_NOT_ENDED, no browser opened, nothing recorded. */
    CHECK(server_says(url, "/__test/config", "{\"profile\": \"keycloak\"}", "d['profile'] == 'keycloak'"));
    snprintf(issuer, sizeof issuer, "%s/realms/test", url);
    session = NULL;
    CHECK(ts_session_new_issuer(store, issuer, "tokenstore-test", &session, &err) == TS_OK);
    memset(&opener, 0, sizeof opener);
    options.user_data = &opener;
    CHECK(ts_session_logout_browser(session, "dave", &options, NULL, &outcome, &browser, &browser_err, &err) == TS_OK);
    CHECK(outcome == TS_LOGOUT_NOT_FOUND && browser == TS_BROWSER_SESSION_NOT_ENDED && browser_err == NULL);
    CHECK(opener.calls == 0);
    CHECK(server_says(url, "/__test/oidc", NULL, expected)); /* the last ended session is still the one above */
    CHECK(server_says(url, "/__test/config", "{\"profile\": \"auth0\"}", "d['profile'] == 'auth0'"));
    ts_session_free(session);
    ts_logout_options_init(NULL);
}

static int test_sign_in(const char *path, const char *url, const char *user, const char *useragent) {
    ts_store *store = open_store(path);
    ts_session *session = NULL;
    ts_error *err = NULL;
    CHECK(ts_session_new(store, url, "tokenstore-test", &session, &err) == TS_OK);
    if (session == NULL) return 1;
    ts_state state;

    check_refused(session, store);
    check_cancel(session, store);
    CHECK(ts_credential_state(store, user, &state, &err) == TS_OK);
    CHECK(state == TS_STATE_NOT_FOUND);

    /* The sign-in that works: the scripted browser follows the login, the Apple page and the
     * redirect to the loopback listener. The options are those of a caller built against a
     * 0.3.0 header (struct_size ends at user_data, no `dpop`): still taken, a Bearer sign-in. */
    ts_sign_in_options options;
    struct opener opener;
    const uint16_t any[] = {0};
    /* prompt "none": the scripted browser has no session at the server, which answers
     * login_required: interactionRequired, nothing stored. */
    options_with(&options, &opener, any, 1);
    options.prompt = "none";
    opener.useragent = useragent;
    CHECK_ERROR(ts_session_sign_in_browser(session, "alice", &options, NULL, &err), err, "interactionRequired");
    CHECK(opener.calls == 1);
    CHECK(ts_credential_state(store, user, &state, &err) == TS_OK && state == TS_STATE_NOT_FOUND);
    options_with(&options, &opener, any, 1);
    options.struct_size = offsetof(ts_sign_in_options, dpop);
    options.dpop = 1; /* past the caller's struct_size: never read */
    opener.useragent = useragent;
    char *user_id = NULL;
    int status = ts_session_sign_in_browser(session, "alice", &options, &user_id, &err);
    if (status != TS_OK) fprintf(stderr, "  sign-in: %s: %s\n", ts_error_code(err), ts_error_message(err));
    CHECK(status == TS_OK);
    ts_error_free(err);
    err = NULL;
    CHECK(user_id != NULL && strcmp(user_id, user) == 0);
    ts_string_free(user_id);
    ts_string_free(NULL);
    CHECK(opener.calls == 1 && opener.on_caller_thread == 1 && opener.loopback_start_url == 1);

    CHECK(ts_credential_state(store, user, &state, &err) == TS_OK);
    CHECK(state == TS_STATE_AUTHORIZED);
    int bound = -1;
    CHECK(ts_session_is_dpop_bound(session, "alice", &bound, &err) == TS_OK && bound == 0);
    uint8_t *bytes = NULL;
    size_t length = 0;
    CHECK(ts_item_get(store, NULL, "alice", TS_KIND_REFRESH_TOKEN, &bytes, &length, &err) == TS_OK);
    CHECK(bytes != NULL && length > 0);
    ts_bytes_free(bytes, length);
    int64_t expires_at = 0;
    status = ts_session_access_token(session, "alice", NULL, "openid", 60, &bytes, &length, &expires_at, &err);
    if (status != TS_OK) fprintf(stderr, "  access token: %s: %s\n", ts_error_code(err), ts_error_message(err));
    CHECK(status == TS_OK && length > 0 && expires_at > (int64_t)time(NULL) + 60);
    if (status == TS_OK) ts_bytes_free(bytes, length);

    ts_logout_outcome outcome = (ts_logout_outcome)-1;
    CHECK(ts_session_logout(session, "alice", &outcome, &err) == TS_OK);
    CHECK(outcome == TS_LOGOUT_REVOKED);
    CHECK(ts_credential_state(store, user, &state, &err) == TS_OK);
    CHECK(state == TS_STATE_REVOKED);
    /* The device sign-in (RFC 8628): no browser; the callback shows the code on the calling
     * thread and the test approves it there while the library polls. */
    CHECK_ERROR(ts_session_sign_in_device(session, "alice", NULL, NULL, 0, NULL, NULL, NULL, &err), err,
                "invalidInput");
    struct approver approver;
    memset(&approver, 0, sizeof approver);
    approver.url = url;
    char device_user[200];
    snprintf(device_user, sizeof device_user, "%s.device", user);
    approver.user = device_user;
    approver.caller = pthread_self();
    user_id = NULL;
    status = ts_session_sign_in_device(session, "alice", "openid read:items", NULL, 0, on_user_code, &approver, &user_id,
                                       &err);
    if (status != TS_OK) fprintf(stderr, "  device sign-in: %s: %s\n", ts_error_code(err), ts_error_message(err));
    CHECK(status == TS_OK);
    ts_error_free(err);
    err = NULL;
    CHECK(user_id != NULL && strcmp(user_id, device_user) == 0);
    ts_string_free(user_id);
    CHECK(approver.calls == 1 && approver.on_caller_thread == 1 && approver.shown_ok == 1 && approver.approved == 1);
    CHECK(ts_credential_state(store, device_user, &state, &err) == TS_OK);
    CHECK(state == TS_STATE_AUTHORIZED);
    CHECK(ts_session_logout(session, "alice", &outcome, &err) == TS_OK);
    CHECK(outcome == TS_LOGOUT_REVOKED);

    /* Choosing who signs in: prompt login, a login hint (the test server signs the hinted user
     * in), max_age and acr_values, checked in the ID token. */
    char hinted[200];
    snprintf(hinted, sizeof hinted, "%s.hinted", user);
    options_with(&options, &opener, any, 1);
    opener.useragent = useragent;
    options.prompt = "login";
    options.login_hint = hinted;
    options.max_age_set = 1;
    options.max_age_seconds = 0;
    options.acr_values = "urn:tokenstore:test:mfa urn:tokenstore:test:password";
    user_id = NULL;
    status = ts_session_sign_in_browser(session, "alice", &options, &user_id, &err);
    if (status != TS_OK) fprintf(stderr, "  hinted sign-in: %s: %s\n", ts_error_code(err), ts_error_message(err));
    CHECK(status == TS_OK);
    ts_error_free(err);
    err = NULL;
    CHECK(user_id != NULL && strcmp(user_id, hinted) == 0);
    ts_string_free(user_id);
    CHECK(ts_session_logout(session, "alice", &outcome, &err) == TS_OK);
    check_logout_browser(store, path, url, user, useragent);

    ts_sign_in_options_init(NULL);
    ts_session_free(session);
    ts_store_close(store);
    return failures;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: test_signin STORE URL USER USERAGENT\n");
        return 64;
    }
    return test_sign_in(argv[1], argv[2], argv[3], argv[4]) ? 1 : 0;
}
