/* ts-session.c: TsSession over the C ABI's ts_session. */
#include "ts-session.h"
#include "ts-private.h"

#include <string.h>

/**
 * TsSession:
 *
 * A store's session with one authorization server (Auth0 by its domain, or any OpenID Connect
 * provider by its issuer): browser sign-in, access tokens (renewed when needed), logout.
 *
 * Every call has an `_async`/`_finish` pair that runs on a worker thread and honours its
 * #GCancellable at once: a cancelled sign-in closes its loopback listener and stores nothing;
 * a cancelled logout is logged out here with its revocation queued (resumed by
 * [method@Session.resume_async]); a cancelled renewal still stores the rotated refresh token
 * the server answers with. A cancelled call fails with %G_IO_ERROR_CANCELLED.
 */
struct _TsSession {
    GObject parent_instance;
    TsStore *store;
    ts_session *handle;
    GArray *ports;
    char *connection;
    guint sign_in_timeout;
    TsSignInPrompt prompt;
    char *login_hint;
    int max_age;
    char *acr_values;
};

G_DEFINE_FINAL_TYPE (TsSession, ts_session, G_TYPE_OBJECT)

enum {
    PROP_0, PROP_STORE, PROP_CONNECTION, PROP_SIGN_IN_TIMEOUT, PROP_PROMPT, PROP_LOGIN_HINT, PROP_MAX_AGE,
    PROP_ACR_VALUES, N_PROPS
};
static GParamSpec *properties[N_PROPS];

static void
ts_session_finalize (GObject *object)
{
    TsSession *self = TS_SESSION (object);
    g_clear_pointer (&self->handle, ts_session_free);
    g_clear_object (&self->store);
    g_array_unref (self->ports);
    g_free (self->connection);
    ts_secret_string_free (self->login_hint);
    g_free (self->acr_values);
    G_OBJECT_CLASS (ts_session_parent_class)->finalize (object);
}

static void
ts_session_get_property (GObject *object, guint id, GValue *value, GParamSpec *pspec)
{
    TsSession *self = TS_SESSION (object);
    switch (id) {
    case PROP_STORE: g_value_set_object (value, self->store); break;
    case PROP_CONNECTION: g_value_set_string (value, self->connection); break;
    case PROP_SIGN_IN_TIMEOUT: g_value_set_uint (value, self->sign_in_timeout); break;
    case PROP_PROMPT: g_value_set_enum (value, self->prompt); break;
    case PROP_LOGIN_HINT: g_value_set_string (value, self->login_hint); break;
    case PROP_MAX_AGE: g_value_set_int (value, self->max_age); break;
    case PROP_ACR_VALUES: g_value_set_string (value, self->acr_values); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, id, pspec);
    }
}

static void
ts_session_set_property (GObject *object, guint id, const GValue *value, GParamSpec *pspec)
{
    TsSession *self = TS_SESSION (object);
    switch (id) {
    case PROP_STORE: self->store = g_value_dup_object (value); break;
    case PROP_CONNECTION:
        g_free (self->connection);
        self->connection = g_value_dup_string (value);
        break;
    case PROP_SIGN_IN_TIMEOUT: self->sign_in_timeout = g_value_get_uint (value); break;
    case PROP_PROMPT: self->prompt = g_value_get_enum (value); break;
    case PROP_LOGIN_HINT:
        ts_secret_string_free (self->login_hint);
        self->login_hint = g_value_dup_string (value);
        break;
    case PROP_MAX_AGE: self->max_age = g_value_get_int (value); break;
    case PROP_ACR_VALUES:
        g_free (self->acr_values);
        self->acr_values = g_value_dup_string (value);
        break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, id, pspec);
    }
}

static void
ts_session_class_init (TsSessionClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS (klass);
    object_class->finalize = ts_session_finalize;
    object_class->get_property = ts_session_get_property;
    object_class->set_property = ts_session_set_property;
    /**
     * TsSession:store:
     *
     * The store the session keeps its tokens in.
     */
    properties[PROP_STORE] = g_param_spec_object ("store", NULL, NULL, TS_TYPE_STORE,
        G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
    /**
     * TsSession:connection:
     *
     * The Auth0 connection a sign-in asks for ("apple", the default); an empty string shows the
     * tenant's login page.
     */
    properties[PROP_CONNECTION] = g_param_spec_string ("connection", NULL, NULL, "apple",
        G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
    /**
     * TsSession:sign-in-timeout:
     *
     * The longest wait for the browser's redirect, in seconds (1-86400).
     */
    properties[PROP_SIGN_IN_TIMEOUT] = g_param_spec_uint ("sign-in-timeout", NULL, NULL, 1, 86400, 300,
        G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
    /**
     * TsSession:prompt:
     *
     * OpenID Connect's `prompt` of the next sign-ins: %TS_SIGN_IN_PROMPT_LOGIN asks for the
     * user's credentials even when the browser is still signed in at the server (to sign in as
     * someone else); %TS_SIGN_IN_PROMPT_NONE shows no page and fails with
     * %TS_ERROR_INTERACTION_REQUIRED when the server would have to.
     */
    properties[PROP_PROMPT] = g_param_spec_enum ("prompt", NULL, NULL, TS_TYPE_SIGN_IN_PROMPT,
        TS_SIGN_IN_PROMPT_DEFAULT, G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
    /**
     * TsSession:login-hint:
     *
     * OpenID Connect's `login_hint` of the next sign-ins: who is expected to sign in (an email
     * address), which the server may pre-fill; %NULL: none. An identifier: sent only in the
     * authorization request (pushed with PAR), never on a command line, in a log or an error;
     * set it back to %NULL after the sign-in. An empty string fails the sign-in with
     * %TS_ERROR_INVALID_INPUT.
     */
    properties[PROP_LOGIN_HINT] = g_param_spec_string ("login-hint", NULL, NULL, NULL,
        G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
    /**
     * TsSession:max-age:
     *
     * OpenID Connect's `max_age` of the next sign-ins, in seconds: the longest time since the
     * user last authenticated (the ID token's `auth_time` is then checked, else
     * %TS_ERROR_ID_TOKEN_INVALID); -1 (the default): none sent.
     */
    properties[PROP_MAX_AGE] = g_param_spec_int ("max-age", NULL, NULL, -1, G_MAXINT, -1,
        G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
    /**
     * TsSession:acr-values:
     *
     * OpenID Connect's `acr_values` of the next sign-ins: space-separated authentication context
     * classes; the ID token's `acr` must then be one of them (else %TS_ERROR_ID_TOKEN_INVALID).
     * %NULL: none.
     */
    properties[PROP_ACR_VALUES] = g_param_spec_string ("acr-values", NULL, NULL, NULL,
        G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
ts_session_init (TsSession *self)
{
    self->ports = g_array_new (FALSE, FALSE, sizeof (guint16));
    self->connection = g_strdup ("apple");
    self->sign_in_timeout = 300;
    self->max_age = -1;
}

static TsSession *
session_new (TsStore *store, const char *url, const char *client_id, gboolean issuer, GError **error)
{
    g_return_val_if_fail (TS_IS_STORE (store), NULL);
    ts_session *handle = NULL;
    ts_error *err = NULL;
    int status = issuer ? ts_session_new_issuer (ts_store_get_handle (store), url, client_id, &handle, &err)
                        : ts_session_new (ts_store_get_handle (store), url, client_id, &handle, &err);
    if (status != TS_OK) {
        ts_propagate_cabi_error (error, err);
        return NULL;
    }
    TsSession *self = g_object_new (TS_TYPE_SESSION, "store", store, NULL);
    self->handle = handle;
    return self;
}

/**
 * ts_session_new_for_domain:
 * @store: the store
 * @domain: the Auth0 tenant, such as `https://tenant.auth0.com` (https, or http on loopback)
 * @client_id: the app's public client id
 * @error: return location for a #GError
 *
 * A session with an Auth0 tenant. No network: requests are made by the calls.
 *
 * Returns: (transfer full): the session, or %NULL with @error set
 */
TsSession *
ts_session_new_for_domain (TsStore *store, const char *domain, const char *client_id, GError **error)
{
    return session_new (store, domain, client_id, FALSE, error);
}

/**
 * ts_session_new_for_issuer:
 * @store: the store
 * @issuer: the OpenID Connect issuer (its discovery document is fetched when first needed)
 * @client_id: the app's public client id
 * @error: return location for a #GError
 *
 * A session with any OpenID Connect provider.
 *
 * Returns: (transfer full): the session, or %NULL with @error set
 */
TsSession *
ts_session_new_for_issuer (TsStore *store, const char *issuer, const char *client_id, GError **error)
{
    return session_new (store, issuer, client_id, TRUE, error);
}

/**
 * ts_session_get_store:
 * @self: a session
 *
 * Returns: (transfer none): the store
 */
TsStore *
ts_session_get_store (TsSession *self)
{
    g_return_val_if_fail (TS_IS_SESSION (self), NULL);
    return self->store;
}

/**
 * ts_session_set_redirect_ports:
 * @self: a session
 * @ports: (array length=n_ports) (nullable): loopback ports for the sign-in's redirect, tried in
 *   order (0 takes any free port, for a server that allows any loopback port)
 * @n_ports: the number of @ports (0: the default 53180-53183)
 *
 * The redirect URIs of a sign-in are `http://127.0.0.1:PORT/callback`: register each one at
 * the server (Auth0: Allowed Callback URLs).
 */
void
ts_session_set_redirect_ports (TsSession *self, const guint16 *ports, gsize n_ports)
{
    g_return_if_fail (TS_IS_SESSION (self));
    g_array_set_size (self->ports, 0);
    if (ports && n_ports) g_array_append_vals (self->ports, ports, (guint) n_ports);
}

/* ---- calls ------------------------------------------------------------------------------ */

typedef struct {
    char *account;
    char *audience;
    char *scopes; /* space-separated, or NULL */
    guint min_ttl;
    /* a sign-in's choice of who signs in, copied from the properties when it starts */
    TsSignInPrompt prompt;
    char *login_hint;
    char *acr_values;
    int max_age;
    /* results */
    char *user_id;
    uint8_t *token;
    size_t token_length;
    int64_t expires_at;
    ts_logout_outcome outcome;
    ts_browser_session browser;
    char *browser_code; /* the browser part's failure code, or NULL */
    int still_pending;
} Call;

static void
call_free (gpointer data)
{
    Call *call = data;
    g_free (call->account);
    g_free (call->audience);
    g_free (call->scopes);
    ts_secret_string_free (call->login_hint);
    g_free (call->acr_values);
    ts_string_free (call->user_id);
    g_free (call->browser_code);
    if (call->token) ts_bytes_free (call->token, call->token_length);
    g_free (call);
}

static Call *
call_new (const char *account, const char *audience, const char *const *scopes, guint min_ttl)
{
    Call *call = g_new0 (Call, 1);
    call->account = g_strdup (account);
    call->audience = g_strdup (audience);
    call->scopes = scopes ? g_strjoinv (" ", (char **) scopes) : NULL;
    call->min_ttl = min_ttl;
    return call;
}

/* A sign-in's call, with the session's choice of who signs in as it is now. */
static Call *
sign_in_call_new (TsSession *self, const char *account, const char *const *scopes)
{
    Call *call = call_new (account, NULL, scopes, 0);
    call->prompt = self->prompt;
    call->login_hint = g_strdup (self->login_hint);
    call->acr_values = g_strdup (self->acr_values);
    call->max_age = self->max_age;
    return call;
}

static const char *
prompt_word (TsSignInPrompt prompt)
{
    switch (prompt) {
    case TS_SIGN_IN_PROMPT_LOGIN: return "login";
    case TS_SIGN_IN_PROMPT_SELECT_ACCOUNT: return "select_account";
    case TS_SIGN_IN_PROMPT_CONSENT: return "consent";
    case TS_SIGN_IN_PROMPT_NONE: return "none";
    case TS_SIGN_IN_PROMPT_DEFAULT:
    default: return NULL;
    }
}

typedef enum { SIGN_IN, ACCESS_TOKEN, LOGOUT, RESUME, LOGOUT_BROWSER } Kind;

/* Runs one call of the C ABI, cancellable through `cancellable`, filling `call`. */
static gboolean
run_call (TsSession *self, Kind kind, Call *call, GCancellable *cancellable, GError **error)
{
    TsCancelBridge bridge;
    ts_error *err = NULL;
    int status = TS_ERROR;
    if (g_cancellable_set_error_if_cancelled (cancellable, error)) return FALSE;
    if (!ts_cancel_bridge_begin (&bridge, cancellable, error)) return FALSE;
    switch (kind) {
    case SIGN_IN: {
        ts_sign_in_options options;
        ts_sign_in_options_init (&options);
        options.ports = self->ports->len ? (const uint16_t *) self->ports->data : NULL;
        options.port_count = self->ports->len;
        options.connection = self->connection ? self->connection : "";
        options.scopes = call->scopes;
        options.timeout_seconds = (int) self->sign_in_timeout;
        options.prompt = prompt_word (call->prompt);
        options.login_hint = call->login_hint;
        options.acr_values = call->acr_values;
        options.max_age_set = call->max_age >= 0;
        options.max_age_seconds = MAX (call->max_age, 0);
        status = ts_session_sign_in_browser_cancellable (self->handle, call->account, &options, bridge.cancel,
                                                         &call->user_id, &err);
        break;
    }
    case ACCESS_TOKEN:
        status = ts_session_access_token_cancellable (self->handle, call->account, call->audience, call->scopes,
                                                      (int) MIN (call->min_ttl, (guint) G_MAXINT), bridge.cancel,
                                                      &call->token, &call->token_length, &call->expires_at, &err);
        break;
    case LOGOUT:
        status = ts_session_logout_cancellable (self->handle, call->account, bridge.cancel, &call->outcome, &err);
        break;
    case RESUME:
        status = ts_session_resume_cancellable (self->handle, bridge.cancel, &call->still_pending, &err);
        break;
    case LOGOUT_BROWSER: {
        ts_logout_options options;
        ts_error *browser_err = NULL;
        ts_logout_options_init (&options);
        options.ports = self->ports->len ? (const uint16_t *) self->ports->data : NULL;
        options.port_count = self->ports->len;
        options.timeout_seconds = (int) self->sign_in_timeout;
        status = ts_session_logout_browser (self->handle, call->account, &options, bridge.cancel, &call->outcome,
                                            &call->browser, &browser_err, &err);
        if (browser_err) call->browser_code = g_strdup (ts_error_code (browser_err));
        ts_error_free (browser_err);
        break;
    }
    }
    ts_cancel_bridge_end (&bridge);
    if (status != TS_OK) {
        ts_propagate_cabi_error (error, err);
        return FALSE;
    }
    return TRUE;
}

static void
call_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    GError *error = NULL;
    Kind kind = GPOINTER_TO_INT (g_object_get_data (G_OBJECT (task), "ts-kind"));
    if (run_call (TS_SESSION (source), kind, data, cancellable, &error)) g_task_return_boolean (task, TRUE);
    else g_task_return_error (task, error);
}

static void
start (TsSession *self, Kind kind, Call *call, gpointer tag, GCancellable *cancellable, GAsyncReadyCallback callback,
       gpointer user_data)
{
    g_autoptr (GTask) task = g_task_new (self, cancellable, callback, user_data);
    g_task_set_source_tag (task, tag);
    g_object_set_data (G_OBJECT (task), "ts-kind", GINT_TO_POINTER (kind));
    g_task_set_task_data (task, call, call_free);
    g_task_run_in_thread (task, call_thread);
}

static Call *
finish (TsSession *self, GAsyncResult *result, gpointer tag, GError **error)
{
    g_return_val_if_fail (g_task_is_valid (result, self), NULL);
    g_return_val_if_fail (g_task_get_source_tag (G_TASK (result)) == tag, NULL);
    if (!g_task_propagate_boolean (G_TASK (result), error)) return NULL;
    return g_task_get_task_data (G_TASK (result));
}

static TsAccessToken *
access_token_of (Call *call)
{
    char *text = g_strndup ((const char *) call->token, call->token_length);
    TsAccessToken *token = g_object_new (TS_TYPE_ACCESS_TOKEN, "token", text, "expires-at", (gint64) call->expires_at, NULL);
    ts_secret_string_free (text);
    return token;
}

/**
 * ts_session_sign_in_sync:
 * @self: a session
 * @account: the account to sign in (any name the app chooses)
 * @scopes: (array zero-terminated=1) (nullable): the scopes (default: openid profile email;
 *   openid and offline_access are always added)
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Signs @account in through the user's browser (the system browser, through GIO, or
 * `$BROWSER`): PKCE and a loopback redirect (RFC 8252), blocking until the redirect came
 * back (at most [property@Session:sign-in-timeout]) and the tokens are stored.
 *
 * Returns: (transfer full) (nullable): the Apple user id, or %NULL for a user who did not sign
 *   in with Apple (or with @error set)
 */
char *
ts_session_sign_in_sync (TsSession *self, const char *account, const char *const *scopes, GCancellable *cancellable,
                         GError **error)
{
    g_return_val_if_fail (TS_IS_SESSION (self), NULL);
    g_autoptr (GError) local = NULL;
    Call *call = sign_in_call_new (self, account, scopes);
    char *user_id = NULL;
    if (run_call (self, SIGN_IN, call, cancellable, &local)) user_id = g_strdup (call->user_id);
    else g_propagate_error (error, g_steal_pointer (&local));
    call_free (call);
    return user_id;
}

/**
 * ts_session_sign_in_async:
 * @self: a session
 * @account: the account to sign in
 * @scopes: (array zero-terminated=1) (nullable): the scopes
 * @cancellable: (nullable): a #GCancellable: cancelling it closes the listener at once
 * @callback: (scope async): called when the sign-in ended
 * @user_data: (closure): data for @callback
 *
 * Signs @account in through the user's browser on a worker thread (see
 * [method@Session.sign_in_sync]). Finish with [method@Session.sign_in_finish].
 */
void
ts_session_sign_in_async (TsSession *self, const char *account, const char *const *scopes, GCancellable *cancellable,
                          GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (TS_IS_SESSION (self));
    start (self, SIGN_IN, sign_in_call_new (self, account, scopes), ts_session_sign_in_async, cancellable, callback, user_data);
}

/**
 * ts_session_sign_in_finish:
 * @self: a session
 * @result: the result passed to the callback
 * @error: return location for a #GError
 *
 * Returns: (transfer full) (nullable): the Apple user id, or %NULL (see
 *   [method@Session.sign_in_sync])
 */
char *
ts_session_sign_in_finish (TsSession *self, GAsyncResult *result, GError **error)
{
    Call *call = finish (self, result, ts_session_sign_in_async, error);
    return call ? g_strdup (call->user_id) : NULL;
}

/**
 * ts_session_get_access_token_sync:
 * @self: a session
 * @account: the account
 * @audience: (nullable): the API the token is for, or %NULL
 * @scopes: (array zero-terminated=1) (nullable): the scopes the token must cover
 * @min_ttl_seconds: the shortest remaining lifetime accepted
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * An access token for @account, from the sealed cache when one qualifies, else renewed at the
 * server, blocking. %TS_ERROR_INTERACTION_REQUIRED: the user must sign in again.
 *
 * Returns: (transfer full): the token, or %NULL with @error set
 */
TsAccessToken *
ts_session_get_access_token_sync (TsSession *self, const char *account, const char *audience,
                                  const char *const *scopes, guint min_ttl_seconds, GCancellable *cancellable,
                                  GError **error)
{
    g_return_val_if_fail (TS_IS_SESSION (self), NULL);
    Call *call = call_new (account, audience, scopes, min_ttl_seconds);
    TsAccessToken *token = run_call (self, ACCESS_TOKEN, call, cancellable, error) ? access_token_of (call) : NULL;
    call_free (call);
    return token;
}

/**
 * ts_session_get_access_token_async:
 * @self: a session
 * @account: the account
 * @audience: (nullable): the API the token is for, or %NULL
 * @scopes: (array zero-terminated=1) (nullable): the scopes the token must cover
 * @min_ttl_seconds: the shortest remaining lifetime accepted
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called with the token
 * @user_data: (closure): data for @callback
 *
 * An access token for @account, on a worker thread. Finish with
 * [method@Session.get_access_token_finish].
 */
void
ts_session_get_access_token_async (TsSession *self, const char *account, const char *audience,
                                   const char *const *scopes, guint min_ttl_seconds, GCancellable *cancellable,
                                   GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (TS_IS_SESSION (self));
    start (self, ACCESS_TOKEN, call_new (account, audience, scopes, min_ttl_seconds), ts_session_get_access_token_async,
           cancellable, callback, user_data);
}

/**
 * ts_session_get_access_token_finish:
 * @self: a session
 * @result: the result passed to the callback
 * @error: return location for a #GError
 *
 * Returns: (transfer full): the token, or %NULL with @error set
 */
TsAccessToken *
ts_session_get_access_token_finish (TsSession *self, GAsyncResult *result, GError **error)
{
    Call *call = finish (self, result, ts_session_get_access_token_async, error);
    return call ? access_token_of (call) : NULL;
}

/**
 * ts_session_logout_sync:
 * @self: a session
 * @account: the account
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Logs @account out: its tokens are deleted here and its refresh token revoked at the server,
 * or queued for [method@Session.resume_async] when the server cannot be reached, blocking.
 *
 * Returns: what the logout did
 */
TsLogoutOutcome
ts_session_logout_sync (TsSession *self, const char *account, GCancellable *cancellable, GError **error)
{
    g_return_val_if_fail (TS_IS_SESSION (self), TS_LOGOUT_OUTCOME_NOT_FOUND);
    Call *call = call_new (account, NULL, NULL, 0);
    TsLogoutOutcome outcome = run_call (self, LOGOUT, call, cancellable, error) ? (TsLogoutOutcome) call->outcome
                                                                               : TS_LOGOUT_OUTCOME_NOT_FOUND;
    call_free (call);
    return outcome;
}

/**
 * ts_session_logout_async:
 * @self: a session
 * @account: the account
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when the logout ended
 * @user_data: (closure): data for @callback
 *
 * Logs @account out on a worker thread. Finish with [method@Session.logout_finish].
 */
void
ts_session_logout_async (TsSession *self, const char *account, GCancellable *cancellable,
                         GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (TS_IS_SESSION (self));
    start (self, LOGOUT, call_new (account, NULL, NULL, 0), ts_session_logout_async, cancellable, callback, user_data);
}

/**
 * ts_session_logout_finish:
 * @self: a session
 * @result: the result passed to the callback
 * @error: return location for a #GError
 *
 * Returns: what the logout did
 */
TsLogoutOutcome
ts_session_logout_finish (TsSession *self, GAsyncResult *result, GError **error)
{
    Call *call = finish (self, result, ts_session_logout_async, error);
    return call ? (TsLogoutOutcome) call->outcome : TS_LOGOUT_OUTCOME_NOT_FOUND;
}

/**
 * ts_session_logout_browser_async:
 * @self: a session
 * @account: the account
 * @cancellable: (nullable): a #GCancellable (cancelling ends the wait for the browser)
 * @callback: (scope async): called when the logout and the browser part ended
 * @user_data: (closure): data for @callback
 *
 * Logs @account out as [method@Session.logout_async] does (the revocation and the local delete
 * first, never waiting on the browser), then ends the user's browser session at the provider
 * so that the next sign-in asks who signs in: the browser opens the provider's end-session
 * endpoint (OpenID Connect RP-initiated logout with the ID token as id_token_hint, or Auth0's
 * /v2/logout) through the one-time http://127.0.0.1:PORT/start/ID address (never the ID token),
 * and comes back to a loopback listener at http://127.0.0.1:PORT/callback, PORT from
 * [method@Session.set_redirect_ports], within [property@Session:sign-in-timeout]. Register that
 * address at the provider as a post-logout redirect URI. On a worker thread; finish with
 * [method@Session.logout_browser_finish].
 */
void
ts_session_logout_browser_async (TsSession *self, const char *account, GCancellable *cancellable,
                                 GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (TS_IS_SESSION (self));
    start (self, LOGOUT_BROWSER, call_new (account, NULL, NULL, 0), ts_session_logout_browser_async, cancellable,
           callback, user_data);
}

/**
 * ts_session_logout_browser_finish:
 * @self: a session
 * @result: the result passed to the callback
 * @browser_session: (out) (optional): what happened to the browser session at the provider
 * @browser_error_code: (out) (optional) (nullable) (transfer full): with
 *   %TS_BROWSER_SESSION_OUTCOME_FAILED, the code saying why (e.g. "browserUnavailable",
 *   "loopbackUnavailable", "timedOut", "cancelled"), else %NULL
 * @error: return location for a #GError (the logout's own failure; the browser part never
 *   sets it)
 *
 * Returns: what the logout did
 */
TsLogoutOutcome
ts_session_logout_browser_finish (TsSession *self, GAsyncResult *result, TsBrowserSessionOutcome *browser_session,
                                  char **browser_error_code, GError **error)
{
    Call *call = finish (self, result, ts_session_logout_browser_async, error);
    if (browser_session) *browser_session = call ? (TsBrowserSessionOutcome) call->browser : TS_BROWSER_SESSION_OUTCOME_NOT_ASKED;
    if (browser_error_code) *browser_error_code = call ? g_strdup (call->browser_code) : NULL;
    return call ? (TsLogoutOutcome) call->outcome : TS_LOGOUT_OUTCOME_NOT_FOUND;
}

/**
 * ts_session_resume_sync:
 * @self: a session
 * @still_pending: (out) (optional): how many revocations stay queued
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Retries the queued revocations that are due, blocking. Call it at start-up and when the
 * network returns.
 *
 * Returns: %TRUE, or %FALSE with @error set
 */
gboolean
ts_session_resume_sync (TsSession *self, guint *still_pending, GCancellable *cancellable, GError **error)
{
    g_return_val_if_fail (TS_IS_SESSION (self), FALSE);
    Call *call = call_new (NULL, NULL, NULL, 0);
    gboolean done = run_call (self, RESUME, call, cancellable, error);
    if (done && still_pending) *still_pending = (guint) MAX (call->still_pending, 0);
    call_free (call);
    return done;
}

/**
 * ts_session_resume_async:
 * @self: a session
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when it ended
 * @user_data: (closure): data for @callback
 *
 * Retries the queued revocations on a worker thread. Finish with [method@Session.resume_finish].
 */
void
ts_session_resume_async (TsSession *self, GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (TS_IS_SESSION (self));
    start (self, RESUME, call_new (NULL, NULL, NULL, 0), ts_session_resume_async, cancellable, callback, user_data);
}

/**
 * ts_session_resume_finish:
 * @self: a session
 * @result: the result passed to the callback
 * @still_pending: (out) (optional): how many revocations stay queued
 * @error: return location for a #GError
 *
 * Returns: %TRUE, or %FALSE with @error set
 */
gboolean
ts_session_resume_finish (TsSession *self, GAsyncResult *result, guint *still_pending, GError **error)
{
    Call *call = finish (self, result, ts_session_resume_async, error);
    if (call && still_pending) *still_pending = (guint) MAX (call->still_pending, 0);
    return call != NULL;
}
