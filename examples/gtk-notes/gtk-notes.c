/*
 * gtk-notes: a small GTK 4 app that signs in with TokenStore's GObject library
 * (libtokenstore-gobject-1, `pkg-config tokenstore-gobject-1 gtk4 libcurl`):
 *
 *   gtk-notes --domain URL --client-id ID [--api URL] [--store PATH]
 *
 * Every TokenStore call is GIO async on the main loop: the store opens with ts_store_new_async
 * (the keyring is asked on a worker), "Sign in" runs ts_session_sign_in_async with the system
 * browser ($BROWSER, GIO, xdg-open) and a GCancellable that "Cancel" triggers (the sign-in's
 * loopback listener closes at once), then the API (default DOMAIN/userinfo, the OIDC UserInfo
 * endpoint) is called with a token from ts_session_get_access_token_async (renewed when due).
 * "Log out" revokes at the server, or queues the revocation (pending) when the server cannot
 * be reached; the queue is sent at the next start (ts_session_resume_async). A logout made by
 * another process (another window, tokenctl) arrives as the store's account-removed signal and
 * the window shows it. Only the API request itself (libcurl, blocking) runs on GLib's worker pool.
 *
 * Every change of what the window shows is also written to stdout, one line per label, so
 * that scripts/test-gtk can check it; the profile (a name and an email address) is written
 * only as a SHA-256 prefix, never as text.
 *
 * What an app copies from here besides the calls: ts_harden_process() first thing in main();
 * the API URL parsed once with libcurl's own parser (curl_url) and that parse handed to every
 * request (CURLOPT_CURLU), so the host checked is the host connected to: https anywhere, plain
 * http only to 127.0.0.1, [::1] or localhost, never a user name or password in the URL; the
 * header copies of the access token wiped (explicit_bzero; TsAccessToken wipes its own).
 */
#include <curl/curl.h>
#include <gtk/gtk.h>
#include <string.h> /* explicit_bzero (glibc 2.25) */
#include <tokenstore.h>
#include <tokenstore-gobject.h>

#define APP_ID "org.example.GtkNotes"
#define ACCOUNT "default"

typedef struct {
    GtkWidget *status, *profile, *api, *logout;
    GtkWidget *sign_in, *cancel, *call, *log_out;
    char *domain, *client_id, *api_url, *store_path;
    CURLU *api_parsed; /* api_url as parsed and checked (api_url_check); each request uses a copy */
    TsStore *store;
    TsSession *session;
    GCancellable *sign_in_cancel; /* while a sign-in is under way */
    char *profile_text; /* "Name <email>" of the signed-in user, or NULL */
    gboolean signed_in, busy;
} Notes;

/* What a worker thread did, for the main thread to show. */
typedef struct {
    int ok;
    char *error_code;  /* an HTTP failure, when !ok */
    long http_status;  /* the API call's, 0 when none was made */
    char *profile;     /* from the API's answer */
} Outcome;

static void outcome_free(gpointer data) {
    Outcome *o = data;
    g_free(o->error_code);
    g_free(o->profile);
    g_free(o);
}

/* ---- what the window shows (and stdout) -------------------------------------------------- */

static void show(Notes *n, GtkWidget *label, const char *name, const char *text, gboolean identifying) {
    gtk_label_set_text(GTK_LABEL(label), text);
    if (identifying && text[0] != '\0') {
        char *digest = g_compute_checksum_for_string(G_CHECKSUM_SHA256, text, -1);
        printf("gtk-notes: %s=sha256:%.12s\n", name, digest);
        g_free(digest);
    } else {
        printf("gtk-notes: %s=%s\n", name, text);
    }
}

static void update_buttons(Notes *n) {
    gtk_widget_set_sensitive(n->sign_in, n->session != NULL && !n->busy && !n->signed_in);
    gtk_widget_set_sensitive(n->call, !n->busy && n->signed_in);
    gtk_widget_set_sensitive(n->log_out, !n->busy && n->signed_in);
    printf("gtk-notes: ready=%s\n", n->busy ? "no" : "yes");
}

/* ---- the API call (libcurl) ---------------------------------------------------------- */

static size_t collect(char *data, size_t size, size_t count, void *body) {
    g_string_append_len(body, data, (gssize)(size * count));
    return size * count;
}

/* The string value of "key" in a flat JSON object (enough for UserInfo; an app would use
 * json-glib), unescaping \" and \\ only. NULL when absent. */
static char *json_string(const char *json, const char *key) {
    char *needle = g_strdup_printf("\"%s\"", key);
    const char *at = strstr(json, needle);
    g_free(needle);
    if (at == NULL) return NULL;
    at = strchr(at + strlen(key) + 2, ':');
    if (at == NULL) return NULL;
    while (*++at == ' ') {}
    if (*at != '"') return NULL;
    GString *out = g_string_new(NULL);
    for (at++; *at && *at != '"'; at++) {
        if (*at == '\\' && at[1]) at++;
        g_string_append_c(out, *at);
    }
    return g_string_free(out, FALSE);
}

/* Wipes and frees a header list whose entries hold the token: curl_slist_append() copies
 * each string, and curl_slist_free_all() frees the copies without wiping them. */
static void wipe_slist(struct curl_slist *list) {
    for (struct curl_slist *item = list; item != NULL; item = item->next) explicit_bzero(item->data, strlen(item->data));
    curl_slist_free_all(list);
}

/* GET the API with `access` (on a worker: libcurl blocks); fills o->http_status and o->profile. */
static void call_api(Notes *n, TsAccessToken *access, Outcome *o) {
    const char *token = ts_access_token_get_token(access);
    size_t length = strlen(token);
    /* Sized once, so that no reallocation leaves an unwiped copy of the token behind. */
    static const char prefix[] = "Authorization: Bearer ";
    size_t header_length = sizeof prefix - 1 + length;
    char *header = g_malloc(header_length + 1);
    memcpy(header, prefix, sizeof prefix - 1);
    memcpy(header + sizeof prefix - 1, token, length);
    header[header_length] = '\0';
    struct curl_slist *headers = curl_slist_append(NULL, header);
    explicit_bzero(header, header_length);
    g_free(header);
    GString *body = g_string_new(NULL);
    CURL *curl = curl_easy_init();
    CURLU *url = curl_url_dup(n->api_parsed);
    curl_easy_setopt(curl, CURLOPT_CURLU, url); /* the checked parse, not the text again */
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "127.0.0.1,localhost,::1");
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L); /* a redirect would take the header elsewhere */
    CURLcode result = headers == NULL || url == NULL ? CURLE_OUT_OF_MEMORY : curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &o->http_status);
    curl_easy_cleanup(curl);
    curl_url_cleanup(url);
    wipe_slist(headers);
    if (result != CURLE_OK) {
        o->error_code = g_strdup(curl_easy_strerror(result));
    } else if (o->http_status == 200) {
        char *name = json_string(body->str, "name"), *email = json_string(body->str, "email");
        o->profile = g_strdup_printf("%s <%s>", name ? name : "?", email ? email : "?");
        o->ok = 1;
        g_free(name);
        g_free(email);
    } else {
        o->error_code = g_strdup_printf("HTTP %ld", o->http_status);
    }
    g_string_free(body, TRUE);
}

/* ---- TokenStore's async calls, and the one HTTP request ---------------------------------- */

static void api_thread(GTask *task, gpointer source, gpointer data, GCancellable *cancel) {
    Outcome *o = g_new0(Outcome, 1);
    Notes *n = g_object_get_data(G_OBJECT(task), "notes");
    call_api(n, data, o);
    g_task_return_pointer(task, o, outcome_free);
}

static void show_api(Notes *n, Outcome *o) {
    char *text = o->http_status == 200 ? g_strdup_printf("API: GET %s answered 200", strrchr(n->api_url, '/'))
                                       : g_strdup_printf("API: failed (%s)", o->error_code ? o->error_code : "?");
    show(n, n->api, "api", text, FALSE);
    g_free(text);
    if (o->profile) {
        g_free(n->profile_text);
        n->profile_text = g_strdup(o->profile);
        show(n, n->profile, "profile", n->profile_text, TRUE);
    }
}

static void api_done(GObject *source, GAsyncResult *result, gpointer data) {
    Notes *n = data;
    Outcome *o = g_task_propagate_pointer(G_TASK(result), NULL);
    show_api(n, o);
    outcome_free(o);
    n->busy = FALSE;
    update_buttons(n);
}

/* The code of a GError for the window: the library's code (TsError's nick), or the message. */
static const char *error_code(const GError *error) {
    if (error->domain == TS_STORE_ERROR) {
        GEnumValue *value = g_enum_get_value(g_type_class_peek(TS_TYPE_ERROR), error->code);
        if (value) return value->value_nick;
    }
    return error->message;
}

/* A fresh access token (async: the library renews it when due), then the API request with it.
 * libcurl's call blocks, so it runs as a GTask on GLib's worker pool; the token is the only
 * thing it is handed. */
static void token_ready(GObject *source, GAsyncResult *result, gpointer data) {
    Notes *n = data;
    g_autoptr(GError) error = NULL;
    TsAccessToken *token = ts_session_get_access_token_finish(TS_SESSION(source), result, &error);
    if (token == NULL) {
        Outcome o = {0};
        o.error_code = (char *)error_code(error);
        show_api(n, &o);
        n->busy = FALSE;
        update_buttons(n);
        return;
    }
    GTask *task = g_task_new(NULL, NULL, api_done, n);
    g_object_set_data(G_OBJECT(task), "notes", n);
    g_task_set_task_data(task, token, g_object_unref); /* the worker's `data` */
    g_task_run_in_thread(task, api_thread);
    g_object_unref(task);
}

static void call_api_async(Notes *n) {
    n->busy = TRUE;
    update_buttons(n);
    ts_session_get_access_token_async(n->session, ACCOUNT, NULL, NULL, 30, NULL, token_ready, n);
}

static void signed_in(GObject *source, GAsyncResult *result, gpointer data) {
    Notes *n = data;
    g_autoptr(GError) error = NULL;
    g_autofree char *user_id = ts_session_sign_in_finish(TS_SESSION(source), result, &error);
    g_clear_object(&n->sign_in_cancel);
    gtk_widget_set_visible(n->cancel, FALSE);
    n->busy = FALSE;
    if (error != NULL) {
        if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
            show(n, n->status, "status", "Sign-in cancelled", FALSE);
        } else {
            char *text = g_strdup_printf("Sign-in failed (%s)", error_code(error));
            show(n, n->status, "status", text, FALSE);
            g_free(text);
        }
        update_buttons(n);
        return;
    }
    n->signed_in = TRUE;
    show(n, n->status, "status", "Signed in", FALSE);
    show(n, n->logout, "logout", "", FALSE);
    call_api_async(n);
}

static void show_signed_out(Notes *n, const char *status) {
    n->signed_in = FALSE;
    g_clear_pointer(&n->profile_text, g_free);
    show(n, n->status, "status", status, FALSE);
    show(n, n->profile, "profile", "", FALSE);
    show(n, n->api, "api", "", FALSE);
}

static void logged_out(GObject *source, GAsyncResult *result, gpointer data) {
    Notes *n = data;
    g_autoptr(GError) error = NULL;
    TsLogoutOutcome outcome = ts_session_logout_finish(TS_SESSION(source), result, &error);
    n->busy = FALSE;
    if (error == NULL) {
        show_signed_out(n, "Signed out");
        show(n, n->logout, "logout",
             outcome == TS_LOGOUT_OUTCOME_REVOKED   ? "Logout: revoked at the server"
             : outcome == TS_LOGOUT_OUTCOME_PENDING ? "Logout: pending (the server will be told later)"
             : outcome == TS_LOGOUT_OUTCOME_FAILED  ? "Logout: the server refused the revocation"
                                                    : "Logout: nothing was stored", FALSE);
    } else {
        char *text = g_strdup_printf("Logout failed (%s)", error_code(error));
        show(n, n->logout, "logout", text, FALSE);
        g_free(text);
    }
    update_buttons(n);
}

static void resumed(GObject *source, GAsyncResult *result, gpointer data) {
    Notes *n = data;
    g_autoptr(GError) error = NULL;
    n->busy = FALSE;
    if (!ts_session_resume_finish(TS_SESSION(source), result, NULL, &error)) {
        char *text = g_strdup_printf("Queued logouts not sent (%s)", error_code(error));
        show(n, n->logout, "logout", text, FALSE);
        g_free(text);
    }
    update_buttons(n);
}

/* Another process (another window of the app, tokenctl) logged the account out: the store's
 * signal, on this main context. */
static void account_removed(TsStore *store, TsAccount *account, gpointer data) {
    Notes *n = data;
    if (!g_str_equal(ts_account_get_name(account), ACCOUNT) || !n->signed_in || n->busy) return;
    show_signed_out(n, "Signed out (logged out elsewhere)");
    show(n, n->logout, "logout", "", FALSE);
    update_buttons(n);
}

static void on_sign_in(GtkButton *b, Notes *n) {
    show(n, n->status, "status", "Signing in (finish in the browser)…", FALSE);
    n->busy = TRUE;
    update_buttons(n);
    n->sign_in_cancel = g_cancellable_new();
    gtk_widget_set_visible(n->cancel, TRUE);
    ts_session_sign_in_async(n->session, ACCOUNT, NULL, n->sign_in_cancel, signed_in, n);
}
static void on_cancel(GtkButton *b, Notes *n) {
    if (n->sign_in_cancel) g_cancellable_cancel(n->sign_in_cancel); /* the listener closes at once */
}
static void on_call(GtkButton *b, Notes *n) { call_api_async(n); }
static void on_log_out(GtkButton *b, Notes *n) {
    n->busy = TRUE;
    update_buttons(n);
    ts_session_logout_async(n->session, ACCOUNT, NULL, logged_out, n);
}

static void store_ready(GObject *source, GAsyncResult *result, gpointer data) {
    Notes *n = data;
    g_autoptr(GError) error = NULL;
    n->store = ts_store_new_finish(result, &error);
    if (n->store != NULL) n->session = ts_session_new_for_domain(n->store, n->domain, n->client_id, &error);
    if (n->session == NULL) {
        char *text = g_strdup_printf("The store could not be opened (%s)", error_code(error));
        show(n, n->status, "status", text, FALSE);
        g_free(text);
        return;
    }
    g_signal_connect(n->store, "account-removed", G_CALLBACK(account_removed), n);
    /* Logouts an earlier run could not deliver (it says nothing unless it fails). */
    ts_session_resume_async(n->session, NULL, resumed, n);
}

static GtkWidget *label(GtkWidget *box, const char *css) {
    GtkWidget *l = gtk_label_new("");
    gtk_label_set_xalign(GTK_LABEL(l), 0);
    gtk_label_set_wrap(GTK_LABEL(l), TRUE);
    if (css) gtk_widget_add_css_class(l, css);
    gtk_box_append(GTK_BOX(box), l);
    return l;
}

static GtkWidget *button(GtkWidget *box, const char *mnemonic, GCallback callback, Notes *n) {
    GtkWidget *b = gtk_button_new_with_mnemonic(mnemonic);
    g_signal_connect(b, "clicked", callback, n);
    gtk_box_append(GTK_BOX(box), b);
    return b;
}

static void activate(GtkApplication *app, Notes *n) {
    GtkWidget *window = gtk_application_window_new(app);
    gtk_window_set_title(GTK_WINDOW(window), "gtk-notes");
    gtk_window_set_default_size(GTK_WINDOW(window), 460, 300);
    GtkWidget *box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 10);
    gtk_widget_set_margin_start(box, 20);
    gtk_widget_set_margin_end(box, 20);
    gtk_widget_set_margin_top(box, 20);
    gtk_widget_set_margin_bottom(box, 20);
    GtkWidget *title = label(box, "title-2");
    gtk_label_set_text(GTK_LABEL(title), "gtk-notes · TokenStore");
    n->status = label(box, "heading");
    n->profile = label(box, NULL);
    n->api = label(box, "dim-label");
    n->logout = label(box, NULL);
    GtkWidget *row = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 8);
    gtk_widget_set_margin_top(row, 12);
    gtk_box_append(GTK_BOX(box), row);
    n->sign_in = button(row, "_Sign in", G_CALLBACK(on_sign_in), n);
    n->cancel = button(row, "Ca_ncel", G_CALLBACK(on_cancel), n);
    gtk_widget_set_visible(n->cancel, FALSE);
    n->call = button(row, "_Call the API", G_CALLBACK(on_call), n);
    n->log_out = button(row, "_Log out", G_CALLBACK(on_log_out), n);
    gtk_window_set_child(GTK_WINDOW(window), box);
    show(n, n->status, "status", "Not signed in", FALSE);
    n->busy = TRUE;
    update_buttons(n);
    /* The store opens on a worker (the keyring is asked there); store_ready goes on. */
    ts_store_new_async(APP_ID, n->store_path, NULL, store_ready, n);
    gtk_window_present(GTK_WINDOW(window));
    printf("gtk-notes: window=shown\n");
}

/* The host part of a URL that may carry plain http: the loopback names, exactly. */
static gboolean loopback_host(const char *host) {
    return g_str_equal(host, "127.0.0.1") || g_str_equal(host, "[::1]") || g_str_equal(host, "localhost");
}

/* Parses `text` with libcurl's parser into `*out` (the parse every request then uses), or
 * says on stderr why it is refused: not http(s), plain http to a host that is not loopback,
 * or a user name, password or login options (userinfo) in it, which libcurl would send or
 * which hides the real host ("http://127.0.0.1:@evil/" is the host "evil"). */
static gboolean api_url_check(const char *text, CURLU **out) {
    CURLU *url = curl_url();
    char *scheme = NULL, *host = NULL, *part = NULL;
    const char *problem = NULL;
    if (url == NULL || curl_url_set(url, CURLUPART_URL, text, 0) != CURLUE_OK) {
        problem = "is not a URL";
    } else if (curl_url_get(url, CURLUPART_USER, &part, 0) != CURLUE_NO_USER
               || curl_url_get(url, CURLUPART_PASSWORD, &part, 0) != CURLUE_NO_PASSWORD
               || curl_url_get(url, CURLUPART_OPTIONS, &part, 0) != CURLUE_NO_OPTIONS) {
        problem = "holds a user name or password (userinfo)";
    } else if (curl_url_get(url, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK
               || curl_url_get(url, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
        problem = "has no scheme or host";
    } else if (g_str_equal(scheme, "https")) {
        /* anywhere */
    } else if (!g_str_equal(scheme, "http")) {
        problem = "is neither https nor http";
    } else if (!loopback_host(host)) {
        problem = "is plain http to a host other than 127.0.0.1, [::1] or localhost";
    }
    curl_free(part);
    curl_free(scheme);
    curl_free(host);
    if (problem != NULL) {
        fprintf(stderr, "gtk-notes: the API URL %s; it must be https, or http to loopback\n", problem);
        curl_url_cleanup(url);
        return FALSE;
    }
    *out = url;
    return TRUE;
}

int main(int argc, char **argv) {
    Notes n = {0};
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* First: no core dump or ptrace of this process, whose memory holds the tokens (libcurl's
     * request buffers included, which no wipe of ours reaches). */
    ts_error *err = NULL;
    if (ts_harden_process(&err) != TS_OK) {
        fprintf(stderr, "gtk-notes: %s: %s\n", ts_error_code(err), ts_error_message(err));
        ts_error_free(err);
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    for (int i = 1; i + 1 < argc; i += 2) {
        char **slot = g_str_equal(argv[i], "--domain") ? &n.domain
                      : g_str_equal(argv[i], "--client-id") ? &n.client_id
                      : g_str_equal(argv[i], "--api") ? &n.api_url
                      : g_str_equal(argv[i], "--store") ? &n.store_path : NULL;
        if (slot == NULL) break;
        *slot = g_strdup(argv[i + 1]);
    }
    if (n.domain == NULL || n.client_id == NULL) {
        fprintf(stderr, "usage: gtk-notes --domain URL --client-id ID [--api URL] [--store PATH]\n");
        return 64;
    }
    if (n.api_url == NULL) n.api_url = g_strconcat(n.domain, g_str_has_suffix(n.domain, "/") ? "" : "/", "userinfo", NULL);
    if (!api_url_check(n.api_url, &n.api_parsed)) return 64;
    GtkApplication *app = gtk_application_new(APP_ID, G_APPLICATION_NON_UNIQUE);
    g_signal_connect(app, "activate", G_CALLBACK(activate), &n);
    char *plain_argv[] = {argv[0], NULL};
    int status = g_application_run(G_APPLICATION(app), 1, plain_argv);
    g_object_unref(app);
    g_clear_object(&n.session);
    g_clear_object(&n.store);
    curl_url_cleanup(n.api_parsed);
    curl_global_cleanup();
    return status;
}
