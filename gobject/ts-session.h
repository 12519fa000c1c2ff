/* ts-session.h: TsSession, a store's session with one authorization server. */
#pragma once

#include <gio/gio.h>

#include "ts-access-token.h"
#include "ts-enums.h"
#include "ts-store.h"

G_BEGIN_DECLS

#define TS_TYPE_SESSION (ts_session_get_type ())
G_DECLARE_FINAL_TYPE (TsSession, ts_session, TS, SESSION, GObject)

TsSession *ts_session_new_for_domain (TsStore *store, const char *domain, const char *client_id, GError **error);
TsSession *ts_session_new_for_issuer (TsStore *store, const char *issuer, const char *client_id, GError **error);

TsStore *ts_session_get_store (TsSession *self);
void ts_session_set_redirect_ports (TsSession *self, const guint16 *ports, gsize n_ports);

char *ts_session_sign_in_sync (TsSession *self, const char *account, const char *const *scopes,
                               GCancellable *cancellable, GError **error);
void ts_session_sign_in_async (TsSession *self, const char *account, const char *const *scopes,
                               GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data);
char *ts_session_sign_in_finish (TsSession *self, GAsyncResult *result, GError **error);

TsAccessToken *ts_session_get_access_token_sync (TsSession *self, const char *account, const char *audience,
                                                 const char *const *scopes, guint min_ttl_seconds,
                                                 GCancellable *cancellable, GError **error);
void ts_session_get_access_token_async (TsSession *self, const char *account, const char *audience,
                                        const char *const *scopes, guint min_ttl_seconds, GCancellable *cancellable,
                                        GAsyncReadyCallback callback, gpointer user_data);
TsAccessToken *ts_session_get_access_token_finish (TsSession *self, GAsyncResult *result, GError **error);

TsLogoutOutcome ts_session_logout_sync (TsSession *self, const char *account, GCancellable *cancellable,
                                        GError **error);
void ts_session_logout_async (TsSession *self, const char *account, GCancellable *cancellable,
                              GAsyncReadyCallback callback, gpointer user_data);
TsLogoutOutcome ts_session_logout_finish (TsSession *self, GAsyncResult *result, GError **error);
void ts_session_logout_browser_async (TsSession *self, const char *account, GCancellable *cancellable,
                                      GAsyncReadyCallback callback, gpointer user_data);
TsLogoutOutcome ts_session_logout_browser_finish (TsSession *self, GAsyncResult *result, TsBrowserSessionOutcome *browser_session,
                                                  char **browser_error_code, GError **error);

gboolean ts_session_resume_sync (TsSession *self, guint *still_pending, GCancellable *cancellable, GError **error);
void ts_session_resume_async (TsSession *self, GCancellable *cancellable, GAsyncReadyCallback callback,
                              gpointer user_data);
gboolean ts_session_resume_finish (TsSession *self, GAsyncResult *result, guint *still_pending, GError **error);

G_END_DECLS
