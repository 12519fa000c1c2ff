/* ts-private.h: what the library's files share; not installed. */
#pragma once

#include <gio/gio.h>
#include <tokenstore.h>

#include "ts-account.h"
#include "ts-error.h"
#include "ts-store.h"

G_BEGIN_DECLS

void ts_propagate_cabi_error (GError **error, ts_error *err);
const char *ts_error_code_name (TsError value);

/* A ts_cancel triggered by a GCancellable for the length of one call. */
typedef struct {
    ts_cancel *cancel;
    GCancellable *cancellable;
    gulong handler;
} TsCancelBridge;

gboolean ts_cancel_bridge_begin (TsCancelBridge *bridge, GCancellable *cancellable, GError **error);
void ts_cancel_bridge_end (TsCancelBridge *bridge);

ts_store *ts_store_get_handle (TsStore *self);
TsAccount *ts_account_new_internal (const char *name);
void ts_account_update (TsAccount *self, const char *user_id, gboolean signed_in, gboolean set_state,
                        TsCredentialState state);
TsAccount *ts_store_account_for (TsStore *self, const char *name);

/* Wipes and frees a string of secret content (g_free with a wipe first). */
void ts_secret_string_free (char *string);

G_END_DECLS
