/* ts-store-calls.c: TsStore's items, credential states and accounts, each as _async/_finish
 * over GTask (the C ABI's blocking call on a worker thread) and _sync. */
#include "ts-private.h"

#include <string.h>

/* ---- the cancel bridge (shared with ts-session.c) --------------------------------------- */

static void
trigger (GCancellable *cancellable, gpointer data)
{
    (void) cancellable;
    ts_cancel_trigger (data);
}

gboolean
ts_cancel_bridge_begin (TsCancelBridge *bridge, GCancellable *cancellable, GError **error)
{
    ts_error *err = NULL;
    memset (bridge, 0, sizeof *bridge);
    if (cancellable == NULL) return TRUE;
    if (ts_cancel_new (&bridge->cancel, &err) != TS_OK) {
        ts_propagate_cabi_error (error, err);
        return FALSE;
    }
    bridge->cancellable = g_object_ref (cancellable);
    /* Cancelled already: the handler runs now, and the call fails at once with nothing changed. */
    bridge->handler = g_cancellable_connect (cancellable, G_CALLBACK (trigger), bridge->cancel, NULL);
    return TRUE;
}

void
ts_cancel_bridge_end (TsCancelBridge *bridge)
{
    if (bridge->cancellable == NULL) return;
    g_cancellable_disconnect (bridge->cancellable, bridge->handler); /* waits for a running handler */
    g_clear_object (&bridge->cancellable);
    g_clear_pointer (&bridge->cancel, ts_cancel_free);
}

/* ---- items ------------------------------------------------------------------------------ */

typedef struct {
    char *account;
    char *user_id;
    TsItemKind kind;
    GBytes *secret;
} ItemCall;

static void
item_call_free (gpointer data)
{
    ItemCall *call = data;
    g_free (call->account);
    g_free (call->user_id);
    g_clear_pointer (&call->secret, g_bytes_unref);
    g_free (call);
}

typedef struct {
    uint8_t *bytes;
    size_t length;
} LibraryBuffer;

static void
library_buffer_free (gpointer data)
{
    LibraryBuffer *buffer = data;
    ts_bytes_free (buffer->bytes, buffer->length); /* wipes first */
    g_free (buffer);
}

/* The read, ended by @cancellable while polkit asks the user (a store whose access policy gates
 * the item on the user's presence): polkit's dialog closes and the read fails with
 * G_IO_ERROR_CANCELLED. */
static GBytes *
item_get (TsStore *self, const char *account, TsItemKind kind, GCancellable *cancellable, GError **error)
{
    uint8_t *bytes = NULL;
    size_t length = 0;
    ts_error *err = NULL;
    TsCancelBridge bridge;
    if (!ts_cancel_bridge_begin (&bridge, cancellable, error)) return NULL;
    int status = ts_item_get_cancellable (ts_store_get_handle (self), NULL, account, (ts_kind) kind, bridge.cancel, &bytes,
                                          &length, &err);
    ts_cancel_bridge_end (&bridge);
    if (status == TS_NOT_FOUND) return NULL;
    if (status != TS_OK) {
        ts_propagate_cabi_error (error, err);
        return NULL;
    }
    LibraryBuffer *buffer = g_new (LibraryBuffer, 1);
    buffer->bytes = bytes;
    buffer->length = length;
    return g_bytes_new_with_free_func (bytes, length, library_buffer_free, buffer);
}

static void
get_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    ItemCall *call = data;
    GError *error = NULL;
    GBytes *bytes = item_get (TS_STORE (source), call->account, call->kind, cancellable, &error);
    if (error) g_task_return_error (task, error);
    else g_task_return_pointer (task, bytes, (GDestroyNotify) g_bytes_unref);
}

/**
 * ts_store_get_sync:
 * @self: a store
 * @account: the account (of service "auth0")
 * @kind: what the item holds
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Reads an item, blocking. The bytes are the library's locked memory, wiped when the last
 * reference goes. Where the store's access policy gates the item on the user's presence, the
 * read waits while polkit asks the user; cancelling @cancellable then closes polkit's dialog and
 * the read fails with %G_IO_ERROR_CANCELLED, reading nothing.
 *
 * Returns: (transfer full) (nullable): the secret, or %NULL when there is no such item (@error
 *   unset) or on an error (@error set)
 */
GBytes *
ts_store_get_sync (TsStore *self, const char *account, TsItemKind kind, GCancellable *cancellable, GError **error)
{
    g_return_val_if_fail (TS_IS_STORE (self), NULL);
    if (g_cancellable_set_error_if_cancelled (cancellable, error)) return NULL;
    return item_get (self, account, kind, cancellable, error);
}

/**
 * ts_store_get_async:
 * @self: a store
 * @account: the account (of service "auth0")
 * @kind: what the item holds
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called with the result
 * @user_data: (closure): data for @callback
 *
 * Reads an item on a worker thread. Finish with [method@Store.get_finish]. Cancelling
 * @cancellable while polkit asks the user (see [method@Store.get_sync]) closes its dialog.
 */
void
ts_store_get_async (TsStore *self, const char *account, TsItemKind kind, GCancellable *cancellable,
                    GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (TS_IS_STORE (self));
    g_autoptr (GTask) task = g_task_new (self, cancellable, callback, user_data);
    g_task_set_source_tag (task, ts_store_get_async);
    ItemCall *call = g_new0 (ItemCall, 1);
    call->account = g_strdup (account);
    call->kind = kind;
    g_task_set_task_data (task, call, item_call_free);
    g_task_run_in_thread (task, get_thread);
}

/**
 * ts_store_get_finish:
 * @self: a store
 * @result: the result passed to the callback
 * @error: return location for a #GError
 *
 * Returns: (transfer full) (nullable): the secret, or %NULL when there is no such item (@error
 *   unset) or on an error (@error set)
 */
GBytes *
ts_store_get_finish (TsStore *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail (g_task_is_valid (result, self), NULL);
    return g_task_propagate_pointer (G_TASK (result), error);
}

static gboolean
item_set (TsStore *self, const char *account, TsItemKind kind, GBytes *secret, GError **error)
{
    gsize length = 0;
    const uint8_t *bytes = secret ? g_bytes_get_data (secret, &length) : NULL;
    ts_error *err = NULL;
    if (ts_item_set (ts_store_get_handle (self), NULL, account, (ts_kind) kind, bytes, length, &err) != TS_OK) {
        ts_propagate_cabi_error (error, err);
        return FALSE;
    }
    return TRUE;
}

static gboolean
item_delete (TsStore *self, const char *account, TsItemKind kind, GError **error)
{
    ts_error *err = NULL;
    if (ts_item_delete (ts_store_get_handle (self), NULL, account, (ts_kind) kind, &err) != TS_OK) {
        ts_propagate_cabi_error (error, err);
        return FALSE;
    }
    return TRUE;
}

static void
set_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    (void) cancellable;
    ItemCall *call = data;
    GError *error = NULL;
    gboolean done = call->secret ? item_set (TS_STORE (source), call->account, call->kind, call->secret, &error)
                                 : item_delete (TS_STORE (source), call->account, call->kind, &error);
    if (done) g_task_return_boolean (task, TRUE);
    else g_task_return_error (task, error);
}

/**
 * ts_store_set_sync:
 * @self: a store
 * @account: the account (of service "auth0")
 * @kind: what the item holds
 * @secret: the secret (at most 1 MiB)
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Stores an item, replacing one that exists, blocking; durable when it returns %TRUE.
 *
 * Returns: %TRUE, or %FALSE with @error set
 */
gboolean
ts_store_set_sync (TsStore *self, const char *account, TsItemKind kind, GBytes *secret, GCancellable *cancellable,
                   GError **error)
{
    g_return_val_if_fail (TS_IS_STORE (self) && secret != NULL, FALSE);
    if (g_cancellable_set_error_if_cancelled (cancellable, error)) return FALSE;
    return item_set (self, account, kind, secret, error);
}

/**
 * ts_store_set_async:
 * @self: a store
 * @account: the account (of service "auth0")
 * @kind: what the item holds
 * @secret: the secret (at most 1 MiB)
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when it is stored
 * @user_data: (closure): data for @callback
 *
 * Stores an item on a worker thread. Finish with [method@Store.set_finish].
 */
void
ts_store_set_async (TsStore *self, const char *account, TsItemKind kind, GBytes *secret, GCancellable *cancellable,
                    GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (TS_IS_STORE (self) && secret != NULL);
    g_autoptr (GTask) task = g_task_new (self, cancellable, callback, user_data);
    g_task_set_source_tag (task, ts_store_set_async);
    ItemCall *call = g_new0 (ItemCall, 1);
    call->account = g_strdup (account);
    call->kind = kind;
    call->secret = g_bytes_ref (secret);
    g_task_set_task_data (task, call, item_call_free);
    g_task_run_in_thread (task, set_thread);
}

/**
 * ts_store_set_finish:
 * @self: a store
 * @result: the result passed to the callback
 * @error: return location for a #GError
 *
 * Returns: %TRUE, or %FALSE with @error set
 */
gboolean
ts_store_set_finish (TsStore *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
    return g_task_propagate_boolean (G_TASK (result), error);
}

/**
 * ts_store_delete_sync:
 * @self: a store
 * @account: the account (of service "auth0")
 * @kind: what the item holds
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Deletes an item, blocking; deleting an absent item succeeds.
 *
 * Returns: %TRUE, or %FALSE with @error set
 */
gboolean
ts_store_delete_sync (TsStore *self, const char *account, TsItemKind kind, GCancellable *cancellable, GError **error)
{
    g_return_val_if_fail (TS_IS_STORE (self), FALSE);
    if (g_cancellable_set_error_if_cancelled (cancellable, error)) return FALSE;
    return item_delete (self, account, kind, error);
}

/**
 * ts_store_delete_async:
 * @self: a store
 * @account: the account (of service "auth0")
 * @kind: what the item holds
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when it is deleted
 * @user_data: (closure): data for @callback
 *
 * Deletes an item on a worker thread. Finish with [method@Store.delete_finish].
 */
void
ts_store_delete_async (TsStore *self, const char *account, TsItemKind kind, GCancellable *cancellable,
                       GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (TS_IS_STORE (self));
    g_autoptr (GTask) task = g_task_new (self, cancellable, callback, user_data);
    g_task_set_source_tag (task, ts_store_delete_async);
    ItemCall *call = g_new0 (ItemCall, 1);
    call->account = g_strdup (account);
    call->kind = kind;
    g_task_set_task_data (task, call, item_call_free);
    g_task_run_in_thread (task, set_thread);
}

/**
 * ts_store_delete_finish:
 * @self: a store
 * @result: the result passed to the callback
 * @error: return location for a #GError
 *
 * Returns: %TRUE, or %FALSE with @error set
 */
gboolean
ts_store_delete_finish (TsStore *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
    return g_task_propagate_boolean (G_TASK (result), error);
}

/* ---- credential state ------------------------------------------------------------------- */

static gboolean
credential_state (TsStore *self, const char *user_id, TsCredentialState *out, GError **error)
{
    ts_state state = TS_STATE_NOT_FOUND;
    ts_error *err = NULL;
    if (ts_credential_state (ts_store_get_handle (self), user_id, &state, &err) != TS_OK) {
        ts_propagate_cabi_error (error, err);
        return FALSE;
    }
    *out = state == TS_STATE_AUTHORIZED ? TS_CREDENTIAL_STATE_AUTHORIZED
         : state == TS_STATE_REVOKED   ? TS_CREDENTIAL_STATE_REVOKED
                                       : TS_CREDENTIAL_STATE_NOT_FOUND;
    return TRUE;
}

static void
state_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    (void) cancellable;
    ItemCall *call = data;
    GError *error = NULL;
    TsCredentialState state;
    if (credential_state (TS_STORE (source), call->user_id, &state, &error)) g_task_return_int (task, state);
    else g_task_return_error (task, error);
}

/**
 * ts_store_get_credential_state_sync:
 * @self: a store
 * @user_id: an Apple user id
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * The credential state of @user_id, blocking.
 *
 * Returns: the state (%TS_CREDENTIAL_STATE_NOT_FOUND with @error set on an error)
 */
TsCredentialState
ts_store_get_credential_state_sync (TsStore *self, const char *user_id, GCancellable *cancellable, GError **error)
{
    TsCredentialState state = TS_CREDENTIAL_STATE_NOT_FOUND;
    g_return_val_if_fail (TS_IS_STORE (self), state);
    if (g_cancellable_set_error_if_cancelled (cancellable, error)) return state;
    credential_state (self, user_id, &state, error);
    return state;
}

/**
 * ts_store_get_credential_state_async:
 * @self: a store
 * @user_id: an Apple user id
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called with the result
 * @user_data: (closure): data for @callback
 *
 * The credential state of @user_id, read on a worker thread. Finish with
 * [method@Store.get_credential_state_finish].
 */
void
ts_store_get_credential_state_async (TsStore *self, const char *user_id, GCancellable *cancellable,
                                     GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail (TS_IS_STORE (self));
    g_autoptr (GTask) task = g_task_new (self, cancellable, callback, user_data);
    g_task_set_source_tag (task, ts_store_get_credential_state_async);
    ItemCall *call = g_new0 (ItemCall, 1);
    call->user_id = g_strdup (user_id);
    g_task_set_task_data (task, call, item_call_free);
    g_task_run_in_thread (task, state_thread);
}

/**
 * ts_store_get_credential_state_finish:
 * @self: a store
 * @result: the result passed to the callback
 * @error: return location for a #GError
 *
 * Returns: the state (%TS_CREDENTIAL_STATE_NOT_FOUND with @error set on an error)
 */
TsCredentialState
ts_store_get_credential_state_finish (TsStore *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail (g_task_is_valid (result, self), TS_CREDENTIAL_STATE_NOT_FOUND);
    GError *local = NULL;
    gssize state = g_task_propagate_int (G_TASK (result), &local);
    if (local) {
        g_propagate_error (error, local);
        return TS_CREDENTIAL_STATE_NOT_FOUND;
    }
    return (TsCredentialState) state;
}

/* ---- accounts --------------------------------------------------------------------------- */

typedef struct {
    char *name;
    char *user_id;
    gboolean signed_in;
    TsCredentialState state;
} AccountStatus;

static void
account_status_free (gpointer data)
{
    AccountStatus *status = data;
    g_free (status->name);
    g_free (status->user_id);
    g_free (status);
}

/* The accounts' status, read from the file (any thread). */
static GPtrArray *
read_accounts (TsStore *self, GError **error)
{
    ts_store *handle = ts_store_get_handle (self);
    char **names = NULL;
    ts_error *err = NULL;
    if (ts_store_accounts (handle, &names, &err) != TS_OK) {
        ts_propagate_cabi_error (error, err);
        return NULL;
    }
    GPtrArray *statuses = g_ptr_array_new_with_free_func (account_status_free);
    for (char **name = names; *name; name++) {
        AccountStatus *status = g_new0 (AccountStatus, 1);
        status->name = g_strdup (*name);
        char *user_id = NULL;
        int signed_in = 0;
        status->state = TS_CREDENTIAL_STATE_NOT_FOUND;
        if (ts_store_account_status (handle, *name, &user_id, &signed_in, &err) != TS_OK
            || (user_id && !credential_state (self, user_id, &status->state, error))) {
            if (err) ts_propagate_cabi_error (error, err);
            ts_string_free (user_id);
            account_status_free (status);
            g_ptr_array_unref (statuses);
            ts_strings_free (names);
            return NULL;
        }
        status->user_id = g_strdup (user_id);
        status->signed_in = signed_in != 0;
        ts_string_free (user_id);
        g_ptr_array_add (statuses, status);
    }
    ts_strings_free (names);
    return statuses;
}

/* On the store's main context: the account objects, updated (the store keeps them: the array
 * holds no reference of its own). */
static GPtrArray *
account_objects (TsStore *self, GPtrArray *statuses)
{
    GPtrArray *accounts = g_ptr_array_new ();
    for (guint i = 0; i < statuses->len; i++) {
        AccountStatus *status = g_ptr_array_index (statuses, i);
        TsAccount *account = ts_store_account_for (self, status->name);
        ts_account_update (account, status->user_id, status->signed_in, TRUE, status->state);
        g_ptr_array_add (accounts, account);
    }
    return accounts;
}

static void
accounts_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    (void) data;
    (void) cancellable;
    GError *error = NULL;
    GPtrArray *statuses = read_accounts (TS_STORE (source), &error);
    if (statuses) g_task_return_pointer (task, statuses, (GDestroyNotify) g_ptr_array_unref);
    else g_task_return_error (task, error);
}

/**
 * ts_store_list_accounts_sync:
 * @self: a store
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * The accounts (of service "auth0") the store holds entries for, sorted by name, blocking. Call
 * it on the thread of the store's main context (the account objects belong to it).
 *
 * Returns: (transfer container) (element-type TsAccount): the accounts (the store keeps each
 *   object for as long as it lives), or %NULL with @error set
 */
GPtrArray *
ts_store_list_accounts_sync (TsStore *self, GCancellable *cancellable, GError **error)
{
    g_return_val_if_fail (TS_IS_STORE (self), NULL);
    if (g_cancellable_set_error_if_cancelled (cancellable, error)) return NULL;
    g_autoptr (GPtrArray) statuses = read_accounts (self, error);
    return statuses ? account_objects (self, statuses) : NULL;
}

/**
 * ts_store_list_accounts_async:
 * @self: a store
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called with the result
 * @user_data: (closure): data for @callback
 *
 * The accounts, read on a worker thread. Finish with [method@Store.list_accounts_finish] on
 * the store's main context.
 */
void
ts_store_list_accounts_async (TsStore *self, GCancellable *cancellable, GAsyncReadyCallback callback,
                              gpointer user_data)
{
    g_return_if_fail (TS_IS_STORE (self));
    g_autoptr (GTask) task = g_task_new (self, cancellable, callback, user_data);
    g_task_set_source_tag (task, ts_store_list_accounts_async);
    g_task_run_in_thread (task, accounts_thread);
}

/**
 * ts_store_list_accounts_finish:
 * @self: a store
 * @result: the result passed to the callback
 * @error: return location for a #GError
 *
 * Returns: (transfer container) (element-type TsAccount): the accounts (the store keeps each
 *   object for as long as it lives), or %NULL with @error set
 */
GPtrArray *
ts_store_list_accounts_finish (TsStore *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail (g_task_is_valid (result, self), NULL);
    g_autoptr (GPtrArray) statuses = g_task_propagate_pointer (G_TASK (result), error);
    return statuses ? account_objects (self, statuses) : NULL;
}
