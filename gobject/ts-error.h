/* ts-error.h: the error domain of libtokenstore-gobject. */
#pragma once

#include <glib-object.h>

G_BEGIN_DECLS

/**
 * TS_STORE_ERROR:
 *
 * The error domain of TokenStore: a #GError in it carries one of the #TsError codes, the
 * library's stable codes (the `code` of the C ABI's `ts_error` and of tokenctl's JSON).
 *
 * (The macro is not `TS_ERROR`, which `tokenstore.h` uses for its status value.)
 */
#define TS_STORE_ERROR (ts_error_quark ())

/**
 * TsError:
 * @TS_ERROR_FAILED: a code this version does not know (the message names it)
 * @TS_ERROR_SECRET_SERVICE_UNAVAILABLE: no Secret Service answered
 * @TS_ERROR_KEYRING_LOCKED: the keyring holding the data key is locked: the user must unlock it
 * @TS_ERROR_DATA_KEY_MISSING: the store's data key is gone from the key provider
 * @TS_ERROR_DATA_KEY_CORRUPT: the data key does not open the store
 * @TS_ERROR_INTEGRITY_CHECK_FAILED: a row was altered outside the library
 * @TS_ERROR_DATABASE_CORRUPT: the database file is damaged or not a store
 * @TS_ERROR_DATABASE_BUSY: another connection held the database too long
 * @TS_ERROR_SCHEMA_TOO_NEW: the store was made by a newer version
 * @TS_ERROR_MIGRATION_FAILED: the store could not be upgraded
 * @TS_ERROR_UNSAFE_FILE_LAYOUT: a symlink, a foreign owner or loose modes at the store's path
 * @TS_ERROR_INVALID_INPUT: an argument was refused; nothing changed
 * @TS_ERROR_IO_ERROR: a system call failed
 * @TS_ERROR_STORE_CLOSED: the store was closed
 * @TS_ERROR_TIMED_OUT: the keyring, the server or the browser did not answer in time
 * @TS_ERROR_WRONG_PASSPHRASE: the passphrase does not open the store
 * @TS_ERROR_SCHEMA_TAMPERED: the schema was changed outside the library
 * @TS_ERROR_DISK_FULL: the disk is full; the write was rolled back
 * @TS_ERROR_STORE_ROLLED_BACK: the file is an older copy than its epoch in the key provider
 * @TS_ERROR_NOT_A_STORE: another program's file is at the store's path
 * @TS_ERROR_MIGRATION_REQUIRED: a read-only open of a store that needs migrating
 * @TS_ERROR_WRONG_KEY_PROVIDER: the store's key was made by another key provider
 * @TS_ERROR_TPM_UNAVAILABLE: the TPM cannot be used
 * @TS_ERROR_TPM_MISMATCH: the TPM is not the one that sealed the key
 * @TS_ERROR_INTERACTION_REQUIRED: the user must sign in again
 * @TS_ERROR_SERVER_DECLINED_SCOPES: the server did not grant a required scope
 * @TS_ERROR_MINIMUM_TTL_TOO_LARGE: the server's tokens live shorter than the minimum asked for
 * @TS_ERROR_NOT_CONNECTED_TO_INTERNET: the server could not be reached
 * @TS_ERROR_RATE_LIMITED: the server asked to retry later
 * @TS_ERROR_SERVER_ERROR: the server failed (5xx)
 * @TS_ERROR_INVALID_CLIENT: the client id was refused
 * @TS_ERROR_INVALID_REQUEST: the server refused the request as malformed
 * @TS_ERROR_UNSUPPORTED_TOKEN_TYPE: the server does not revoke refresh tokens
 * @TS_ERROR_INVALID_GRANT: the code or token was refused
 * @TS_ERROR_UNEXPECTED_RESPONSE: the server's answer was not what OAuth says
 * @TS_ERROR_TLS_FAILURE: the TLS connection failed
 * @TS_ERROR_INSECURE_CONFIGURATION: a URL that is not https (or http on loopback)
 * @TS_ERROR_STORAGE: the store failed under the session
 * @TS_ERROR_AUTHORIZATION_FAILED: the server's error on the redirect (the user declined, …)
 * @TS_ERROR_STATE_MISMATCH: the redirect's state did not match
 * @TS_ERROR_ID_TOKEN_INVALID: the ID token failed a check
 * @TS_ERROR_LOOPBACK_UNAVAILABLE: every redirect port is in use
 * @TS_ERROR_BROWSER_UNAVAILABLE: no browser could be started
 * @TS_ERROR_USER_CHANGED: the sign-in was of another user than the account's
 * @TS_ERROR_NOT_REVOCABLE: the server cannot revoke
 * @TS_ERROR_AUTHORIZATION_MISCONFIGURED: the server's configuration cannot work
 * @TS_ERROR_ISSUER_MISMATCH: the server's issuer is not the configured one
 * @TS_ERROR_DPOP_KEY_LOST: the DPoP key the session was bound to is gone
 * @TS_ERROR_UNSUPPORTED_BY_SERVER: the server does not offer what the call needs (a device
 *   sign-in with a server that has no device grant)
 * @TS_ERROR_STEP_UP_REQUIRED: the API asks for a stronger or more recent sign-in (RFC 9470)
 * @TS_ERROR_ACCESS_TOKEN_REJECTED: the API refused the access token again after a renewal
 * @TS_ERROR_STORE_LOCKED: the store is locked (its data key wiped); retry after the user unlocks
 * @TS_ERROR_USER_PRESENCE_DENIED: the user's presence was asked for and denied; nothing changed
 * @TS_ERROR_LOCK_SOURCE_UNAVAILABLE: whenUnlocked, but nothing says when the session locks
 * @TS_ERROR_WRONG_PIN: the PIN does not open the TPM PIN key slot; the TPM counted the failure
 *   (the message says how many more it allows); nothing changed
 * @TS_ERROR_TPM_LOCKED_OUT: the TPM is in dictionary-attack lockout after too many wrong PINs and
 *   refuses every PIN until it recovers (the message says how long); nothing changed
 *
 * The codes of #TS_STORE_ERROR. A cancelled call fails with %G_IO_ERROR_CANCELLED instead.
 */
typedef enum {
    TS_ERROR_FAILED,
    TS_ERROR_SECRET_SERVICE_UNAVAILABLE,
    TS_ERROR_KEYRING_LOCKED,
    TS_ERROR_DATA_KEY_MISSING,
    TS_ERROR_DATA_KEY_CORRUPT,
    TS_ERROR_INTEGRITY_CHECK_FAILED,
    TS_ERROR_DATABASE_CORRUPT,
    TS_ERROR_DATABASE_BUSY,
    TS_ERROR_SCHEMA_TOO_NEW,
    TS_ERROR_MIGRATION_FAILED,
    TS_ERROR_UNSAFE_FILE_LAYOUT,
    TS_ERROR_INVALID_INPUT,
    TS_ERROR_IO_ERROR,
    TS_ERROR_STORE_CLOSED,
    TS_ERROR_TIMED_OUT,
    TS_ERROR_WRONG_PASSPHRASE,
    TS_ERROR_SCHEMA_TAMPERED,
    TS_ERROR_DISK_FULL,
    TS_ERROR_STORE_ROLLED_BACK,
    TS_ERROR_NOT_A_STORE,
    TS_ERROR_MIGRATION_REQUIRED,
    TS_ERROR_WRONG_KEY_PROVIDER,
    TS_ERROR_TPM_UNAVAILABLE,
    TS_ERROR_TPM_MISMATCH,
    TS_ERROR_INTERACTION_REQUIRED,
    TS_ERROR_SERVER_DECLINED_SCOPES,
    TS_ERROR_MINIMUM_TTL_TOO_LARGE,
    TS_ERROR_NOT_CONNECTED_TO_INTERNET,
    TS_ERROR_RATE_LIMITED,
    TS_ERROR_SERVER_ERROR,
    TS_ERROR_INVALID_CLIENT,
    TS_ERROR_INVALID_REQUEST,
    TS_ERROR_UNSUPPORTED_TOKEN_TYPE,
    TS_ERROR_INVALID_GRANT,
    TS_ERROR_UNEXPECTED_RESPONSE,
    TS_ERROR_TLS_FAILURE,
    TS_ERROR_INSECURE_CONFIGURATION,
    TS_ERROR_STORAGE,
    TS_ERROR_AUTHORIZATION_FAILED,
    TS_ERROR_STATE_MISMATCH,
    TS_ERROR_ID_TOKEN_INVALID,
    TS_ERROR_LOOPBACK_UNAVAILABLE,
    TS_ERROR_BROWSER_UNAVAILABLE,
    TS_ERROR_USER_CHANGED,
    TS_ERROR_NOT_REVOCABLE,
    TS_ERROR_AUTHORIZATION_MISCONFIGURED,
    TS_ERROR_ISSUER_MISMATCH,
    TS_ERROR_DPOP_KEY_LOST,
    TS_ERROR_UNSUPPORTED_BY_SERVER,
    TS_ERROR_STEP_UP_REQUIRED,
    TS_ERROR_ACCESS_TOKEN_REJECTED,
    TS_ERROR_STORE_LOCKED,
    TS_ERROR_USER_PRESENCE_DENIED,
    TS_ERROR_LOCK_SOURCE_UNAVAILABLE,
    TS_ERROR_WRONG_PIN,
    TS_ERROR_TPM_LOCKED_OUT,
} TsError;

GQuark ts_error_quark (void);
GType ts_error_get_type (void);
#define TS_TYPE_ERROR (ts_error_get_type ())

G_END_DECLS
