/* ts-store.h: TsStore, an open store. */
#pragma once

#include <gio/gio.h>

#include "ts-account.h"
#include "ts-enums.h"

G_BEGIN_DECLS

#define TS_TYPE_STORE (ts_store_get_type ())
G_DECLARE_FINAL_TYPE (TsStore, ts_store, TS, STORE, GObject)

TsStore *ts_store_new_sync (const char *app_id, const char *path, GCancellable *cancellable, GError **error);
void ts_store_new_async (const char *app_id, const char *path, GCancellable *cancellable,
                         GAsyncReadyCallback callback, gpointer user_data);
TsStore *ts_store_new_finish (GAsyncResult *result, GError **error);
TsStore *ts_store_new_with_pin_sync (const char *app_id, const char *path, GBytes *pin, GCancellable *cancellable,
                                     GError **error);
void ts_store_new_with_pin_async (const char *app_id, const char *path, GBytes *pin, GCancellable *cancellable,
                                  GAsyncReadyCallback callback, gpointer user_data);

const char *ts_store_get_app_id (TsStore *self);
const char *ts_store_get_path (TsStore *self);
TsProtection ts_store_get_protection (TsStore *self);
gboolean ts_store_get_locked (TsStore *self);

gboolean ts_store_lock_sync (TsStore *self, gboolean all_processes, GCancellable *cancellable, GError **error);
void ts_store_lock_async (TsStore *self, gboolean all_processes, GCancellable *cancellable, GAsyncReadyCallback callback,
                          gpointer user_data);
gboolean ts_store_lock_finish (TsStore *self, GAsyncResult *result, GError **error);
gboolean ts_store_unlock_sync (TsStore *self, gboolean all_processes, GCancellable *cancellable, GError **error);
void ts_store_unlock_async (TsStore *self, gboolean all_processes, GCancellable *cancellable, GAsyncReadyCallback callback,
                            gpointer user_data);
gboolean ts_store_unlock_finish (TsStore *self, GAsyncResult *result, GError **error);

GBytes *ts_store_get_sync (TsStore *self, const char *account, TsItemKind kind, GCancellable *cancellable, GError **error);
void ts_store_get_async (TsStore *self, const char *account, TsItemKind kind, GCancellable *cancellable,
                         GAsyncReadyCallback callback, gpointer user_data);
GBytes *ts_store_get_finish (TsStore *self, GAsyncResult *result, GError **error);

gboolean ts_store_set_sync (TsStore *self, const char *account, TsItemKind kind, GBytes *secret,
                            GCancellable *cancellable, GError **error);
void ts_store_set_async (TsStore *self, const char *account, TsItemKind kind, GBytes *secret,
                         GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data);
gboolean ts_store_set_finish (TsStore *self, GAsyncResult *result, GError **error);

gboolean ts_store_delete_sync (TsStore *self, const char *account, TsItemKind kind, GCancellable *cancellable,
                               GError **error);
void ts_store_delete_async (TsStore *self, const char *account, TsItemKind kind, GCancellable *cancellable,
                            GAsyncReadyCallback callback, gpointer user_data);
gboolean ts_store_delete_finish (TsStore *self, GAsyncResult *result, GError **error);

TsCredentialState ts_store_get_credential_state_sync (TsStore *self, const char *user_id, GCancellable *cancellable,
                                                      GError **error);
void ts_store_get_credential_state_async (TsStore *self, const char *user_id, GCancellable *cancellable,
                                          GAsyncReadyCallback callback, gpointer user_data);
TsCredentialState ts_store_get_credential_state_finish (TsStore *self, GAsyncResult *result, GError **error);

GPtrArray *ts_store_list_accounts_sync (TsStore *self, GCancellable *cancellable, GError **error);
void ts_store_list_accounts_async (TsStore *self, GCancellable *cancellable, GAsyncReadyCallback callback,
                                   gpointer user_data);
GPtrArray *ts_store_list_accounts_finish (TsStore *self, GAsyncResult *result, GError **error);

G_END_DECLS
