/* ts-access-token.h: TsAccessToken, an access token and its expiry. */
#pragma once

#include <glib-object.h>

G_BEGIN_DECLS

#define TS_TYPE_ACCESS_TOKEN (ts_access_token_get_type ())
G_DECLARE_FINAL_TYPE (TsAccessToken, ts_access_token, TS, ACCESS_TOKEN, GObject)

const char *ts_access_token_get_token (TsAccessToken *self);
gint64 ts_access_token_get_expires_at (TsAccessToken *self);

G_END_DECLS
