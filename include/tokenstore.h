/*
 * tokenstore.h: the C interface of TokenStore (libtokenstore.so.1), C99.
 *
 * TokenStore keeps an app's tokens in an SQLite file where every row is sealed with
 * XChaCha20-Poly1305 under a data key held by the Secret Service (GNOME Keyring, KWallet,
 * KeePassXC). The session calls sign users in through their browser, renew access tokens and
 * log out against an OAuth 2.0 authorization server (Auth0).
 *
 * Conventions:
 *  - Every call that can fail returns an int status: TS_OK (0), TS_NOT_FOUND (1) where
 *    documented, or TS_ERROR (-1). On TS_ERROR, when `err` is not NULL, `*err` receives a
 *    ts_error the caller frees with ts_error_free(); on any other status `*err` is left as
 *    it was (initialize it to NULL). Pass NULL for `err` to ignore the details.
 *  - Strings are NUL-terminated UTF-8 of at most 4096 bytes. A NULL, overlong or non-UTF-8
 *    string, a NULL out pointer, an unknown enum value or an inconsistent (pointer, length)
 *    pair fails with TS_ERROR and the code "invalidInput"; nothing is stored or lost.
 *  - Handles (ts_store, ts_session) are opaque ids, not pointers. Every call is blocking and
 *    may be made from any thread, also on one handle from several threads at once; calls on
 *    one store are serialized. A handle may be closed or freed while other threads use it: a
 *    call already running on it finishes normally (the store closes when it ends), and every
 *    later call with it fails with "storeClosed", as does a handle closed twice; closing a
 *    closed handle is ignored. Keyring calls and network calls end with
 *    "timedOut" when they do not answer in time. Do not call from a thread whose blocking
 *    would stall your UI: move the call to a worker (GTask's g_task_run_in_thread, Rust's
 *    spawn_blocking, Python's asyncio.to_thread).
 *  - Secrets come back as library-allocated (bytes, length) buffers: release them with
 *    ts_bytes_free(), which wipes them first. Never pass them to free(). The buffers are
 *    locked memory (mlock) kept out of core dumps (MADV_DONTDUMP); copies the app makes are
 *    not: see ts_harden_process().
 *  - Error texts never hold a secret or an identifier.
 *  - What each release added (a function not listed is in every release since 0.2.0, the first
 *    with this interface). scripts/abi reads this list: the library file is
 *    libtokenstore.so.1.MINOR.0, MINOR the number of releases listed, none newer than VERSION.
 *      0.3.0: ts_harden_process, ts_session_new_issuer.
 *      0.4.0: ts_store_protection, ts_session_is_dpop_bound, ts_session_dpop_proof,
 *             ts_session_record_dpop_nonce, ts_session_sign_in_device; ts_sign_in_options.dpop,
 *             .prompt, .login_hint, .acr_values, .max_age_set, .max_age_seconds;
 *             TS_KIND_ID_TOKEN, TS_KIND_PROFILE; ts_cancel_new, ts_cancel_trigger, ts_cancel_free,
 *             ts_session_sign_in_browser_cancellable, ts_session_access_token_cancellable,
 *             ts_session_logout_cancellable, ts_session_resume_cancellable; ts_store_watch,
 *             ts_watch_free, ts_store_accounts, ts_store_account_status, ts_strings_free;
 *             ts_logout_options_init, ts_session_logout_browser, ts_store_lock, ts_store_unlock,
 *             ts_store_is_locked, ts_store_open_with_pin; ts_store_options.access_policy,
 *             .lock_after_idle_ms, ts_store_options_init, ts_store_open_with_options,
 *             ts_store_access_policy; ts_store_key_slots, ts_key_slots_free;
 *             ts_item_get_cancellable.
 */
#ifndef TOKENSTORE_H
#define TOKENSTORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** An open store (one SQLite file and its data key). */
typedef struct ts_store ts_store;
/** A session over a store, talking to one authorization server. */
typedef struct ts_session ts_session;
/** A cancel handle for the long calls (the `_cancellable` forms: ts_cancel_new). Since 0.4.0. */
typedef struct ts_cancel ts_cancel;
/** The details of a failed call: a stable code and a human-readable message. */
typedef struct ts_error ts_error;

/** Status values returned by the calls. */
enum {
    TS_OK = 0,        /**< Success. */
    TS_NOT_FOUND = 1, /**< ts_item_get: no such item (not an error; no ts_error is made). */
    TS_ERROR = -1     /**< Failure: see the ts_error. */
};

/** What an item holds (the item kinds of tokenctl's --kind). */
typedef enum ts_kind {
    TS_KIND_REFRESH_TOKEN = 1,
    TS_KIND_APPLE_USER_ID = 2,
    TS_KIND_ACCESS_TOKEN = 3,
    TS_KIND_GENERIC = 4,
    TS_KIND_ID_TOKEN = 5, /**< The ID token of the account's last sign-in. Since 0.4.0. */
    TS_KIND_PROFILE = 6   /**< The account's profile (JSON, as a sign-in writes it; ts_item_set refuses
                               anything else with invalidInput). Since 0.4.0. */
} ts_kind;

/** The credential state of a user (ts_credential_state). */
typedef enum ts_state {
    TS_STATE_AUTHORIZED = 0, /**< Signed in. */
    TS_STATE_REVOKED = 1,    /**< Logged out, or the grant was revoked. */
    TS_STATE_NOT_FOUND = 2   /**< Never seen. */
} ts_state;

/** What a logout did (ts_session_logout). */
typedef enum ts_logout_outcome {
    TS_LOGOUT_REVOKED = 0,   /**< Revoked at the server; the local entries are deleted. */
    TS_LOGOUT_NOT_FOUND = 1, /**< Nothing was stored for the account; no network call. */
    TS_LOGOUT_PENDING = 2,   /**< Logged out here; revoked later (ts_session_resume). */
    TS_LOGOUT_FAILED = 3,    /**< Logged out here; the server refused the revocation for good. */
    TS_LOGOUT_NOT_REVOCABLE = 4 /**< Deleted here; the server has no revocation endpoint (nothing queued). */
} ts_logout_outcome;

/** How well a store's data key is protected (ts_store_protection). Values are appended, never
 *  renumbered: a switch over them needs a default. */
typedef enum ts_protection {
    TS_PROTECTION_HARDWARE = 0,    /**< Sealed by this machine's TPM 2.0 and kept in the keyring. */
    TS_PROTECTION_KEYRING = 1,     /**< In the Secret Service. */
    TS_PROTECTION_PORTAL = 2,      /**< Wrapped under the Flatpak Secret portal's per-app secret. */
    TS_PROTECTION_PASSPHRASE = 3,  /**< Wrapped under a passphrase. */
    TS_PROTECTION_SOFTWARE_TPM = 4 /**< Sealed by a software TPM (swtpm, a simulator, a VM's TPM) and kept in the keyring. */
} ts_protection;

/** The library's version ("MAJOR.MINOR.PATCH"), a static string. */
const char *ts_version(void);

/* ---- Stores ------------------------------------------------------------------------- */

/**
 * Opens (or creates) a store. `path_or_null` is the database file, or NULL for the default
 * ($XDG_DATA_HOME/<app_id>/tokens.sqlite). `app_id` is 1-255 characters of [A-Za-z0-9._-].
 * The data key is read from (or, for a new store, made in) the Secret Service.
 * On TS_OK, `*out` holds a handle to release with ts_store_close(); otherwise it is NULL.
 * Codes: secretServiceUnavailable, keyringLocked, dataKeyMissing, dataKeyCorrupt,
 * databaseCorrupt, schemaTooNew, migrationFailed, unsafeFileLayout, invalidInput, ioError,
 * timedOut, databaseBusy, diskFull, schemaTampered (the schema was changed outside TokenStore),
 * storeRolledBack (the file is an older copy than its epoch in the key provider),
 * wrongPassphrase, notAStore (another program's database at the path: refused before anything
 * is written, the file left unchanged), wrongKeyProvider (the store's key was made by another
 * key provider, e.g. a passphrase; the message names it).
 */
int ts_store_open(const char *path_or_null, const char *app_id, ts_store **out, ts_error **err);

/**
 * Opens an existing store with its TPM + PIN key slot (as `tokenctl --pin-fd N`; the slot is added
 * to an open store with `tokenctl slot add tpm-pin --pin-fd N`). `path_or_null` and `app_id` as in
 * ts_store_open(). `pin` is `pin_len` bytes, 4 to 64 (e.g. the UTF-8 digits the user typed; no NUL
 * needed): the library copies them into locked memory kept out of core dumps, holds that copy while
 * the store is open (ts_store_unlock() unseals the key with it again), wipes it when the store
 * closes and never logs it; wipe your own copy. The data key is unsealed by the TPM ($TOKENSTORE_TPM_TCTI,
 * else /dev/tpmrm0) under an authorization derived from the PIN and the store; the TPM itself
 * limits wrong PINs (its dictionary-attack protection). No failure changes the store.
 * On TS_OK, `*out` holds a handle to release with ts_store_close(); otherwise it is NULL.
 * Codes: those of ts_store_open, and wrongPIN (the message says how many more wrong PINs the TPM
 * allows before it locks out), tpmLockedOut (the TPM refuses every PIN, the right one too, until it
 * recovers; the message says when; do not reset the store), wrongKeyProvider or dataKeyMissing
 * (the store has no TPM PIN key slot: the hint says how to open it), tpmMismatch (the slot was
 * sealed by another TPM), tpmUnavailable, invalidInput (`pin` NULL, or `pin_len` outside 4-64:
 * the TPM is not asked; no store at the path: a PIN slot is added to an existing store). Since 0.4.0.
 */
int ts_store_open_with_pin(const char *path_or_null, const char *app_id, const uint8_t *pin, size_t pin_len,
                           ts_store **out, ts_error **err);

/**
 * Options of ts_store_open_with_options(). Initialize with ts_store_options_init() (or
 * `ts_store_options o = { sizeof o };`): every zero or NULL field means its default.
 * `struct_size` lets a later version add fields at the end (a size the library does not know:
 * invalidInput). Since 0.4.0.
 */
typedef struct ts_store_options {
    size_t struct_size;         /**< sizeof(ts_store_options), set by ts_store_options_init(). */
    const char *access_policy;  /**< When the store's secrets may be read, by name: "afterFirstUnlock"
                                     (whenever the store is open), "whenUnlocked" (only while the
                                     desktop session is unlocked: its lock, from logind or a
                                     screensaver on the session bus, wipes the key and every call fails
                                     with storeLocked until it unlocks), "userPresence",
                                     "userPresence:session:SECONDS", "userPresence:appLifecycle:SECONDS"
                                     (`tokenctl --access-policy NAME`). NULL: the one the store records
                                     (afterFirstUnlock for a new store). The store records the policy
                                     under its MAC: a stronger one than recorded is recorded; a weaker
                                     one does not lower it (the recorded one applies; only `tokenctl
                                     policy set` lowers it). */
    int64_t lock_after_idle_ms; /**< Lock the handle by itself (as ts_store_lock(store, 0): the key
                                     wiped, storeLocked until ts_store_unlock()) after this many
                                     milliseconds without a read or write, 1 to 31536000000 (365 days);
                                     0: never. */
} ts_store_options;

/** Sets `options` to the defaults: struct_size set, every other field zero (NULL is ignored).
 *  Since 0.4.0. */
void ts_store_options_init(ts_store_options *options);

/**
 * ts_store_open() with options (`options_or_null` NULL: ts_store_open() itself). A name that is
 * not an access policy, or a bad `struct_size` or `lock_after_idle_ms`, fails with invalidInput
 * before anything is opened or created. On TS_OK, `*out` holds a handle to release with
 * ts_store_close(); otherwise it is NULL.
 * Codes: those of ts_store_open, and lockSourceUnavailable (the policy asked or recorded is
 * whenUnlocked, and neither logind nor a screensaver on the session bus can say when the
 * session locks: the store is not opened and its record is left as it was). At a path with no
 * store yet, a policy asked for that cannot be enforced is refused before the file and its key
 * are made. Under a userPresence policy the open succeeds and each read of a refresh token or a
 * generic item first asks polkit (action `<app id, lowercased>.tokenstore.read`): userPresenceDenied
 * when the user declines, lockSourceUnavailable when no polkit (or no such action) answers.
 * Since 0.4.0.
 */
int ts_store_open_with_options(const char *path_or_null, const char *app_id, const ts_store_options *options_or_null,
                               ts_store **out, ts_error **err);

/** The name of the access policy in force on the store handle (the recorded one, or a stronger
 *  one asked at open) into `*name`, in ts_store_options' `access_policy` syntax, to release with
 *  ts_string_free(). Codes: storeClosed, invalidInput. Since 0.4.0. */
int ts_store_access_policy(ts_store *store, char **name, ts_error **err);

/** Closes the store and releases the handle (NULL, or a handle already closed, is ignored).
 *  Sessions made from it keep their own reference: the store closes when the last of them is
 *  released too, and a call still running on the handle on another thread finishes first.
 *  Any later call with the handle fails with "storeClosed". */
void ts_store_close(ts_store *store);

/* ---- Items -------------------------------------------------------------------------- */
/* An item is named by (service, account, kind). `service` may be NULL: "auth0". */

/** Stores `length` bytes (at most 1 MiB; `bytes` may be NULL only when `length` is 0),
 *  replacing the item if it exists. Durable when it returns TS_OK. */
int ts_item_set(ts_store *store, const char *service, const char *account, ts_kind kind,
                const uint8_t *bytes, size_t length, ts_error **err);

/** Reads an item. TS_OK: `*bytes` and `*length` hold a copy to release with ts_bytes_free().
 *  TS_NOT_FOUND: no such item; `*bytes` is NULL and `*length` 0.
 *  A row altered outside the library fails with "integrityCheckFailed". */
int ts_item_get(ts_store *store, const char *service, const char *account, ts_kind kind,
                uint8_t **bytes, size_t *length, ts_error **err);

/** ts_item_get with a cancel handle (ts_cancel_new; NULL: as ts_item_get). A read of an item
 *  its store's access policy gates on the user's presence waits while polkit asks the user;
 *  ts_cancel_trigger() on another thread ends that wait at once: polkit is told to cancel the
 *  check (its dialog closes), the call fails with "cancelled" and nothing is read. A handle
 *  triggered before the call makes it fail with "cancelled" at once. Since 0.4.0. */
int ts_item_get_cancellable(ts_store *store, const char *service, const char *account, ts_kind kind,
                            ts_cancel *cancel, uint8_t **bytes, size_t *length, ts_error **err);

/** Deletes an item; deleting an absent item is TS_OK. */
int ts_item_delete(ts_store *store, const char *service, const char *account, ts_kind kind,
                   ts_error **err);

/** Wipes and frees a buffer returned by this library (NULL is ignored). `length` must be the
 *  length returned with it. The library keeps every live buffer's length in a table and in a
 *  header with a magic value in front of the bytes: a pointer that is not a live buffer of
 *  this library (also one freed already), a damaged header or another `length` is a bug that
 *  may already have corrupted memory, and the call prints "libtokenstore: ts_bytes_free: ..."
 *  to stderr and aborts the process (SIGABRT), as free() does for a pointer it did not make. */
void ts_bytes_free(uint8_t *bytes, size_t length);

/** The store's protection tier into `*tier`, and when `reason_or_null` is not NULL the reason a
 *  higher tier is not in use into `*reason_or_null` (release it with ts_string_free(); "" for
 *  TS_PROTECTION_HARDWARE). A TPM store is TS_PROTECTION_SOFTWARE_TPM when its TPM is a software
 *  one. Below that the TPM ($TOKENSTORE_TPM_TCTI) is asked whether it could be used (a few
 *  commands, never an error). Codes: storeClosed, invalidInput, tpmUnavailable (a TPM store whose
 *  TPM device must be asked its manufacturer and does not answer). */
int ts_store_protection(ts_store *store, ts_protection *tier, char **reason_or_null, ts_error **err);

/** One key slot of a store (ts_store_key_slots): one way to its data key, never its secret.
 *  Since 0.4.0. */
typedef struct ts_key_slot {
    size_t struct_size; /**< sizeof(ts_key_slot) of the library: fields may be added at the end. */
    int64_t id;         /**< The slot's number in the store (1 for its first), as `tokenctl slot remove ID` takes it. */
    const char *kind;   /**< The kind of key provider that keeps the key for this slot, as the store
                             records it: "secret-service", "portal", "passphrase", "tpm", "tpm-pin",
                             "recovery" (a recovery key), or the name of an app's own provider. */
    int64_t created_at; /**< When the slot was added, in seconds since the Unix epoch. */
} ts_key_slot;

/** The store's key slots, by id (as `tokenctl slot list`): a store never given a second slot has
 *  one, its key provider's. `*slots` receives a NULL-terminated array of slots, to release with
 *  ts_key_slots_free(). Reads the store only. Codes: integrityCheckFailed (a slot row was
 *  altered outside the library), storeLocked, storeClosed, invalidInput, the store's read errors.
 *  Since 0.4.0. */
int ts_store_key_slots(ts_store *store, ts_key_slot ***slots, ts_error **err);

/** Frees an array returned by ts_store_key_slots() (NULL is ignored). Since 0.4.0. */
void ts_key_slots_free(ts_key_slot **slots);

/** Locks the store: the data key is wiped from this process's memory and every call on the store
 *  fails with storeLocked until ts_store_unlock(). With `all_processes` non-zero the store records
 *  the lock, and every process that has it open drops its key at its next call (as `tokenctl
 *  lock`). Codes: storeClosed, invalidInput (all_processes on a read-only store). Since 0.4.0. */
int ts_store_lock(ts_store *store, int all_processes, ts_error **err);

/** Unlocks the store: the data key is fetched again from its key provider. A store locked for every
 *  process stays locked (storeLocked) unless `all_processes` is non-zero, which unlocks it for every
 *  process (as `tokenctl unlock`). Codes: storeLocked, storeClosed, keyringLocked, dataKeyMissing,
 *  secretServiceUnavailable. Since 0.4.0. */
int ts_store_unlock(ts_store *store, int all_processes, ts_error **err);

/** Whether the store handle is locked now (`*locked` 1: its data key wiped, every read and write
 *  fails with storeLocked), 0 otherwise. A handle opened while a lock for every process is
 *  recorded (`tokenctl lock`) is locked from the start; a lock set or cleared by another process
 *  later is taken up at this handle's next call (or by its watch, which then reports
 *  TS_CHANGE_STORE_LOCKED / TS_CHANGE_STORE_UNLOCKED). One atomic load: it never blocks.
 *  Codes: storeClosed, invalidInput. Since 0.4.0. */
int ts_store_is_locked(ts_store *store, int *locked, ts_error **err);

/** The credential state of `user_id` (the Apple user id of a sign-in). */
int ts_credential_state(ts_store *store, const char *user_id, ts_state *out, ts_error **err);

/** The accounts (of service "auth0") the store holds entries for, sorted, as a NULL-terminated
 *  array of strings in `*accounts`, to release with ts_strings_free(). Since 0.4.0. */
int ts_store_accounts(ts_store *store, char ***accounts, ts_error **err);

/** Whether `account` (service "auth0") is signed in (`*signed_in` 1: a refresh token is stored
 *  and no logout has begun) and, when `user_id_or_null` is not NULL, its Apple user id (NULL
 *  when it has none; release with ts_string_free()). Reads the store only. Since 0.4.0. */
int ts_store_account_status(ts_store *store, const char *account, char **user_id_or_null, int *signed_in,
                            ts_error **err);

/** Frees a NULL-terminated string array returned by this library, each string wiped (NULL is
 *  ignored). Since 0.4.0. */
void ts_strings_free(char **strings);

/* ---- Change events ------------------------------------------------------------------ */

/** What a change is (ts_change.kind). More kinds may come: ignore those you do not know. */
typedef enum ts_change_kind {
    TS_CHANGE_ACCOUNT_ADDED = 0,    /**< `account` got a refresh token (a sign-in). */
    TS_CHANGE_ACCOUNT_REMOVED = 1,  /**< `account`'s refresh token left it (a logout began, ...). */
    TS_CHANGE_CREDENTIAL_STATE = 2, /**< `user_id`'s credential state went from `from` to `to`. */
    TS_CHANGE_TOKENS_RENEWED = 3,   /**< A renewal stored new tokens for `account`. */
    TS_CHANGE_KEY_ROTATED = 4,      /**< The store switched to a new data key. */
    TS_CHANGE_STORE_LOCKED = 5,     /**< This store handle became locked (its key wiped), for any reason. */
    TS_CHANGE_STORE_UNLOCKED = 6    /**< This store handle became unlocked again. */
} ts_change_kind;

/** One change, valid only during the callback. It names at most an account and a user id
 *  (identifiers the app stored), never a token. */
typedef struct ts_change {
    size_t struct_size;    /**< sizeof(ts_change) of the library: fields may be added at the end. */
    ts_change_kind kind;
    const char *service;   /**< The account's service ("auth0"); NULL when no account. */
    const char *account;   /**< ACCOUNT_ADDED, ACCOUNT_REMOVED, TOKENS_RENEWED; else NULL. */
    const char *user_id;   /**< CREDENTIAL_STATE; else NULL. */
    ts_state from;         /**< CREDENTIAL_STATE: the state before; else TS_STATE_NOT_FOUND. */
    ts_state to;           /**< CREDENTIAL_STATE: the state after; else TS_STATE_NOT_FOUND. */
} ts_change;

/** Called with each change; see ts_store_watch(). */
typedef void (*ts_change_fn)(const ts_change *change, void *user_data);

/** A subscription to a store's changes (ts_store_watch). */
typedef struct ts_watch ts_watch;

/**
 * Calls `callback` with each change made to the store from now on, by this process or any
 * other that opens the same file: accounts signed in and out, credential states, renewals, key
 * switches. No daemon and no polling: the library's watcher thread sleeps on inotify and wakes
 * when the file is written (typically a few milliseconds after the commit). `callback` runs on
 * that thread, one change at a time, in commit order (a GTK app hands each change to its main
 * loop with g_main_context_invoke()); it may call the library, and it must not block for long.
 * The watch keeps the store open until ts_watch_free(). Codes: storeClosed, invalidInput,
 * ioError (the store's folder cannot be watched), the store's read errors. Since 0.4.0.
 */
int ts_store_watch(ts_store *store, ts_change_fn callback, void *user_data, ts_watch **out, ts_error **err);

/** Ends a watch: once it returns the callback is not running and is never called again (called
 *  from inside the callback, the current call finishes first). NULL and freed watches are
 *  ignored. Since 0.4.0. */
void ts_watch_free(ts_watch *watch);

/* ---- Process hardening -------------------------------------------------------------- */

/**
 * Keeps the secrets in the whole process's memory out of crash dumps and away from other
 * processes: prctl(PR_SET_DUMPABLE, 0) (no core dump; no ptrace attach or /proc/PID/mem read
 * by other processes of the user) and setrlimit(RLIMIT_CORE, {0, 0}) (no core file, also for
 * programs the process starts). The library's own copies of secrets (its memory and the
 * buffers of ts_bytes_free) are kept out of dumps anyway; libcurl's and OpenSSL's buffers (a
 * request's refresh token, an answer's new one) and the app's own copies are ordinary memory
 * and stay out of dumps only after this call. Call it once, early; it lasts for the life of
 * the process and calling again is harmless.
 * Codes: ioError (the message names the system call that failed and its errno; the other
 * call is still made).
 */
int ts_harden_process(ts_error **err);

/* ---- Sessions ----------------------------------------------------------------------- */

/**
 * A session over `store` talking to the authorization server at `domain` (an https URL such
 * as "https://tenant.auth0.com", or http on loopback) as the public client `client_id`.
 * Requests time out after 30 s each. The session holds its own reference to the store.
 * Codes: insecureConfiguration, storeClosed (a closed store handle), invalidInput.
 */
int ts_session_new(ts_store *store, const char *domain, const char *client_id, ts_session **out,
                   ts_error **err);

/**
 * A session over `store` talking to any OpenID Connect provider by its `issuer` (such as
 * "https://id.example.com/realms/staff"; https, or http on loopback), as the public client
 * `client_id`. The endpoints come from `{issuer}/.well-known/openid-configuration` (its
 * `issuer` must equal `issuer` exactly), fetched before the first request that needs them and
 * cached 24 h beside the store. Codes: insecureConfiguration, storeClosed, invalidInput.
 */
int ts_session_new_issuer(ts_store *store, const char *issuer, const char *client_id, ts_session **out,
                          ts_error **err);

/** Releases the session (NULL, or a session already freed, is ignored). A call still running
 *  on it on another thread finishes first; any later call with it fails with "storeClosed". */
void ts_session_free(ts_session *session);

/**
 * An access token for `account` (service "auth0") and the API `audience_or_null`, covering
 * the space-separated `scopes_space_separated` (NULL or "" for none) and valid for at least
 * `min_ttl_seconds` (>= 0): from the sealed cache when one qualifies, else by a refresh at
 * the server. On TS_OK, `*token`/`*length` hold the token (release with ts_bytes_free()) and
 * `*expires_at` its expiry in seconds since the Unix epoch, or 0 when the server gave none
 * (`expires_at` may be NULL).
 * Codes: interactionRequired (no refresh token: sign in again), minimumTTLTooLarge,
 * serverDeclinedScopes, invalidGrant, timedOut, notConnectedToInternet, rateLimited,
 * serverError, the store's codes, storeClosed (a closed session handle), invalidInput.
 */
int ts_session_access_token(ts_session *session, const char *account, const char *audience_or_null,
                            const char *scopes_space_separated, int min_ttl_seconds, uint8_t **token,
                            size_t *length, int64_t *expires_at, ts_error **err);

/** Whether `account`'s session is DPoP-bound (RFC 9449: signed in with DPoP, e.g. `tokenctl
 *  login --dpop`): `*bound` is 1 and its access tokens are of type DPoP, sent as
 *  `Authorization: DPoP <token>` with a proof from ts_session_dpop_proof(); else 0 (Bearer).
 *  Reads the store only. */
int ts_session_is_dpop_bound(ts_session *session, const char *account, int *bound, ts_error **err);

/**
 * A DPoP proof (RFC 9449) for one request of DPoP-bound `account` to its API: `method` (in
 * capitals) on `url` (http or https; `htu` is it without query and fragment), with `ath` the
 * hash of the account's current access token (renewed first when needed, as
 * ts_session_access_token() with no audience and no scopes), signed by the store's DPoP key.
 * On TS_OK `*proof` holds the JWT, NUL-terminated, to release with ts_string_free().
 * Codes: invalidRequest (not DPoP-bound, a method not in capitals), insecureConfiguration (a
 * URL that is not http(s)), interactionRequired (no refresh token), dpopKeyLost (the key
 * the session is bound to is gone: the session was cleared), the codes of
 * ts_session_access_token(), invalidInput.
 */
int ts_session_dpop_proof(ts_session *session, const char *account, const char *method, const char *url, char **proof,
                          ts_error **err);

/**
 * Keeps `nonce`, the `DPoP-Nonce` header of an answer from the API at `url` (RFC 9449 9: a
 * 401 with `WWW-Authenticate: DPoP error="use_dpop_nonce"`, or any answer that brings a new
 * one), for the proofs ts_session_dpop_proof() makes to `url`'s origin (scheme, host, port)
 * from now on, in this process and, sealed in the store, in the app's others. Retry the
 * refused request with a new proof. Codes: invalidRequest (not a nonce: empty, over 1024
 * bytes, a space, quote, backslash or control character), insecureConfiguration (a URL that
 * is not http(s)), the store's codes, storeClosed, invalidInput.
 */
int ts_session_record_dpop_nonce(ts_session *session, const char *url, const char *nonce, ts_error **err);

/** Logs `account` (service "auth0") out: deletes its tokens here and revokes its refresh
 *  token at the server, or queues the revocation when the server cannot be reached. */
int ts_session_logout(ts_session *session, const char *account, ts_logout_outcome *out, ts_error **err);

/** Retries the queued revocations that are due. `*still_pending` (may be NULL) receives how
 *  many stay queued. */
int ts_session_resume(ts_session *session, int *still_pending, ts_error **err);

/* ---- Browser sign-in ---------------------------------------------------------------- */

/**
 * Opens `url` in the user's browser for ts_session_sign_in_browser(). Called on the thread
 * that called ts_session_sign_in_browser(), at most once per sign-in, before the wait for
 * the browser's redirect; it must return promptly (start the browser, do not wait for the
 * user): the sign-in's loopback listener answers the redirect only after it returned.
 * A GTK app calls gtk_show_uri()/g_app_info_launch_default_for_uri() here, or hands the
 * URL to its main loop with g_main_context_invoke() when it signs in from a worker thread.
 * Return 0 when a browser was started, anything else when none could be: the sign-in then
 * fails with "browserUnavailable". `url` is valid only during the call. It is the sign-in
 * listener's one-time http://127.0.0.1:PORT/start/<id>, which redirects once, and only for
 * this user, to the authorization URL: it holds no state, nonce nor PKCE challenge, so it
 * may go on a command line (xdg-open URL), but do not log it.
 */
typedef int (*ts_open_url_fn)(const char *url, void *user_data);

/**
 * Options of ts_session_sign_in_browser(). Initialize with ts_sign_in_options_init() (or
 * `ts_sign_in_options o = { sizeof o };`): every zero or NULL field means its default.
 * `struct_size` lets a later version add fields at the end without breaking callers
 * compiled against this header: the library takes the size of this header's struct and of
 * every earlier one (0.2.0 to 0.3.0: up to `user_data`; the fields it lacks take their
 * defaults; 0.4.0 added `dpop` to `max_age_seconds`), and refuses any other (a caller built
 * against a newer header than the library) with invalidInput.
 */
typedef struct ts_sign_in_options {
    size_t struct_size;        /**< sizeof(ts_sign_in_options), set by ts_sign_in_options_init(). */
    const uint16_t *ports;     /**< Loopback redirect ports, tried in order; NULL/0: 53180-53183.
                                    Port 0 takes any free port (only for a server that allows
                                    any loopback port; Auth0 matches callback URLs exactly). */
    size_t port_count;         /**< Entries in `ports` (at most 64). */
    const char *redirect_path; /**< The redirect's path, NULL: "/callback". The redirect URIs are
                                    http://127.0.0.1:PORT<redirect_path>: register each one as an
                                    Allowed Callback URL. */
    const char *connection;    /**< The Auth0 connection; NULL: "apple"; "": the tenant's login page. */
    const char *scopes;        /**< Space-separated; NULL: "openid profile email". "openid" and
                                    "offline_access" are always added. */
    const char *audience;      /**< The API the access token is for; NULL: none. */
    int timeout_seconds;       /**< The longest wait for the browser's redirect, 1-86400; 0: 300. */
    ts_open_url_fn open_url;   /**< NULL: the system browser ($BROWSER, then GIO, then xdg-open). */
    void *user_data;           /**< Passed to `open_url`. */
    int dpop;                  /**< Non-zero: bind the sign-in to the store's DPoP key (RFC 9449;
                                    the server must take DPoP, as Auth0 does for an API that asks
                                    for it): its tokens are then DPoP tokens (see
                                    ts_session_is_dpop_bound()). 0: Bearer. Since 0.4.0. */
    const char *prompt;        /**< OIDC `prompt`: "login" (ask for credentials even over a live
                                    browser session: to sign in as someone else), "select_account",
                                    "consent" or "none" (no page: a server that must show one makes
                                    the call fail with interactionRequired); NULL: none sent; any
                                    other value: invalidInput. Since 0.4.0. */
    const char *login_hint;    /**< OIDC `login_hint`: who is expected to sign in (an email address),
                                    which the server may pre-fill; NULL: none. An identifier: sent only
                                    in the authorization request (pushed with PAR), never logged nor in
                                    an error. Since 0.4.0. */
    const char *acr_values;    /**< Space-separated authentication context classes asked for; the ID
                                    token's `acr` must then be one of them (else idTokenInvalid);
                                    NULL: none. Since 0.4.0. */
    int max_age_set;           /**< Non-zero: send `max_age_seconds` as OIDC `max_age` (0 included: a
                                    fresh authentication); 0: none sent. Since 0.4.0. */
    int max_age_seconds;       /**< With `max_age_set`: the longest time since the user last
                                    authenticated, 0 or more (negative: invalidInput); the ID token's
                                    `auth_time` must then be no older than that plus 60 s (else
                                    idTokenInvalid). Since 0.4.0. */
} ts_sign_in_options;

/** Sets `options` to the defaults: struct_size set, every other field zero (NULL is ignored). */
void ts_sign_in_options_init(ts_sign_in_options *options);

/**
 * Signs `account` (service "auth0") in through the user's browser: Auth0's hosted login with
 * PKCE and a loopback redirect (RFC 8252). Binds 127.0.0.1 at the first free port of the
 * options, opens the authorization URL (the options' `open_url`, or the system browser),
 * waits for the redirect at most the time-out, exchanges the code, validates the ID token
 * and stores the refresh token, access token, ID token, user id and profile in one durable
 * transaction; the user is then TS_STATE_AUTHORIZED and ts_session_access_token() works.
 * Nothing is stored when it fails. `options_or_null` NULL uses every default.
 * On TS_OK, when `user_id_or_null` is not NULL, `*user_id_or_null` receives the Apple user id
 * (ts_credential_state's `user_id`) to release with ts_string_free(), or NULL when the user
 * did not sign in with Apple. Blocking, for up to the time-out plus the token exchange: call
 * it from a worker thread.
 * Codes: timedOut (no redirect in time), authorizationFailed (the server's error on the
 * redirect, e.g. access_denied when the user declined), browserUnavailable (no browser could
 * be started, or `open_url` returned non-zero), loopbackUnavailable (every port in use),
 * insecureConfiguration (a redirect path that does not make an http://127.0.0.1:PORT/path
 * URI), stateMismatch, idTokenInvalid (also an `auth_time` older than max_age, an `acr` not
 * asked for), interactionRequired (prompt "none", and the server must show a page), userChanged (the account already has another user:
 * nothing stored, the new refresh token revoked; the C ABI never replaces an account's user,
 * ts_session_logout() first), invalidGrant, the network codes, the store's codes, storeClosed,
 * invalidInput (a bad pointer, length, `struct_size`, time-out, prompt, max_age or acr value).
 */
int ts_session_sign_in_browser(ts_session *session, const char *account, const ts_sign_in_options *options_or_null,
                               char **user_id_or_null, ts_error **err);

/* ---- Device sign-in ----------------------------------------------------------------- */

/**
 * What ts_session_sign_in_device() shows the user, called once on the thread that called it,
 * as soon as the server handed out the code; the sign-in polls meanwhile, so return promptly
 * (show the code, start nothing that waits for the user). `user_code` (e.g. "WDJB-MJHT") is to
 * be typed at `verification_uri` on any device with a browser; `verification_uri_complete`
 * (NULL when the server gives none) is the same page with the code filled in, for a link or a
 * QR code. The user code is not a secret: it is worthless without the device code, which never
 * leaves the library. `expires_in`: seconds until the code expires. The strings are valid only
 * during the call.
 */
typedef void (*ts_user_code_fn)(const char *user_code, const char *verification_uri,
                                const char *verification_uri_complete, int expires_in, void *user_data);

/**
 * Signs `account` (service "auth0") in on a machine without a browser: the device
 * authorization grant (RFC 8628). Asks the server for a code (Auth0's /oauth/device/code, or
 * the discovery document's device_authorization_endpoint), calls `on_user_code` once with it,
 * then polls the token endpoint (every `interval`; slow_down adds 5 s) until the user approves
 * on another device, declines, or the code expires; validates the ID token and stores
 * everything as ts_session_sign_in_browser() does. `scopes_or_null`: space-separated, NULL:
 * "openid profile email" ("openid" and "offline_access" are always added). `audience_or_null`:
 * the API the access token is for. `dpop` non-zero: bound to the store's DPoP key (RFC 9449).
 * On TS_OK, `*user_id_or_null` (when not NULL) receives the Apple user id to release with
 * ts_string_free(), or NULL. Blocking for up to the code's lifetime (often 5 to 15 minutes):
 * call it from a worker thread. Since 0.4.0.
 * Codes: authorizationFailed (declined: access_denied), timedOut (the code expired),
 * unsupportedByServer (the server has no device grant), idTokenInvalid, userChanged,
 * invalidGrant, insecureConfiguration (a verification URI that is not https), the network
 * codes, the store's codes, storeClosed, invalidInput (a bad pointer, a NULL `on_user_code`).
 */
int ts_session_sign_in_device(ts_session *session, const char *account, const char *scopes_or_null,
                              const char *audience_or_null, int dpop, ts_user_code_fn on_user_code,
                              void *user_data, char **user_id_or_null, ts_error **err);

/* ---- Cancellation ------------------------------------------------------------------- */

/* ts_cancel, the cancel handle of the `_cancellable` calls, is declared at the top. */

/** A new cancel handle into `*out`, to release with ts_cancel_free(). One handle may serve
 *  several calls, one after another or at once (GIO's GCancellable maps onto it: connect its
 *  "cancelled" signal to ts_cancel_trigger()). Codes: invalidInput. */
int ts_cancel_new(ts_cancel **out, ts_error **err);

/**
 * Cancels every call running with `cancel` now, and makes every later call given it fail at
 * once with "cancelled", changing nothing (a handle is not reset: make a new one). Returns at
 * once, from any thread. A cancelled call ends within milliseconds:
 *  - a sign-in: "cancelled"; its loopback listener is closed and nothing is stored (a refresh
 *    token the server issued meanwhile is revoked);
 *  - an access token: "cancelled"; a refresh already sent to the server goes on in the
 *    background and stores the rotated refresh token when the server answers (dropping it would
 *    sign the user out at the next renewal);
 *  - a logout: TS_OK with TS_LOGOUT_PENDING: the account is logged out here and its revocation
 *    queued for ts_session_resume(), as when offline ("cancelled", with nothing changed, only
 *    while it waited behind another call on the same account);
 *  - resume: "cancelled"; the entries not tried yet stay queued as they were.
 * NULL and freed handles are ignored.
 */
void ts_cancel_trigger(ts_cancel *cancel);

/** Releases the handle (NULL, or a handle freed already, is ignored). A call still running
 *  with it keeps it until it ends (and can still be cancelled only through another handle). */
void ts_cancel_free(ts_cancel *cancel);

/** ts_session_sign_in_browser() that `cancel_or_null` can cancel (NULL: the plain form). Codes:
 *  those of ts_session_sign_in_browser(), cancelled. */
int ts_session_sign_in_browser_cancellable(ts_session *session, const char *account,
                                           const ts_sign_in_options *options_or_null, ts_cancel *cancel_or_null,
                                           char **user_id_or_null, ts_error **err);

/** ts_session_access_token() that `cancel_or_null` can cancel (NULL: the plain form). Codes:
 *  those of ts_session_access_token(), cancelled. */
int ts_session_access_token_cancellable(ts_session *session, const char *account, const char *audience_or_null,
                                        const char *scopes_space_separated, int min_ttl_seconds,
                                        ts_cancel *cancel_or_null, uint8_t **token, size_t *length,
                                        int64_t *expires_at, ts_error **err);

/** ts_session_logout() that `cancel_or_null` can cancel (NULL: the plain form). */
int ts_session_logout_cancellable(ts_session *session, const char *account, ts_cancel *cancel_or_null,
                                  ts_logout_outcome *out, ts_error **err);

/** ts_session_resume() that `cancel_or_null` can cancel (NULL: the plain form). */
int ts_session_resume_cancellable(ts_session *session, ts_cancel *cancel_or_null, int *still_pending,
                                  ts_error **err);

/* ---- Logout that ends the browser session ------------------------------------------ */

/** What a logout did to the user's browser session at the provider
 *  (ts_session_logout_browser). Values are appended, never renumbered: a switch over them
 *  needs a default. Since 0.4.0. */
typedef enum ts_browser_session {
    TS_BROWSER_SESSION_NOT_ASKED = 0, /**< Not asked to end it (never from ts_session_logout_browser;
                                           the bindings' answer for a logout that did not ask). */
    TS_BROWSER_SESSION_ENDED = 1,     /**< The provider ended its session and sent the browser back
                                           to the loopback listener (with the `state` sent): the
                                           next sign-in shows its login page. */
    TS_BROWSER_SESSION_NOT_ENDED = 2, /**< The provider has no end-session endpoint (none in its
                                           discovery document): its browser session stays signed
                                           in; ask for prompt "login" at the next sign-in. Not an error. */
    TS_BROWSER_SESSION_FAILED = 3     /**< Ending it failed (no browser, no free port, no return in
                                           time, cancelled, the server not reachable): the code is in
                                           `*browser_error_or_null`. The logout itself stands. */
} ts_browser_session;

/**
 * Options of ts_session_logout_browser(). Initialize with ts_logout_options_init() (or
 * `ts_logout_options o = { sizeof o };`): every zero or NULL field means its default. The
 * fields mean what ts_sign_in_options' fields of the same names mean; `struct_size` lets a
 * later version add fields at the end (a size the library does not know: invalidInput).
 * Since 0.4.0.
 */
typedef struct ts_logout_options {
    size_t struct_size;        /**< sizeof(ts_logout_options), set by ts_logout_options_init(). */
    const uint16_t *ports;     /**< Loopback ports for the browser's return, tried in order; NULL/0:
                                    53180-53183; port 0: any free port. */
    size_t port_count;         /**< Entries in `ports` (at most 64). */
    const char *redirect_path; /**< NULL: "/callback". The return address is
                                    http://127.0.0.1:PORT<redirect_path>: register it at the provider
                                    as a post-logout redirect URI (Auth0: an Allowed Logout URL). */
    int timeout_seconds;       /**< The longest wait for the browser's return, 1-86400; 0: 120. */
    ts_open_url_fn open_url;   /**< NULL: the system browser ($BROWSER, then GIO, then xdg-open).
                                    Given the listener's one-time http://127.0.0.1:PORT/start/<id>,
                                    which redirects once to the end-session URL: never the ID token. */
    void *user_data;           /**< Passed to `open_url`. */
} ts_logout_options;

/** Sets `options` to the defaults: struct_size set, every other field zero (NULL is ignored).
 *  Since 0.4.0. */
void ts_logout_options_init(ts_logout_options *options);

/**
 * Logs `account` (service "auth0") out as ts_session_logout() does (the revocation, the local
 * delete and the credential state first, never waiting on the browser), then ends the user's
 * browser session at the provider so that the next sign-in asks who signs in: the browser
 * opens the provider's end_session_endpoint (OpenID Connect RP-initiated logout, with
 * client_id, the account's ID token as id_token_hint, post_logout_redirect_uri and a fresh
 * state the return must carry), or Auth0's /v2/logout (client_id, returnTo), and the call
 * waits for it to come back to the loopback listener, at most the time-out.
 * `options_or_null` NULL uses every default; `cancel_or_null` (NULL: none) cancels the wait
 * (TS_BROWSER_SESSION_FAILED, code "cancelled"; the logout itself as
 * ts_session_logout_cancellable() answers it).
 * On TS_OK: `*out` is the logout's outcome, `*browser_out` one of TS_BROWSER_SESSION_ENDED,
 * _NOT_ENDED or _FAILED; with _FAILED, when `browser_error_or_null` is not NULL,
 * `*browser_error_or_null` receives a ts_error (free it with ts_error_free()) whose code says
 * why: browserUnavailable (no browser, or `open_url` returned non-zero), loopbackUnavailable,
 * timedOut, cancelled, insecureConfiguration (a redirect path that makes no loopback URI), a
 * network code; otherwise it is set to NULL. Blocking for up to the time-out: call it from a
 * worker thread. Since 0.4.0.
 * Codes (TS_ERROR: nothing of the browser part was tried): those of ts_session_logout(),
 * cancelled (only while it waited behind another call on the same account), invalidInput (a
 * bad pointer, `struct_size`, port count or time-out).
 */
int ts_session_logout_browser(ts_session *session, const char *account, const ts_logout_options *options_or_null,
                              ts_cancel *cancel_or_null, ts_logout_outcome *out, ts_browser_session *browser_out,
                              ts_error **browser_error_or_null, ts_error **err);

/** Wipes and frees a string returned by this library (NULL is ignored). Such strings are
 *  malloc()'d, so free() and g_free() release them too (Vala's owned strings are freed that
 *  way), but without the wipe. */
void ts_string_free(char *string);

/* ---- Errors ------------------------------------------------------------------------- */

/** The error's code, e.g. "keyringLocked", "integrityCheckFailed", "invalidInput": the
 *  rawValue of TokenStoreError.Code or AuthSessionError.Code. Valid until ts_error_free().
 *  NULL for a NULL error. */
const char *ts_error_code(const ts_error *error);

/** A one-line description for logs (never a secret): what went wrong, its cause and a hint,
 *  without the code (print `code: message`). Valid until ts_error_free(). */
const char *ts_error_message(const ts_error *error);

/** Frees an error (NULL is ignored). */
void ts_error_free(ts_error *error);

#ifdef __cplusplus
}
#endif

#endif /* TOKENSTORE_H */
