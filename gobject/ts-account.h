/* ts-account.h: TsAccount, one account of a store. */
#pragma once

#include <glib-object.h>

#include "ts-enums.h"

G_BEGIN_DECLS

#define TS_TYPE_ACCOUNT (ts_account_get_type ())
G_DECLARE_FINAL_TYPE (TsAccount, ts_account, TS, ACCOUNT, GObject)

const char *ts_account_get_name (TsAccount *self);
const char *ts_account_get_user_id (TsAccount *self);
gboolean ts_account_get_signed_in (TsAccount *self);
TsCredentialState ts_account_get_state (TsAccount *self);

G_END_DECLS
