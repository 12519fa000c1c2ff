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

/* Their C names, the GEnumValue names: GObject Introspection takes a member's c:identifier from
 * the registered value name, so the .gir (and every binding made from it) names TS_ERROR_* as
 * the header does. */
static const char *const names[] = {
    "TS_ERROR_FAILED", "TS_ERROR_SECRET_SERVICE_UNAVAILABLE", "TS_ERROR_KEYRING_LOCKED",
    "TS_ERROR_DATA_KEY_MISSING", "TS_ERROR_DATA_KEY_CORRUPT", "TS_ERROR_INTEGRITY_CHECK_FAILED",
    "TS_ERROR_DATABASE_CORRUPT", "TS_ERROR_DATABASE_BUSY", "TS_ERROR_SCHEMA_TOO_NEW",
    "TS_ERROR_MIGRATION_FAILED", "TS_ERROR_UNSAFE_FILE_LAYOUT", "TS_ERROR_INVALID_INPUT", "TS_ERROR_IO_ERROR",
    "TS_ERROR_STORE_CLOSED", "TS_ERROR_TIMED_OUT", "TS_ERROR_WRONG_PASSPHRASE", "TS_ERROR_SCHEMA_TAMPERED",
    "TS_ERROR_DISK_FULL", "TS_ERROR_STORE_ROLLED_BACK", "TS_ERROR_NOT_A_STORE", "TS_ERROR_MIGRATION_REQUIRED",
    "TS_ERROR_WRONG_KEY_PROVIDER", "TS_ERROR_TPM_UNAVAILABLE", "TS_ERROR_TPM_MISMATCH",
    "TS_ERROR_INTERACTION_REQUIRED", "TS_ERROR_SERVER_DECLINED_SCOPES", "TS_ERROR_MINIMUM_TTL_TOO_LARGE",
    "TS_ERROR_NOT_CONNECTED_TO_INTERNET", "TS_ERROR_RATE_LIMITED", "TS_ERROR_SERVER_ERROR",
    "TS_ERROR_INVALID_CLIENT", "TS_ERROR_INVALID_REQUEST", "TS_ERROR_UNSUPPORTED_TOKEN_TYPE",
    "TS_ERROR_INVALID_GRANT", "TS_ERROR_UNEXPECTED_RESPONSE", "TS_ERROR_TLS_FAILURE",
    "TS_ERROR_INSECURE_CONFIGURATION", "TS_ERROR_STORAGE", "TS_ERROR_AUTHORIZATION_FAILED",
    "TS_ERROR_STATE_MISMATCH", "TS_ERROR_ID_TOKEN_INVALID", "TS_ERROR_LOOPBACK_UNAVAILABLE",
    "TS_ERROR_BROWSER_UNAVAILABLE", "TS_ERROR_USER_CHANGED", "TS_ERROR_NOT_REVOCABLE",
    "TS_ERROR_AUTHORIZATION_MISCONFIGURED", "TS_ERROR_ISSUER_MISMATCH", "TS_ERROR_DPOP_KEY_LOST",
    "TS_ERROR_UNSUPPORTED_BY_SERVER", "TS_ERROR_STEP_UP_REQUIRED", "TS_ERROR_ACCESS_TOKEN_REJECTED",
    "TS_ERROR_STORE_LOCKED", "TS_ERROR_USER_PRESENCE_DENIED", "TS_ERROR_LOCK_SOURCE_UNAVAILABLE",
    "TS_ERROR_WRONG_PIN", "TS_ERROR_TPM_LOCKED_OUT",
};

G_STATIC_ASSERT (G_N_ELEMENTS (names) == G_N_ELEMENTS (codes));

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
        values[0] = (GEnumValue) {TS_ERROR_FAILED, names[0], "failed"};
        for (guint i = 1; i < G_N_ELEMENTS (codes); i++)
            values[i] = (GEnumValue) {(gint) i, names[i], codes[i]};
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
