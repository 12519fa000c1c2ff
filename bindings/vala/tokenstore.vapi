/*
 * tokenstore.vapi: Vala bindings for libtokenstore.so.1 (include/tokenstore.h), installed by
 * `make install` to PREFIX/share/vala/vapi. Use with `valac --pkg tokenstore` (valac finds
 * tokenstore.pc through pkg-config for the compiler and linker flags).
 *
 * A one-to-one binding of the C calls: each returns TokenStore.OK, TokenStore.NOT_FOUND or
 * TokenStore.ERROR, with the details in an ErrorDetails (its code() and message()). Secrets
 * come back as unowned byte arrays: release each with TokenStore.bytes_free(), which wipes it.
 * A Store or Session may be freed while other threads use it: their later calls fail with
 * "storeClosed".
 * Every call blocks: run it in a worker thread (GLib.Thread, GLib.Task) in a GTK app.
 *
 *   TokenStore.Store? store;
 *   TokenStore.ErrorDetails? error;
 *   if (TokenStore.Store.open (null, "org.example.Notes", out store, out error) != TokenStore.OK)
 *       critical ("%s: %s", error.code (), error.message ());
 *
 *   var options = TokenStore.SignInOptions ();
 *   options.open_url = (url) => { return GLib.AppInfo.launch_default_for_uri (url, null) ? 0 : 1; };
 *   string? user_id;
 *   session.sign_in_browser ("alice", options, out user_id, out error);
 */
[CCode (cheader_filename = "tokenstore.h", lower_case_cprefix = "ts_", cprefix = "ts_")]
namespace TokenStore {
    [CCode (cname = "TS_OK")]
    public const int OK;
    [CCode (cname = "TS_NOT_FOUND")]
    public const int NOT_FOUND;
    [CCode (cname = "TS_ERROR")]
    public const int ERROR;

    /* The library's version ("MAJOR.MINOR.PATCH"). */
    [CCode (cname = "ts_version")]
    public unowned string version ();

    [CCode (cname = "ts_kind", cprefix = "TS_KIND_", has_type_id = false)]
    public enum Kind {
        REFRESH_TOKEN,
        APPLE_USER_ID,
        ACCESS_TOKEN,
        GENERIC,
        ID_TOKEN,
        PROFILE
    }

    [CCode (cname = "ts_state", cprefix = "TS_STATE_", has_type_id = false)]
    public enum State {
        AUTHORIZED,
        REVOKED,
        NOT_FOUND
    }

    [CCode (cname = "ts_protection", cprefix = "TS_PROTECTION_", has_type_id = false)]
    public enum Protection {
        HARDWARE,
        KEYRING,
        PORTAL,
        PASSPHRASE,
        SOFTWARE_TPM
    }

    [CCode (cname = "ts_logout_outcome", cprefix = "TS_LOGOUT_", has_type_id = false)]
    public enum LogoutOutcome {
        REVOKED,
        NOT_FOUND,
        PENDING,
        FAILED
    }

    /* The details of a failed call (ts_error): a stable code and a message without secrets. */
    [Compact, CCode (cname = "ts_error", free_function = "ts_error_free")]
    public class ErrorDetails {
        /* The library's error code, e.g. "keyringLocked", "timedOut", "invalidInput". */
        [CCode (cname = "ts_error_code")]
        public unowned string code ();
        [CCode (cname = "ts_error_message")]
        public unowned string message ();
    }

    /* Keeps the process's memory out of crash dumps and away from other processes of the user
     * (ts_harden_process: PR_SET_DUMPABLE 0, RLIMIT_CORE 0). The library's own copies of
     * secrets are kept out of dumps anyway; this covers libcurl's, OpenSSL's and the app's.
     * Call it once, early in main. */
    [CCode (cname = "ts_harden_process")]
    public int harden_process (out ErrorDetails? error);

    /* Wipes and frees a secret returned by item_get or access_token. The array's length must
     * be the one returned (another aborts the process, see ts_bytes_free). */
    [CCode (cname = "ts_bytes_free")]
    public void bytes_free ([CCode (array_length_type = "size_t")] uint8[]? bytes);

    /* One key slot (ts_key_slot): one way to the store's data key, never its secret. Owned by the
     * array Store.key_slots returns; release that with key_slots_free. */
    [Compact, CCode (cname = "ts_key_slot", free_function = "")]
    public class KeySlot {
        public size_t struct_size;
        /* The slot's number in the store (1 for its first). */
        public int64 id;
        /* The provider kind as recorded: "secret-service", "portal", "passphrase", "tpm", "tpm-pin",
         * "recovery", or an app's own provider's name. */
        public unowned string kind;
        /* Seconds since the Unix epoch. */
        public int64 created_at;
    }

    /* Frees the array of Store.key_slots. */
    [CCode (cname = "ts_key_slots_free")]
    public void key_slots_free ([CCode (array_length = false, array_null_terminated = true)] KeySlot[]? slots);

    /* ts_store_options: `TokenStore.StoreOptions ()` sets the defaults (every field unset). */
    [CCode (cname = "ts_store_options", has_type_id = false, destroy_function = "")]
    public struct StoreOptions {
        [CCode (cname = "ts_store_options_init")]
        public StoreOptions ();
        public size_t struct_size;
        /* "afterFirstUnlock", "whenUnlocked", "userPresence", "userPresence:session:SECONDS",
         * "userPresence:appLifecycle:SECONDS"; null: the one the store records. Never weakens the
         * recorded one; whenUnlocked needs logind or a screensaver (else lockSourceUnavailable). */
        public unowned string? access_policy;
        /* Lock the handle after this many milliseconds without a read or write; 0: never. */
        public int64 lock_after_idle_ms;
    }

    /* An open store (ts_store); closed when the last reference (this or a session) goes. */
    [Compact, CCode (cname = "ts_store", free_function = "ts_store_close")]
    public class Store {
        /* path null: $XDG_DATA_HOME/<app_id>/tokens.sqlite. */
        [CCode (cname = "ts_store_open")]
        public static int open (string? path, string app_id, out Store? store, out ErrorDetails? error);

        /* An existing store opened with its TPM + PIN key slot; pin: 4-64 bytes (the library's copy
         * is wiped when the store closes). wrongPIN, then tpmLockedOut when the TPM has had too many wrong PINs. */
        [CCode (cname = "ts_store_open_with_pin")]
        public static int open_with_pin (string? path, string app_id, [CCode (array_length_type = "size_t")] uint8[] pin,
                                         out Store? store, out ErrorDetails? error);

        /* open() with options (an access policy, an idle lock); options null: open(). A name that is
         * not a policy's: invalidInput, nothing opened. */
        [CCode (cname = "ts_store_open_with_options")]
        public static int open_with_options (string? path, string app_id, StoreOptions? options, out Store? store,
                                             out ErrorDetails? error);

        /* The name of the access policy in force (recorded, or a stronger one asked at open). */
        [CCode (cname = "ts_store_access_policy")]
        public int access_policy (out string? name, out ErrorDetails? error);

        /* The store's key slots, by id; release the array with TokenStore.key_slots_free. */
        [CCode (cname = "ts_store_key_slots")]
        public int key_slots ([CCode (array_length = false, array_null_terminated = true)] out unowned KeySlot[]? slots,
                              out ErrorDetails? error);

        /* service null: "auth0". */
        [CCode (cname = "ts_item_set")]
        public int item_set (string? service, string account, Kind kind,
                             [CCode (array_length_type = "size_t")] uint8[] bytes, out ErrorDetails? error);

        /* OK: `bytes` holds a copy to release with bytes_free(); NOT_FOUND: no such item. */
        [CCode (cname = "ts_item_get")]
        public int item_get (string? service, string account, Kind kind,
                             [CCode (array_length_type = "size_t")] out unowned uint8[]? bytes,
                             out ErrorDetails? error);
        /* item_get, cancellable through `cancel` (null: as item_get): a read waiting while polkit
         * asks the user (an item the access policy gates on the user's presence) ends at once. */
        [CCode (cname = "ts_item_get_cancellable")]
        public int item_get_cancellable (string? service, string account, Kind kind, Cancel? cancel,
                                         [CCode (array_length_type = "size_t")] out unowned uint8[]? bytes,
                                         out ErrorDetails? error);

        [CCode (cname = "ts_item_delete")]
        public int item_delete (string? service, string account, Kind kind, out ErrorDetails? error);

        [CCode (cname = "ts_credential_state")]
        public int credential_state (string user_id, out State state, out ErrorDetails? error);

        /* Wipes the data key; every call is storeLocked until unlock (all_processes: every process). */
        [CCode (cname = "ts_store_lock")]
        public int lock (bool all_processes, out ErrorDetails? error);

        /* Fetches the data key again; a store locked for every process needs all_processes. */
        [CCode (cname = "ts_store_unlock")]
        public int unlock (bool all_processes, out ErrorDetails? error);

        /* Whether this handle is locked now (its data key wiped); locked from the start when opened
         * while a lock for every process is recorded. */
        [CCode (cname = "ts_store_is_locked")]
        public int is_locked (out int locked, out ErrorDetails? error);

        [CCode (cname = "ts_store_protection")]
        public int protection (out Protection tier, out string? reason, out ErrorDetails? error);

        /* The accounts (service "auth0") with entries, sorted. */
        [CCode (cname = "ts_store_accounts")]
        public int accounts ([CCode (array_length = false, array_null_terminated = true)] out string[]? accounts,
                             out ErrorDetails? error);

        /* Whether the account is signed in (signed_in 1), and its Apple user id or null. */
        [CCode (cname = "ts_store_account_status")]
        public int account_status (string account, out string? user_id, out int signed_in, out ErrorDetails? error);

        /* Calls `callback` on the library's watcher thread with each change from now on, until
         * the Watch is freed; the closure must live as long as the watch. */
        [CCode (cname = "ts_store_watch")]
        public int watch (ChangeFunc callback, out Watch? watch, out ErrorDetails? error);
    }

    /*
     * Opens the sign-in URL in the user's browser; called on the thread that called
     * Session.sign_in_browser, once, before the wait. Return 0 when a browser was started,
     * anything else when none could be (browserUnavailable). Do not log the URL.
     */
    [CCode (cname = "ts_open_url_fn", instance_pos = 1.9, has_target = true)]
    public delegate int OpenUrlFunc (string url);

    /*
     * Shows the device sign-in's code; called on the thread that called
     * Session.sign_in_device, once, as soon as the server gave it: show it and return (the
     * sign-in polls meanwhile). The user code is not a secret. `verification_uri_complete` may
     * be null; `expires_in` is in seconds.
     */
    [CCode (cname = "ts_user_code_fn", instance_pos = 4.9, has_target = true)]
    public delegate void UserCodeFunc (string user_code, string verification_uri, string? verification_uri_complete,
                                       int expires_in);

    /* ts_sign_in_options: `TokenStore.SignInOptions ()` sets the defaults (every field unset). */
    [CCode (cname = "ts_sign_in_options", has_type_id = false, destroy_function = "")]
    public struct SignInOptions {
        [CCode (cname = "ts_sign_in_options_init")]
        public SignInOptions ();
        public size_t struct_size;
        /* Loopback redirect ports tried in order; null: 53180-53183; 0: any free port. */
        [CCode (array_length_cname = "port_count", array_length_type = "size_t")]
        public unowned uint16[]? ports;
        /* null: "/callback". */
        public unowned string? redirect_path;
        /* null: "apple"; "": the tenant's login page. */
        public unowned string? connection;
        /* Space-separated; null: "openid profile email". */
        public unowned string? scopes;
        public unowned string? audience;
        /* 1-86400; 0: 300. */
        public int timeout_seconds;
        /* null: the system browser ($BROWSER, GIO, xdg-open). Keep the delegate alive during the call. */
        [CCode (delegate_target_cname = "user_data")]
        public unowned OpenUrlFunc? open_url;
        /* Non-zero: bind the sign-in to the store's DPoP key (RFC 9449). 0: Bearer. */
        public int dpop;
        /* "login", "select_account", "consent" or "none"; null: none sent. */
        public unowned string? prompt;
        /* Who is expected to sign in (an identifier: sent only in the authorization request). */
        public unowned string? login_hint;
        /* Space-separated; the ID token's acr must be one of them. */
        public unowned string? acr_values;
        /* Non-zero: send max_age_seconds as max_age (0 included). */
        public int max_age_set;
        public int max_age_seconds;
    }

    /* What a logout did to the browser session at the provider (ts_browser_session). */
    [CCode (cname = "ts_browser_session", cprefix = "TS_BROWSER_SESSION_", has_type_id = false)]
    public enum BrowserSession {
        NOT_ASKED,
        ENDED,
        /* The provider has no end-session endpoint (not an error). */
        NOT_ENDED,
        /* Ending it failed: the code is in the browser error; the logout stands. */
        FAILED
    }

    /* ts_logout_options: `TokenStore.LogoutOptions ()` sets the defaults (every field unset). */
    [CCode (cname = "ts_logout_options", has_type_id = false, destroy_function = "")]
    public struct LogoutOptions {
        [CCode (cname = "ts_logout_options_init")]
        public LogoutOptions ();
        public size_t struct_size;
        /* Loopback ports for the browser's return; null: 53180-53183; 0: any free port. */
        [CCode (array_length_cname = "port_count", array_length_type = "size_t")]
        public unowned uint16[]? ports;
        /* null: "/callback". */
        public unowned string? redirect_path;
        /* 1-86400; 0: 120. */
        public int timeout_seconds;
        /* null: the system browser. Given the one-time start address, never the ID token. Keep
         * the delegate alive during the call. */
        [CCode (delegate_target_cname = "user_data")]
        public unowned OpenUrlFunc? open_url;
    }

    [CCode (cname = "ts_change_kind", cprefix = "TS_CHANGE_", has_type_id = false)]
    public enum ChangeKind {
        ACCOUNT_ADDED,
        ACCOUNT_REMOVED,
        CREDENTIAL_STATE,
        TOKENS_RENEWED,
        KEY_ROTATED,
        STORE_LOCKED,
        STORE_UNLOCKED
    }

    /* One change, valid only during the callback (ts_change). */
    [CCode (cname = "ts_change", has_type_id = false, destroy_function = "")]
    public struct Change {
        public size_t struct_size;
        public ChangeKind kind;
        public unowned string? service;
        public unowned string? account;
        public unowned string? user_id;
        public State from;
        public State to;
    }

    /* Called on the library's watcher thread with each change (ts_change_fn). */
    [CCode (cname = "ts_change_fn", has_target = true, instance_pos = 1.9)]
    public delegate void ChangeFunc (Change change);

    /* A subscription to a store's changes (ts_store_watch); freeing it ends it. */
    [Compact, CCode (cname = "ts_watch", free_function = "ts_watch_free")]
    public class Watch {
    }

    /* A session over a store talking to one authorization server (ts_session). */
    [Compact, CCode (cname = "ts_session", free_function = "ts_session_free")]
    public class Session {
        [CCode (cname = "ts_session_new")]
        public static int create (Store store, string domain, string client_id, out Session? session,
                                  out ErrorDetails? error);

        /* Any OpenID Connect provider by its issuer (endpoints by discovery). */
        [CCode (cname = "ts_session_new_issuer")]
        public static int create_for_issuer (Store store, string issuer, string client_id, out Session? session,
                                             out ErrorDetails? error);

        /* OK: `token` to release with bytes_free(); `expires_at` in Unix seconds, 0: unknown. */
        [CCode (cname = "ts_session_access_token")]
        public int access_token (string account, string? audience, string? scopes, int min_ttl_seconds,
                                 [CCode (array_length_type = "size_t")] out unowned uint8[]? token,
                                 out int64 expires_at, out ErrorDetails? error);

        [CCode (cname = "ts_session_logout")]
        public int logout (string account, out LogoutOutcome outcome, out ErrorDetails? error);

        [CCode (cname = "ts_session_resume")]
        public int resume (out int still_pending, out ErrorDetails? error);

        /* Whether the account's session is DPoP-bound (RFC 9449): `bound` 1 or 0. */
        [CCode (cname = "ts_session_is_dpop_bound")]
        public int is_dpop_bound (string account, out int bound, out ErrorDetails? error);

        /* A DPoP proof for `method` on `url` with the account's current access token (ath). */
        [CCode (cname = "ts_session_dpop_proof")]
        public int dpop_proof (string account, string method, string url, out string? proof, out ErrorDetails? error);

        /* Keeps an API's DPoP-Nonce (RFC 9449 9) for the proofs made to its origin from now on. */
        [CCode (cname = "ts_session_record_dpop_nonce")]
        public int record_dpop_nonce (string url, string nonce, out ErrorDetails? error);

        /* Blocks until the browser's redirect came back (at most the time-out) and the tokens are
         * stored. `user_id`: the Apple user id, or null. */
        [CCode (cname = "ts_session_sign_in_browser")]
        public int sign_in_browser (string account, SignInOptions? options, out string? user_id,
                                    out ErrorDetails? error);

        /* The device sign-in (RFC 8628): `on_user_code` shows the code, then this blocks until
         * the user approved on another device (or declined, or the code expired). `scopes`:
         * space-separated, null: "openid profile email". `dpop` non-zero: DPoP-bound. */
        [CCode (cname = "ts_session_sign_in_device")]
        public int sign_in_device (string account, string? scopes, string? audience, int dpop,
                                   UserCodeFunc on_user_code, out string? user_id, out ErrorDetails? error);

        /* The same calls, cancellable through `cancel` (null: as above); see Cancel. */
        [CCode (cname = "ts_session_sign_in_browser_cancellable")]
        public int sign_in_browser_cancellable (string account, SignInOptions? options, Cancel? cancel,
                                                out string? user_id, out ErrorDetails? error);
        [CCode (cname = "ts_session_access_token_cancellable")]
        public int access_token_cancellable (string account, string? audience, string? scopes, int min_ttl_seconds,
                                             Cancel? cancel, [CCode (array_length_type = "size_t")] out unowned uint8[]? token,
                                             out int64 expires_at, out ErrorDetails? error);
        [CCode (cname = "ts_session_logout_cancellable")]
        public int logout_cancellable (string account, Cancel? cancel, out LogoutOutcome outcome, out ErrorDetails? error);
        [CCode (cname = "ts_session_resume_cancellable")]
        public int resume_cancellable (Cancel? cancel, out int still_pending, out ErrorDetails? error);

        /* Logs out as logout() does, then ends the browser session at the provider (its
         * end-session endpoint through the browser, back to a loopback listener). OK:
         * `browser` ENDED, NOT_ENDED or FAILED (then `browser_error` says why; the logout stands). */
        [CCode (cname = "ts_session_logout_browser")]
        public int logout_browser (string account, LogoutOptions? options, Cancel? cancel, out LogoutOutcome outcome,
                                   out BrowserSession browser, out ErrorDetails? browser_error, out ErrorDetails? error);
    }

    /* A cancel handle (ts_cancel): trigger() from any thread ends the calls running with it
     * within milliseconds (a sign-in: "cancelled", nothing stored; a logout: PENDING), and every
     * later call given it fails at once. Connect a GLib.Cancellable's cancelled signal to it. */
    [Compact, CCode (cname = "ts_cancel", free_function = "ts_cancel_free")]
    public class Cancel {
        [CCode (cname = "ts_cancel_new")]
        public static int create (out Cancel? cancel, out ErrorDetails? error);
        [CCode (cname = "ts_cancel_trigger")]
        public void trigger ();
    }
}
