/* ts-store.c: TsStore over the C ABI's ts_store. */
#include "ts-private.h"

#include <string.h>

/**
 * TsStore:
 *
 * An open store: an app's tokens sealed in an SQLite file under a data key that the Secret
 * Service (GNOME Keyring, KWallet, KeePassXC) keeps.
 *
 * Make one with [func@Store.new_async] (a [iface@Gio.AsyncInitable]; the keyring is asked on
 * a worker thread) or [ctor@Store.new_sync]. Every call that reads or writes the file has an
 * `_async`/`_finish` pair that runs on a worker thread and calls back on the thread-default
 * main context of the caller, and a `_sync` form for worker threads.
 *
 * The store watches its file: a change made by this process or any other that opens the same
 * store (a sign-in, a logout in another window or in `tokenctl`, a renewal, a key rotation) is
 * emitted as a signal on the thread-default main context of the thread that created the
 * store, typically within a few milliseconds of the commit. The [class@Account] objects it
 * hands out are updated first, with `notify`. Signals name accounts and user ids, never a
 * token.
 */
struct _TsStore {
    GObject parent_instance;
    char *app_id;
    char *path;
    GBytes *pin; /* the TPM + PIN slot's PIN, from construction to the open; then dropped */
    ts_store *handle;
    ts_watch *watch;
    TsProtection protection;
    gboolean locked; /* as found at open, then as the change events said; on `context`'s thread only */
    GMainContext *context;
    GHashTable *accounts; /* name → TsAccount; used on `context`'s thread only */
};

static void ts_store_initable_iface_init (GInitableIface *iface);
static void ts_store_async_initable_iface_init (GAsyncInitableIface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (TsStore, ts_store, G_TYPE_OBJECT,
    G_IMPLEMENT_INTERFACE (G_TYPE_INITABLE, ts_store_initable_iface_init)
    G_IMPLEMENT_INTERFACE (G_TYPE_ASYNC_INITABLE, ts_store_async_initable_iface_init))

enum { PROP_0, PROP_APP_ID, PROP_PATH, PROP_PIN, PROP_PROTECTION, PROP_LOCKED, N_PROPS };
static GParamSpec *properties[N_PROPS];

enum { ACCOUNT_ADDED, ACCOUNT_REMOVED, CREDENTIAL_STATE_CHANGED, TOKENS_RENEWED, KEY_ROTATED, N_SIGNALS };
static guint signals[N_SIGNALS];

/* ---- change events ---------------------------------------------------------------------- */

/* What the watch callback (on the library's watcher thread) shares with the main context. */
typedef struct {
    gint refs;
    GWeakRef store;
    GMainContext *context;
    ts_store *handle; /* valid while the watch lives: the callback never runs after ts_watch_free */
} WatchTarget;

typedef struct {
    WatchTarget *target;
    ts_change_kind kind;
    char *account;
    char *user_id;
    TsCredentialState from, to;
    gboolean have_status, signed_in;
    char *account_user_id;
} ChangeEvent;

static WatchTarget *
watch_target_ref (WatchTarget *target)
{
    g_atomic_int_inc (&target->refs);
    return target;
}

static void
watch_target_unref (WatchTarget *target)
{
    if (!g_atomic_int_dec_and_test (&target->refs)) return;
    g_weak_ref_clear (&target->store);
    g_main_context_unref (target->context);
    g_free (target);
}

static void
change_event_free (gpointer data)
{
    ChangeEvent *event = data;
    watch_target_unref (event->target);
    g_free (event->account);
    g_free (event->user_id);
    g_free (event->account_user_id);
    g_free (event);
}

static TsCredentialState
credential_state_of (ts_state state)
{
    switch (state) {
    case TS_STATE_AUTHORIZED: return TS_CREDENTIAL_STATE_AUTHORIZED;
    case TS_STATE_REVOKED: return TS_CREDENTIAL_STATE_REVOKED;
    default: return TS_CREDENTIAL_STATE_NOT_FOUND;
    }
}

/* On the store's main context: the accounts updated, then the signal. */
static gboolean
dispatch_change (gpointer data)
{
    ChangeEvent *event = data;
    g_autoptr (TsStore) self = g_weak_ref_get (&event->target->store);
    if (self == NULL) return G_SOURCE_REMOVE;
    TsAccount *account = event->account ? ts_store_account_for (self, event->account) : NULL;
    if (account != NULL && event->have_status)
        ts_account_update (account, event->account_user_id, event->signed_in, FALSE, TS_CREDENTIAL_STATE_NOT_FOUND);
    switch (event->kind) {
    case TS_CHANGE_ACCOUNT_ADDED:
        g_signal_emit (self, signals[ACCOUNT_ADDED], 0, account);
        break;
    case TS_CHANGE_ACCOUNT_REMOVED:
        g_signal_emit (self, signals[ACCOUNT_REMOVED], 0, account);
        break;
    case TS_CHANGE_TOKENS_RENEWED:
        g_signal_emit (self, signals[TOKENS_RENEWED], 0, account);
        break;
    case TS_CHANGE_CREDENTIAL_STATE: {
        GHashTableIter iter;
        gpointer value;
        g_hash_table_iter_init (&iter, self->accounts);
        while (g_hash_table_iter_next (&iter, NULL, &value)) {
            TsAccount *each = value;
            if (g_strcmp0 (ts_account_get_user_id (each), event->user_id) == 0)
                ts_account_update (each, event->user_id, ts_account_get_signed_in (each), TRUE, event->to);
        }
        g_signal_emit (self, signals[CREDENTIAL_STATE_CHANGED], 0, event->user_id, event->from, event->to);
        break;
    }
    case TS_CHANGE_KEY_ROTATED:
        g_signal_emit (self, signals[KEY_ROTATED], 0);
        break;
    case TS_CHANGE_STORE_LOCKED:
    case TS_CHANGE_STORE_UNLOCKED:
        if (self->locked != (event->kind == TS_CHANGE_STORE_LOCKED)) {
            self->locked = event->kind == TS_CHANGE_STORE_LOCKED;
            g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_LOCKED]);
        }
        break;
    default:
        break; /* a kind this version does not know */
    }
    return G_SOURCE_REMOVE;
}

/* On the library's watcher thread: the account's status is read here (off the main context),
 * then the event goes to the main context. */
static void
on_change (const ts_change *change, void *user_data)
{
    WatchTarget *target = user_data;
    ChangeEvent *event = g_new0 (ChangeEvent, 1);
    event->target = watch_target_ref (target);
    event->kind = change->kind;
    if (change->account != NULL && g_strcmp0 (change->service, "auth0") == 0) {
        event->account = g_strdup (change->account);
        char *user_id = NULL;
        int signed_in = 0;
        ts_error *err = NULL;
        if (ts_store_account_status (target->handle, change->account, &user_id, &signed_in, &err) == TS_OK) {
            event->have_status = TRUE;
            event->signed_in = signed_in != 0;
            event->account_user_id = g_strdup (user_id);
            ts_string_free (user_id);
        }
        ts_error_free (err);
    } else if (change->account != NULL) {
        change_event_free (event); /* an account of another service: not the session's */
        return;
    }
    event->user_id = g_strdup (change->user_id);
    event->from = credential_state_of (change->from);
    event->to = credential_state_of (change->to);
    g_main_context_invoke_full (target->context, G_PRIORITY_DEFAULT, dispatch_change, event, change_event_free);
}

/* The account object for `name` (made on first use; one per name). On the main context. */
TsAccount *
ts_store_account_for (TsStore *self, const char *name)
{
    TsAccount *account = g_hash_table_lookup (self->accounts, name);
    if (account == NULL) {
        account = ts_account_new_internal (name);
        g_hash_table_insert (self->accounts, g_strdup (name), account);
    }
    return account;
}

/* ---- object ----------------------------------------------------------------------------- */

static void
ts_store_constructed (GObject *object)
{
    TsStore *self = TS_STORE (object);
    self->context = g_main_context_ref_thread_default ();
    G_OBJECT_CLASS (ts_store_parent_class)->constructed (object);
}

/* What closing a store costs (the watcher thread joined, SQLite closed: its last connection
 * checkpoints the WAL and syncs), on a thread of its own: a TsStore dropped on the main thread
 * does not hold up its loop. A change event still under way finds the object gone (its weak
 * reference) and is dropped; the target it reads lives until the watch is freed. */
typedef struct {
    ts_watch *watch;
    ts_store *handle;
    WatchTarget *target;
} Closing;

static gpointer
close_thread (gpointer data)
{
    Closing *closing = data;
    g_clear_pointer (&closing->watch, ts_watch_free); /* no callback after this */
    g_clear_pointer (&closing->handle, ts_store_close);
    g_clear_pointer (&closing->target, watch_target_unref);
    g_free (closing);
    return NULL;
}

static void
ts_store_dispose (GObject *object)
{
    TsStore *self = TS_STORE (object);
    if (self->watch != NULL || self->handle != NULL) {
        Closing *closing = g_new0 (Closing, 1);
        closing->watch = g_steal_pointer (&self->watch);
        closing->handle = g_steal_pointer (&self->handle);
        WatchTarget *target = g_object_get_data (object, "ts-watch-target");
        closing->target = target ? watch_target_ref (target) : NULL;
        GError *error = NULL;
        GThread *thread = g_thread_try_new ("ts-store-close", close_thread, closing, &error);
        if (thread != NULL) {
            g_thread_unref (thread); /* detached */
        } else {
            g_clear_error (&error);
            close_thread (closing); /* no thread to be had: here, as before */
        }
    }
    g_hash_table_remove_all (self->accounts);
    G_OBJECT_CLASS (ts_store_parent_class)->dispose (object);
}

static void
ts_store_finalize (GObject *object)
{
    TsStore *self = TS_STORE (object);
    g_clear_pointer (&self->context, g_main_context_unref);
    g_hash_table_unref (self->accounts);
    g_free (self->app_id);
    g_free (self->path);
    g_clear_pointer (&self->pin, g_bytes_unref);
    G_OBJECT_CLASS (ts_store_parent_class)->finalize (object);
}

static void
ts_store_get_property (GObject *object, guint id, GValue *value, GParamSpec *pspec)
{
    TsStore *self = TS_STORE (object);
    switch (id) {
    case PROP_APP_ID: g_value_set_string (value, self->app_id); break;
    case PROP_PATH: g_value_set_string (value, self->path); break;
    case PROP_PROTECTION: g_value_set_enum (value, self->protection); break;
    case PROP_LOCKED: g_value_set_boolean (value, self->locked); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, id, pspec);
    }
}

static void
ts_store_set_property (GObject *object, guint id, const GValue *value, GParamSpec *pspec)
{
    TsStore *self = TS_STORE (object);
    switch (id) {
    case PROP_APP_ID: self->app_id = g_value_dup_string (value); break;
    case PROP_PATH: self->path = g_value_dup_string (value); break;
    case PROP_PIN: self->pin = g_value_dup_boxed (value); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, id, pspec);
    }
}

static void
ts_store_class_init (TsStoreClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS (klass);
    object_class->constructed = ts_store_constructed;
    object_class->dispose = ts_store_dispose;
    object_class->finalize = ts_store_finalize;
    object_class->get_property = ts_store_get_property;
    object_class->set_property = ts_store_set_property;

    /**
     * TsStore:app-id:
     *
     * The app's id: 1-255 characters of `[A-Za-z0-9._-]` (it names the default folder and the
     * keyring item's label).
     */
    properties[PROP_APP_ID] = g_param_spec_string ("app-id", NULL, NULL, NULL,
        G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
    /**
     * TsStore:path:
     *
     * The database file, or %NULL for the default: `$XDG_DATA_HOME/<app-id>/tokens.sqlite`.
     */
    properties[PROP_PATH] = g_param_spec_string ("path", NULL, NULL, NULL,
        G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
    /**
     * TsStore:pin:
     *
     * The PIN of the store's TPM + PIN key slot (4 to 64 bytes), for a store opened with it
     * ([ctor@Store.new_with_pin_sync]); dropped once the store is open, never readable. The
     * library keeps its own copy in locked memory while the store is open.
     */
    properties[PROP_PIN] = g_param_spec_boxed ("pin", NULL, NULL, G_TYPE_BYTES,
        G_PARAM_WRITABLE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
    /**
     * TsStore:protection:
     *
     * How well the store's data key is protected, as found when the store was opened.
     */
    properties[PROP_PROTECTION] = g_param_spec_enum ("protection", NULL, NULL, TS_TYPE_PROTECTION,
        TS_PROTECTION_LEVEL_KEYRING, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    /**
     * TsStore:locked:
     *
     * Whether the store is locked here (its data key wiped: a lock of this store or for every
     * process, the idle lock, the desktop session's lock): as found when the store was opened
     * (%TRUE for a store opened while `tokenctl lock` or another process's lock for every
     * process is in force), then as the change events said; `notify::locked` follows each
     * change.
     */
    properties[PROP_LOCKED] = g_param_spec_boolean ("locked", NULL, NULL, FALSE,
        G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties (object_class, N_PROPS, properties);

    /**
     * TsStore::account-added:
     * @self: the store
     * @account: the account, signed in now
     *
     * An account got a refresh token (a sign-in), in this process or another.
     */
    signals[ACCOUNT_ADDED] = g_signal_new ("account-added", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
        NULL, NULL, NULL, G_TYPE_NONE, 1, TS_TYPE_ACCOUNT);
    /**
     * TsStore::account-removed:
     * @self: the store
     * @account: the account, signed out now
     *
     * An account's refresh token left it: a logout began (here or in another process), the
     * server refused the token, or the entries were cleared.
     */
    signals[ACCOUNT_REMOVED] = g_signal_new ("account-removed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
        NULL, NULL, NULL, G_TYPE_NONE, 1, TS_TYPE_ACCOUNT);
    /**
     * TsStore::credential-state-changed:
     * @self: the store
     * @user_id: the Apple user id
     * @old_state: the state before
     * @new_state: the state now
     *
     * A user's credential state changed (authorized at a sign-in, revoked at a logout).
     */
    signals[CREDENTIAL_STATE_CHANGED] = g_signal_new ("credential-state-changed", G_TYPE_FROM_CLASS (klass),
        G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 3, G_TYPE_STRING, TS_TYPE_CREDENTIAL_STATE,
        TS_TYPE_CREDENTIAL_STATE);
    /**
     * TsStore::tokens-renewed:
     * @self: the store
     * @account: the account
     *
     * A renewal stored new tokens for the account.
     */
    signals[TOKENS_RENEWED] = g_signal_new ("tokens-renewed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
        NULL, NULL, NULL, G_TYPE_NONE, 1, TS_TYPE_ACCOUNT);
    /**
     * TsStore::key-rotated:
     * @self: the store
     *
     * The store switched to a new data key.
     */
    signals[KEY_ROTATED] = g_signal_new ("key-rotated", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
        NULL, NULL, NULL, G_TYPE_NONE, 0);
}

static void
ts_store_init (TsStore *self)
{
    self->accounts = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
    self->protection = TS_PROTECTION_LEVEL_KEYRING;
}

static gboolean
ts_store_initable_init (GInitable *initable, GCancellable *cancellable, GError **error)
{
    TsStore *self = TS_STORE (initable);
    ts_error *err = NULL;
    if (g_cancellable_set_error_if_cancelled (cancellable, error)) return FALSE;
    if (self->handle != NULL) return TRUE;
    int opened;
    if (self->pin != NULL) {
        gsize length = 0;
        const guint8 *pin = g_bytes_get_data (self->pin, &length);
        opened = ts_store_open_with_pin (self->path, self->app_id, pin, length, &self->handle, &err);
        g_clear_pointer (&self->pin, g_bytes_unref); /* one try: a wrong PIN is not tried again */
    } else {
        opened = ts_store_open (self->path, self->app_id, &self->handle, &err);
    }
    if (opened != TS_OK) {
        ts_propagate_cabi_error (error, err);
        return FALSE;
    }
    ts_protection tier = TS_PROTECTION_KEYRING;
    if (ts_store_protection (self->handle, &tier, NULL, &err) != TS_OK) {
        ts_propagate_cabi_error (error, err);
        return FALSE;
    }
    self->protection = (TsProtection) tier;
    /* Before the watch: its events are the transitions from here on (the watch's own first read
     * included), and nothing else touches `locked` until it runs. */
    int locked = 0;
    if (ts_store_is_locked (self->handle, &locked, &err) != TS_OK) {
        ts_propagate_cabi_error (error, err);
        return FALSE;
    }
    self->locked = locked != 0;
    WatchTarget *target = g_new0 (WatchTarget, 1);
    target->refs = 1;
    g_weak_ref_init (&target->store, self);
    target->context = g_main_context_ref (self->context);
    target->handle = self->handle;
    /* The watch's reference to the target lives as long as the store object (one per open). */
    g_object_set_data_full (G_OBJECT (self), "ts-watch-target", target, (GDestroyNotify) watch_target_unref);
    if (ts_store_watch (self->handle, on_change, target, &self->watch, &err) != TS_OK) {
        ts_propagate_cabi_error (error, err);
        return FALSE;
    }
    return TRUE;
}

static void
ts_store_initable_iface_init (GInitableIface *iface)
{
    iface->init = ts_store_initable_init;
}

static void
ts_store_async_initable_iface_init (GAsyncInitableIface *iface)
{
    (void) iface; /* the default: GInitable's init on a worker thread */
}

ts_store *
ts_store_get_handle (TsStore *self)
{
    return self->handle;
}

/**
 * ts_store_new_sync:
 * @app_id: the app's id (1-255 characters of `[A-Za-z0-9._-]`)
 * @path: (nullable): the database file, or %NULL for the default location
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError in #TS_STORE_ERROR
 *
 * Opens (or creates) a store, blocking: call it from a worker thread, or use
 * [func@Store.new_async]. The data key is read from (or, for a new store, made in) the Secret
 * Service.
 *
 * Returns: (transfer full): the store, or %NULL with @error set
 */
TsStore *
ts_store_new_sync (const char *app_id, const char *path, GCancellable *cancellable, GError **error)
{
    g_return_val_if_fail (app_id != NULL, NULL);
    return g_initable_new (TS_TYPE_STORE, cancellable, error, "app-id", app_id, "path", path, NULL);
}

/**
 * ts_store_new_async:
 * @app_id: the app's id
 * @path: (nullable): the database file, or %NULL for the default location
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when the store is open
 * @user_data: (closure): data for @callback
 *
 * Opens (or creates) a store on a worker thread; @callback runs on the thread-default main
 * context of the caller, which is also where the store's signals are emitted. Finish with
 * [ctor@Store.new_finish].
 */
void
ts_store_new_async (const char *app_id, const char *path, GCancellable *cancellable, GAsyncReadyCallback callback,
                    gpointer user_data)
{
    g_return_if_fail (app_id != NULL);
    g_async_initable_new_async (TS_TYPE_STORE, G_PRIORITY_DEFAULT, cancellable, callback, user_data, "app-id", app_id,
                                "path", path, NULL);
}

/**
 * ts_store_new_with_pin_sync:
 * @app_id: the app's id
 * @path: (nullable): the database file, or %NULL for the default location
 * @pin: the PIN of the store's TPM + PIN key slot: 4 to 64 bytes (e.g. the UTF-8 digits the
 *   user typed)
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError in #TS_STORE_ERROR
 *
 * Opens an existing store with its TPM + PIN key slot, blocking (the slot is added with
 * `tokenctl slot add tpm-pin --pin-fd N`). The TPM unseals the data key under an
 * authorization derived from the PIN and the store, and itself limits wrong PINs: a wrong one
 * is %TS_ERROR_WRONG_PIN (the message says how many more the TPM allows), a TPM in
 * dictionary-attack lockout %TS_ERROR_TPM_LOCKED_OUT (the right PIN too, until it recovers; do
 * not reset the store). No failure changes the store. The library keeps a copy of the PIN in
 * locked memory while the store is open (an unlock unseals the key with it again) and wipes
 * it at close; @pin itself is dropped once the store is open.
 *
 * Returns: (transfer full): the store, or %NULL with @error set
 */
TsStore *
ts_store_new_with_pin_sync (const char *app_id, const char *path, GBytes *pin, GCancellable *cancellable,
                            GError **error)
{
    g_return_val_if_fail (app_id != NULL, NULL);
    g_return_val_if_fail (pin != NULL, NULL);
    return g_initable_new (TS_TYPE_STORE, cancellable, error, "app-id", app_id, "path", path, "pin", pin, NULL);
}

/**
 * ts_store_new_with_pin_async:
 * @app_id: the app's id
 * @path: (nullable): the database file, or %NULL for the default location
 * @pin: the PIN of the store's TPM + PIN key slot (see [ctor@Store.new_with_pin_sync])
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when the store is open
 * @user_data: (closure): data for @callback
 *
 * Opens an existing store with its TPM + PIN key slot on a worker thread (see
 * [ctor@Store.new_with_pin_sync]). Finish with [ctor@Store.new_finish].
 */
void
ts_store_new_with_pin_async (const char *app_id, const char *path, GBytes *pin, GCancellable *cancellable,
                             GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (app_id != NULL);
    g_return_if_fail (pin != NULL);
    g_async_initable_new_async (TS_TYPE_STORE, G_PRIORITY_DEFAULT, cancellable, callback, user_data, "app-id", app_id,
                                "path", path, "pin", pin, NULL);
}

/**
 * ts_store_new_finish:
 * @result: the result passed to the callback of [func@Store.new_async]
 * @error: return location for a #GError
 *
 * Returns: (transfer full): the store, or %NULL with @error set
 */
TsStore *
ts_store_new_finish (GAsyncResult *result, GError **error)
{
    g_autoptr (GObject) source = g_async_result_get_source_object (result);
    GObject *object = g_async_initable_new_finish (G_ASYNC_INITABLE (source), result, error);
    return object ? TS_STORE (object) : NULL;
}

/**
 * ts_store_get_app_id:
 * @self: a store
 *
 * Returns: (transfer none): the app id
 */
const char *
ts_store_get_app_id (TsStore *self)
{
    g_return_val_if_fail (TS_IS_STORE (self), NULL);
    return self->app_id;
}

/**
 * ts_store_get_path:
 * @self: a store
 *
 * Returns: (transfer none) (nullable): the path given at open, or %NULL for the default
 */
const char *
ts_store_get_path (TsStore *self)
{
    g_return_val_if_fail (TS_IS_STORE (self), NULL);
    return self->path;
}

/**
 * ts_store_get_protection:
 * @self: a store
 *
 * Returns: how well the data key is protected
 */
TsProtection
ts_store_get_protection (TsStore *self)
{
    g_return_val_if_fail (TS_IS_STORE (self), TS_PROTECTION_LEVEL_KEYRING);
    return self->protection;
}

/**
 * ts_store_get_locked:
 * @self: a store
 *
 * Returns: whether the store is locked here (the [property@Store:locked] property)
 */
gboolean
ts_store_get_locked (TsStore *self)
{
    g_return_val_if_fail (TS_IS_STORE (self), FALSE);
    return self->locked;
}

/* ---- lock, unlock ----------------------------------------------------------------------- */

/* `locked` set and notified on the store's main context (the change event that follows finds it
 * set and notifies nothing more). */
static void
set_locked (TsStore *self, gboolean locked)
{
    if (self->locked == locked) return;
    self->locked = locked;
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_LOCKED]);
}

static gboolean
lock_call (TsStore *self, gboolean lock, gboolean all_processes, GError **error)
{
    ts_error *err = NULL;
    int status = lock ? ts_store_lock (self->handle, all_processes ? 1 : 0, &err)
                      : ts_store_unlock (self->handle, all_processes ? 1 : 0, &err);
    if (status != TS_OK) {
        ts_propagate_cabi_error (error, err);
        return FALSE;
    }
    return TRUE;
}

static void
lock_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    (void) cancellable;
    guint flags = GPOINTER_TO_UINT (data); /* 1: lock, 2: all processes */
    GError *error = NULL;
    if (lock_call (TS_STORE (source), (flags & 1) != 0, (flags & 2) != 0, &error))
        g_task_return_boolean (task, TRUE);
    else
        g_task_return_error (task, error);
}

/* On the caller's main context: the worker's result; `locked` updated before the caller's
 * callback runs, so its _finish sees the new state in the property. */
static void
lock_done (GObject *source, GAsyncResult *result, gpointer data)
{
    GTask *outer = data;
    TsStore *self = TS_STORE (source);
    GError *error = NULL;
    gboolean lock = GPOINTER_TO_UINT (g_task_get_task_data (outer)) & 1;
    if (g_task_propagate_boolean (G_TASK (result), &error)) {
        GMainContext *here = g_main_context_ref_thread_default ();
        if (here == self->context) set_locked (self, lock); /* else the change event sets it there */
        g_main_context_unref (here);
        g_task_return_boolean (outer, TRUE);
    } else {
        g_task_return_error (outer, error);
    }
    g_object_unref (outer);
}

static void
lock_async (TsStore *self, guint flags, GCancellable *cancellable, GAsyncReadyCallback callback,
            gpointer user_data, gpointer tag)
{
    GTask *outer = g_task_new (self, cancellable, callback, user_data);
    g_task_set_source_tag (outer, tag);
    g_task_set_task_data (outer, GUINT_TO_POINTER (flags), NULL);
    g_autoptr (GTask) inner = g_task_new (self, NULL, lock_done, outer);
    g_task_set_task_data (inner, GUINT_TO_POINTER (flags), NULL);
    g_task_run_in_thread (inner, lock_thread);
}

/**
 * ts_store_lock_sync:
 * @self: a store
 * @all_processes: also lock it for every other process that has it open, until an unlock for
 *   every process (as `tokenctl lock`)
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Locks the store, blocking: its data key is wiped from memory and every later read or write
 * fails with %TS_ERROR_STORE_LOCKED until [method@Store.unlock_sync]. [property@Store:locked]
 * follows on the store's main context.
 *
 * Returns: %TRUE, or %FALSE with @error set
 */
gboolean
ts_store_lock_sync (TsStore *self, gboolean all_processes, GCancellable *cancellable, GError **error)
{
    g_return_val_if_fail (TS_IS_STORE (self), FALSE);
    if (g_cancellable_set_error_if_cancelled (cancellable, error)) return FALSE;
    return lock_call (self, TRUE, all_processes, error);
}

/**
 * ts_store_lock_async:
 * @self: a store
 * @all_processes: also lock it for every other process that has it open (as `tokenctl lock`)
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when it is locked
 * @user_data: (closure): data for @callback
 *
 * Locks the store on a worker thread (see [method@Store.lock_sync]); [property@Store:locked] is
 * %TRUE when @callback runs. Finish with [method@Store.lock_finish].
 */
void
ts_store_lock_async (TsStore *self, gboolean all_processes, GCancellable *cancellable, GAsyncReadyCallback callback,
                     gpointer user_data)
{
    g_return_if_fail (TS_IS_STORE (self));
    lock_async (self, 1 | (all_processes ? 2 : 0), cancellable, callback, user_data, ts_store_lock_async);
}

/**
 * ts_store_lock_finish:
 * @self: a store
 * @result: the result passed to the callback
 * @error: return location for a #GError
 *
 * Returns: %TRUE, or %FALSE with @error set
 */
gboolean
ts_store_lock_finish (TsStore *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
    return g_task_propagate_boolean (G_TASK (result), error);
}

/**
 * ts_store_unlock_sync:
 * @self: a store
 * @all_processes: also end a lock for every process (as `tokenctl unlock`)
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Unlocks the store, blocking: its data key is fetched again from its key provider (the
 * keyring: a D-Bus round trip). A store locked for every process stays locked
 * (%TS_ERROR_STORE_LOCKED) unless @all_processes is %TRUE.
 *
 * Returns: %TRUE, or %FALSE with @error set
 */
gboolean
ts_store_unlock_sync (TsStore *self, gboolean all_processes, GCancellable *cancellable, GError **error)
{
    g_return_val_if_fail (TS_IS_STORE (self), FALSE);
    if (g_cancellable_set_error_if_cancelled (cancellable, error)) return FALSE;
    return lock_call (self, FALSE, all_processes, error);
}

/**
 * ts_store_unlock_async:
 * @self: a store
 * @all_processes: also end a lock for every process (as `tokenctl unlock`)
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when it is unlocked
 * @user_data: (closure): data for @callback
 *
 * Unlocks the store on a worker thread (see [method@Store.unlock_sync]);
 * [property@Store:locked] is %FALSE when @callback runs. Finish with
 * [method@Store.unlock_finish].
 */
void
ts_store_unlock_async (TsStore *self, gboolean all_processes, GCancellable *cancellable, GAsyncReadyCallback callback,
                       gpointer user_data)
{
    g_return_if_fail (TS_IS_STORE (self));
    lock_async (self, all_processes ? 2 : 0, cancellable, callback, user_data, ts_store_unlock_async);
}

/**
 * ts_store_unlock_finish:
 * @self: a store
 * @result: the result passed to the callback
 * @error: return location for a #GError
 *
 * Returns: %TRUE, or %FALSE with @error set
 */
gboolean
ts_store_unlock_finish (TsStore *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
    return g_task_propagate_boolean (G_TASK (result), error);
}
