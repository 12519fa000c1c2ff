/* ts-error.c: the error domain, and the C ABI's errors turned into GErrors. */
#include "ts-error.h"
#include "ts-private.h"

#include <gio/gio.h>
#include <string.h>

/* The library's code strings, in TsError order (TS_ERROR_FAILED has none). */
static const char *const codes[] = {
    NULL, "secretServiceUnavailable", "keyringLocked", "dataKeyMissing", "dataKeyCorrupt",
    "integrityCheckFailed", "databaseCorrupt", "databaseBusy", "schemaTooNew", "migrationFailed",
    "unsafeFileLayout", "invalidInput", "ioError", "storeClosed", "timedOut", "wrongPassphrase",
    "schemaTampered", "diskFull", "storeRolledBack", "notAStore", "migrationRequired", "wrongKeyProvider",
    "tpmUnavailable", "tpmMismatch", "interactionRequired", "serverDeclinedScopes", "minimumTTLTooLarge",
    "notConnectedToInternet", "rateLimited", "serverError", "invalidClient", "invalidRequest",
    "unsupportedTokenType", "invalidGrant", "unexpectedResponse", "tlsFailure", "insecureConfiguration",
    "storage", "authorizationFailed", "stateMismatch", "idTokenInvalid", "loopbackUnavailable",
    "browserUnavailable", "userChanged", "notRevocable", "authorizationMisconfigured", "issuerMismatch",
    "dpopKeyLost", "unsupportedByServer", "stepUpRequired", "accessTokenRejected",
    "storeLocked", "userPresenceDenied", "lockSourceUnavailable", "wrongPIN", "tpmLockedOut",
};

G_STATIC_ASSERT (G_N_ELEMENTS (codes) == TS_ERROR_TPM_LOCKED_OUT + 1);

GQuark
ts_error_quark (void)
{
    return g_quark_from_static_string ("ts-error-quark");
}

GType
ts_error_get_type (void)
{
    static gsize type = 0;
    if (g_once_init_enter (&type)) {
        static GEnumValue values[G_N_ELEMENTS (codes) + 1];
        values[0] = (GEnumValue) {TS_ERROR_FAILED, "TS_ERROR_FAILED", "failed"};
        for (guint i = 1; i < G_N_ELEMENTS (codes); i++)
            values[i] = (GEnumValue) {(gint) i, g_intern_string (codes[i]), codes[i]};
        values[G_N_ELEMENTS (codes)] = (GEnumValue) {0, NULL, NULL};
        g_once_init_leave (&type, g_enum_register_static ("TsError", values));
    }
    return type;
}

/* Moves a C ABI error into `error` (a GError of TS_STORE_ERROR, or G_IO_ERROR_CANCELLED) and
 * frees it. NULL (a failure without details) gives TS_ERROR_FAILED. */
void
ts_propagate_cabi_error (GError **error, ts_error *err)
{
    if (err == NULL) {
        g_set_error_literal (error, TS_STORE_ERROR, TS_ERROR_FAILED, "The call failed without details.");
        return;
    }
    const char *code = ts_error_code (err);
    const char *message = ts_error_message (err);
    if (g_strcmp0 (code, "cancelled") == 0) {
        g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_CANCELLED, message);
    } else {
        gint value = TS_ERROR_FAILED;
        for (guint i = 1; i < G_N_ELEMENTS (codes); i++)
            if (g_strcmp0 (code, codes[i]) == 0)
                value = (gint) i;
        if (value == TS_ERROR_FAILED)
            g_set_error (error, TS_STORE_ERROR, TS_ERROR_FAILED, "%s: %s", code, message);
        else
            g_set_error_literal (error, TS_STORE_ERROR, value, message);
    }
    ts_error_free (err);
}

/* The library's code string of `value` ("keyringLocked"), NULL for TS_ERROR_FAILED. */
const char *
ts_error_code_name (TsError value)
{
    return value > TS_ERROR_FAILED && (guint) value < G_N_ELEMENTS (codes) ? codes[value] : NULL;
}
