/* ts-enums.h: the enumerations of libtokenstore-gobject. */
#pragma once

#include <glib-object.h>

G_BEGIN_DECLS

/**
 * TsCredentialState:
 * @TS_CREDENTIAL_STATE_AUTHORIZED: signed in: a refresh token is stored for the user
 * @TS_CREDENTIAL_STATE_REVOKED: logged out here, or the grant was revoked
 * @TS_CREDENTIAL_STATE_NOT_FOUND: never seen by this store
 *
 * The credential state of a user (Apple's `getCredentialState(forUserID:)`).
 */
typedef enum {
    TS_CREDENTIAL_STATE_AUTHORIZED,
    TS_CREDENTIAL_STATE_REVOKED,
    TS_CREDENTIAL_STATE_NOT_FOUND,
} TsCredentialState;

/**
 * TsProtection:
 * @TS_PROTECTION_LEVEL_HARDWARE: sealed by this machine's TPM 2.0, kept in the keyring
 * @TS_PROTECTION_LEVEL_KEYRING: in the Secret Service
 * @TS_PROTECTION_LEVEL_PORTAL: wrapped under the Flatpak Secret portal's per-app secret
 * @TS_PROTECTION_LEVEL_PASSPHRASE: wrapped under a passphrase
 * @TS_PROTECTION_LEVEL_SOFTWARE_TPM: sealed by a software TPM (swtpm, a simulator): no more than
 *   the keyring it is kept in
 *
 * How well a store's data key is protected; the values are the C ABI's #ts_protection (appended,
 * never renumbered), so not in order of strength.
 */
typedef enum {
    TS_PROTECTION_LEVEL_HARDWARE,
    TS_PROTECTION_LEVEL_KEYRING,
    TS_PROTECTION_LEVEL_PORTAL,
    TS_PROTECTION_LEVEL_PASSPHRASE,
    TS_PROTECTION_LEVEL_SOFTWARE_TPM,
} TsProtection;

/**
 * TsLogoutOutcome:
 * @TS_LOGOUT_OUTCOME_REVOKED: revoked at the server; the local entries are deleted
 * @TS_LOGOUT_OUTCOME_NOT_FOUND: nothing was stored for the account; no network call
 * @TS_LOGOUT_OUTCOME_PENDING: logged out here; the revocation is queued (ts_session_resume_async())
 * @TS_LOGOUT_OUTCOME_FAILED: logged out here; the server refused the revocation for good
 * @TS_LOGOUT_OUTCOME_NOT_REVOCABLE: deleted here; the server cannot revoke
 *
 * What a logout did.
 */
typedef enum {
    TS_LOGOUT_OUTCOME_REVOKED,
    TS_LOGOUT_OUTCOME_NOT_FOUND,
    TS_LOGOUT_OUTCOME_PENDING,
    TS_LOGOUT_OUTCOME_FAILED,
    TS_LOGOUT_OUTCOME_NOT_REVOCABLE,
} TsLogoutOutcome;

/**
 * TsItemKind:
 * @TS_ITEM_KIND_REFRESH_TOKEN: an account's refresh token
 * @TS_ITEM_KIND_APPLE_USER_ID: an account's Apple user id
 * @TS_ITEM_KIND_ACCESS_TOKEN: an access token
 * @TS_ITEM_KIND_GENERIC: any secret of the app's
 * @TS_ITEM_KIND_ID_TOKEN: the ID token of the account's last sign-in
 * @TS_ITEM_KIND_PROFILE: the account's profile (JSON, as a sign-in writes it)
 *
 * What an item holds.
 */
typedef enum {
    TS_ITEM_KIND_REFRESH_TOKEN = 1,
    TS_ITEM_KIND_APPLE_USER_ID = 2,
    TS_ITEM_KIND_ACCESS_TOKEN = 3,
    TS_ITEM_KIND_GENERIC = 4,
    TS_ITEM_KIND_ID_TOKEN = 5,
    TS_ITEM_KIND_PROFILE = 6,
} TsItemKind;

/**
 * TsSignInPrompt:
 * @TS_SIGN_IN_PROMPT_DEFAULT: no `prompt` sent: the server decides (a live browser session at the
 *   server may sign its user in without a page)
 * @TS_SIGN_IN_PROMPT_LOGIN: `login`: the server asks for credentials even over a live browser
 *   session (to sign in as someone else)
 * @TS_SIGN_IN_PROMPT_SELECT_ACCOUNT: `select_account`: the server lets the user choose an account
 * @TS_SIGN_IN_PROMPT_CONSENT: `consent`: the server asks for consent again
 * @TS_SIGN_IN_PROMPT_NONE: `none`: no page at all; a server that must show one makes the sign-in
 *   fail with %TS_ERROR_INTERACTION_REQUIRED
 *
 * OpenID Connect's `prompt` of a browser sign-in ([property@Session:prompt]).
 */
typedef enum {
    TS_SIGN_IN_PROMPT_DEFAULT,
    TS_SIGN_IN_PROMPT_LOGIN,
    TS_SIGN_IN_PROMPT_SELECT_ACCOUNT,
    TS_SIGN_IN_PROMPT_CONSENT,
    TS_SIGN_IN_PROMPT_NONE,
} TsSignInPrompt;

/**
 * TsBrowserSessionOutcome:
 * @TS_BROWSER_SESSION_OUTCOME_NOT_ASKED: not asked to end it
 * @TS_BROWSER_SESSION_OUTCOME_ENDED: the provider ended its session; the next sign-in shows its login page
 * @TS_BROWSER_SESSION_OUTCOME_NOT_ENDED: the provider has no end-session endpoint: its session stays
 *   signed in (ask for %TS_SIGN_IN_PROMPT_LOGIN at the next sign-in); not an error
 * @TS_BROWSER_SESSION_OUTCOME_FAILED: ending it failed (no browser, no free port, no return in time,
 *   cancelled); the logout itself stands
 *
 * What a logout did to the user's browser session at the provider
 * ([method@Session.logout_browser_async]).
 */
typedef enum {
    TS_BROWSER_SESSION_OUTCOME_NOT_ASKED,
    TS_BROWSER_SESSION_OUTCOME_ENDED,
    TS_BROWSER_SESSION_OUTCOME_NOT_ENDED,
    TS_BROWSER_SESSION_OUTCOME_FAILED,
} TsBrowserSessionOutcome;

GType ts_credential_state_get_type (void);
#define TS_TYPE_CREDENTIAL_STATE (ts_credential_state_get_type ())
GType ts_protection_get_type (void);
#define TS_TYPE_PROTECTION (ts_protection_get_type ())
GType ts_logout_outcome_get_type (void);
#define TS_TYPE_LOGOUT_OUTCOME (ts_logout_outcome_get_type ())
GType ts_item_kind_get_type (void);
#define TS_TYPE_ITEM_KIND (ts_item_kind_get_type ())
GType ts_sign_in_prompt_get_type (void);
#define TS_TYPE_SIGN_IN_PROMPT (ts_sign_in_prompt_get_type ())
GType ts_browser_session_outcome_get_type (void);
#define TS_TYPE_BROWSER_SESSION_OUTCOME (ts_browser_session_outcome_get_type ())

G_END_DECLS
