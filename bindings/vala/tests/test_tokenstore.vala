/*
 * The Vala binding (bindings/vala/tokenstore.vapi) as installed, compiled by scripts/test-cabi
 * with `valac --pkg tokenstore` against the installed prefix and run under `env -i`:
 *
 *   test_tokenstore_vala VERSION STORE URL
 *
 * Every call of the API once: version, items (binary round trip, not found, delete), errors
 * and their codes, open_with_pin (a store without a PIN slot, a short PIN), open_with_options (a
 * name that is not a policy's, whenUnlocked with no lock source, the idle lock) and access_policy,
 * key_slots, credential state,
 * a session (access token without a sign-in: interactionRequired; logout and resume), and browser sign-in with a Vala closure as the
 * opener (its captured state proves the delegate and its target reach the C callback): a
 * closure that fails gives browserUnavailable, one that opens nothing times out; last
 * harden_process (RLIMIT_CORE 0 afterwards).
 * Exit status 0 when every check passes.
 */
int failures = 0;

void check (bool condition, string what) {
    if (!condition) {
        failures++;
        stderr.printf ("test_tokenstore.vala: check failed: %s\n", what);
    }
}

void expect_error (int status, TokenStore.ErrorDetails? error, string code) {
    check (status == TokenStore.ERROR, "status is ERROR for " + code);
    check (error != null && error.code () == code, "code " + code + ", got " + (error != null ? error.code () : "none"));
    check (error != null && error.message ().length > 0, "a message for " + code);
}

int main (string[] args) {
    if (args.length != 4) {
        stderr.printf ("usage: test_tokenstore_vala VERSION STORE URL\n");
        return 64;
    }
    check (TokenStore.version () == args[1], "version");

    TokenStore.Store? store;
    TokenStore.ErrorDetails? error;
    int status = TokenStore.Store.open (args[2], "org.example.cabi.vala", out store, out error);
    check (status == TokenStore.OK && store != null, "open");
    TokenStore.Protection tier;
    string? reason;
    check (store.protection (out tier, out reason, out error) == TokenStore.OK, "protection");
    check (tier == TokenStore.Protection.KEYRING && reason != null && reason.length > 0, "a Secret Service store is the keyring tier");
    check ((int) TokenStore.Protection.SOFTWARE_TPM == 4, "a software TPM is its own tier, appended");
    if (store == null) return 1;
    status = TokenStore.Store.open (args[2], "not an app id", null, out error);
    expect_error (status, error, "invalidInput");
    // open_with_pin: the PIN as bytes; this keyring store has no TPM PIN key slot.
    TokenStore.Store? by_pin;
    uint8[] pin = { '4', '8', '2', '1' };
    expect_error (TokenStore.Store.open_with_pin (args[2], "org.example.cabi.vala", pin, out by_pin, out error), error, "wrongKeyProvider");
    check (by_pin == null, "no store without a PIN slot");
    expect_error (TokenStore.Store.open_with_pin (args[2], "org.example.cabi.vala", pin[0:3], out by_pin, out error), error, "invalidInput");
    // open_with_options: an access policy and an idle lock (the bus has no lock source here).
    var store_options = TokenStore.StoreOptions ();
    check (store_options.struct_size > 0 && store_options.access_policy == null && store_options.lock_after_idle_ms == 0, "store options defaults");
    TokenStore.Store? with_options;
    store_options.access_policy = "sometimes";
    expect_error (TokenStore.Store.open_with_options (args[2], "org.example.cabi.vala", store_options, out with_options, out error), error, "invalidInput");
    check (with_options == null, "no store for a name that is not a policy");
    store_options.access_policy = "whenUnlocked";
    expect_error (TokenStore.Store.open_with_options (args[2], "org.example.cabi.vala", store_options, out with_options, out error), error,
                  "lockSourceUnavailable");
    store_options.access_policy = "afterFirstUnlock";
    store_options.lock_after_idle_ms = 200;
    check (TokenStore.Store.open_with_options (args[2], "org.example.cabi.vala", store_options, out with_options, out error) == TokenStore.OK
           && with_options != null, "open_with_options");
    if (with_options != null) {
        string? policy;
        check (with_options.access_policy (out policy, out error) == TokenStore.OK && policy == "afterFirstUnlock", "access_policy");
        int idle_locked = -1;
        Thread.usleep (700000);
        check (with_options.is_locked (out idle_locked, out error) == TokenStore.OK && idle_locked == 1, "locked after 700 ms idle");
        with_options = null;
    }
    check (TokenStore.Store.open_with_options (args[2], "org.example.cabi.vala", null, out with_options, out error) == TokenStore.OK
           && with_options != null, "open_with_options with null options");
    with_options = null;

    // The key slots: a keyring store has one.
    unowned TokenStore.KeySlot[]? slots;
    check (store.key_slots (out slots, out error) == TokenStore.OK && slots != null, "key_slots");
    if (slots != null) {
        check (slots.length == 1 && slots[0].id == 1 && slots[0].kind == "secret-service", "one secret-service slot");
        check (slots[0].created_at > get_real_time () / 1000000 - 600 && slots[0].created_at <= get_real_time () / 1000000 + 1,
               "made within 10 minutes");
        TokenStore.key_slots_free (slots);
    }

    uint8[] secret = { 'r', 't', 0x00, 0xff };
    check (store.item_set (null, "alice", TokenStore.Kind.GENERIC, secret, out error) == TokenStore.OK, "set");
    unowned uint8[]? bytes;
    check (store.item_get ("auth0", "alice", TokenStore.Kind.GENERIC, out bytes, out error) == TokenStore.OK, "get");
    check (bytes != null && bytes.length == 4 && bytes[2] == 0x00 && bytes[3] == 0xff, "binary round trip");
    TokenStore.bytes_free (bytes);
    int locked = -1;
    check (store.is_locked (out locked, out error) == TokenStore.OK && locked == 0, "not locked");
    check (store.lock (false, out error) == TokenStore.OK, "lock");
    check (store.is_locked (out locked, out error) == TokenStore.OK && locked == 1, "locked");
    expect_error (store.item_get (null, "alice", TokenStore.Kind.GENERIC, out bytes, out error), error, "storeLocked");
    check (store.unlock (false, out error) == TokenStore.OK, "unlock");
    check (store.is_locked (out locked, out error) == TokenStore.OK && locked == 0, "unlocked");
    check (store.item_get (null, "alice", TokenStore.Kind.GENERIC, out bytes, out error) == TokenStore.OK, "get after unlock");
    TokenStore.bytes_free (bytes);
    // The cancellable get: an open handle reads; a triggered one is "cancelled" and reads nothing.
    TokenStore.Cancel? read_cancel;
    check (TokenStore.Cancel.create (out read_cancel, out error) == TokenStore.OK && read_cancel != null, "read cancel handle");
    check (store.item_get_cancellable (null, "alice", TokenStore.Kind.GENERIC, read_cancel, out bytes, out error) == TokenStore.OK
           && bytes != null && bytes.length == 4, "get with an open cancel handle");
    TokenStore.bytes_free (bytes);
    read_cancel.trigger ();
    expect_error (store.item_get_cancellable (null, "alice", TokenStore.Kind.GENERIC, read_cancel, out bytes, out error), error,
                  "cancelled");
    check (bytes == null, "no bytes from a cancelled get");
    check (store.item_delete (null, "alice", TokenStore.Kind.GENERIC, out error) == TokenStore.OK, "delete");
    check (store.item_get (null, "alice", TokenStore.Kind.GENERIC, out bytes, out error) == TokenStore.NOT_FOUND, "not found");
    check (bytes == null, "no bytes when not found");
    uint8[] empty = {};
    expect_error (store.item_set (null, "alice", TokenStore.Kind.ACCESS_TOKEN, empty, out error), error, "invalidInput");
    // The ID token and profile kinds, as in C (TS_KIND_ID_TOKEN = 5, TS_KIND_PROFILE = 6).
    check ((int) TokenStore.Kind.ID_TOKEN == 5 && (int) TokenStore.Kind.PROFILE == 6, "the kinds' C values");
    uint8[] id_token = { 'e', 'y', 'J' };
    check (store.item_set (null, "dave", TokenStore.Kind.ID_TOKEN, id_token, out error) == TokenStore.OK, "set an ID token");
    check (store.item_get (null, "dave", TokenStore.Kind.ID_TOKEN, out bytes, out error) == TokenStore.OK
           && bytes != null && bytes.length == 3, "get the ID token");
    TokenStore.bytes_free (bytes);
    TokenStore.State state;
    check (store.credential_state ("000999.nobody.apple", out state, out error) == TokenStore.OK, "state");
    check (state == TokenStore.State.NOT_FOUND, "state of a stranger");

    // Change events from a second connection, on the watcher thread; accounts and status.
    int added = 0;
    TokenStore.Watch? watch;
    TokenStore.ChangeFunc on_change = (change) => {
        if (change.kind == TokenStore.ChangeKind.ACCOUNT_ADDED && change.account == "watched") AtomicInt.inc (ref added);
    };
    check (store.watch (on_change, out watch, out error) == TokenStore.OK && watch != null, "watch");
    TokenStore.Store? other;
    check (TokenStore.Store.open (args[2], "org.example.cabi.vala", out other, out error) == TokenStore.OK, "second connection");
    check (other.item_set (null, "watched", TokenStore.Kind.REFRESH_TOKEN, secret, out error) == TokenStore.OK, "sign-in elsewhere");
    for (int i = 0; i < 500 && AtomicInt.get (ref added) == 0; i++) Thread.usleep (10000);
    check (AtomicInt.get (ref added) == 1, "accountAdded arrived");
    watch = null;  // ts_watch_free
    string[]? names;
    check (store.accounts (out names, out error) == TokenStore.OK && names != null && "watched" in names, "accounts");
    string? watched_user;
    int signed_in;
    check (store.account_status ("watched", out watched_user, out signed_in, out error) == TokenStore.OK
           && signed_in == 1 && watched_user == null, "account status");
    other = null;

    TokenStore.Session? session;
    expect_error (TokenStore.Session.create (store, "ftp://127.0.0.1/", "tokenstore-test", out session, out error),
                  error, "insecureConfiguration");
    check (TokenStore.Session.create (store, args[3], "tokenstore-test", out session, out error) == TokenStore.OK, "session");
    if (session == null) return 1;
    unowned uint8[]? token;
    int64 expires_at;
    expect_error (session.access_token ("nobody", null, "openid", 60, out token, out expires_at, out error),
                  error, "interactionRequired");
    TokenStore.LogoutOutcome outcome;
    check (session.logout ("nobody", out outcome, out error) == TokenStore.OK, "logout");
    check (outcome == TokenStore.LogoutOutcome.NOT_FOUND, "logout of nobody");
    int pending;
    check (session.resume (out pending, out error) == TokenStore.OK && pending == 0, "resume");

    // Browser sign-in with closures as openers.
    int calls = 0;
    string? seen = null;
    uint16[] ports = { 0 };
    var options = TokenStore.SignInOptions ();
    check (options.struct_size > 0 && options.open_url == null && options.timeout_seconds == 0, "defaults");
    options.ports = ports;
    options.timeout_seconds = 60;
    options.open_url = (url) => { calls++; seen = url; return 1; };
    string? user_id;
    expect_error (session.sign_in_browser ("alice", options, out user_id, out error), error, "browserUnavailable");
    check (calls == 1 && seen != null && seen.has_prefix ("http://127.0.0.1:") && seen.contains ("/start/") && !seen.contains ("?"), "the closure got the URL");
    check (user_id == null, "no user id on failure");
    options.open_url = (url) => { calls++; return 0; };
    options.timeout_seconds = 1;
    expect_error (session.sign_in_browser ("alice", options, out user_id, out error), error, "timedOut");
    check (calls == 2, "the second closure ran");
    options.timeout_seconds = -1;
    expect_error (session.sign_in_browser ("alice", options, out user_id, out error), error, "invalidInput");
    check (calls == 2, "not called for bad input");
    // Logout that ends the browser session: a closure that starts no browser; the logout stands.
    var logout_options = TokenStore.LogoutOptions ();
    check (logout_options.struct_size > 0 && logout_options.open_url == null, "logout defaults");
    logout_options.ports = ports;
    logout_options.timeout_seconds = 60;
    int logout_calls = 0;
    logout_options.open_url = (url) => { logout_calls++; seen = url; return 1; };
    TokenStore.BrowserSession browser;
    TokenStore.ErrorDetails? browser_error;
    check (session.logout_browser ("nobody", logout_options, null, out outcome, out browser, out browser_error,
                                   out error) == TokenStore.OK, "logout_browser");
    check (outcome == TokenStore.LogoutOutcome.NOT_FOUND && browser == TokenStore.BrowserSession.FAILED,
           "logout_browser: logged out, the browser part failed");
    check (browser_error != null && browser_error.code () == "browserUnavailable", "the browser part's code");
    check (logout_calls == 1 && seen.contains ("/start/") && !seen.contains ("?"), "the closure got the start address");
    // The device sign-in binds and type-checks here (the C and Python tests run it against the server).
    TokenStore.UserCodeFunc show = (code, uri, complete, expires_in) => { calls++; };
    if (calls < 0) session.sign_in_device ("alice", null, null, 0, show, out user_id, out error);
    check (store.item_get (null, "alice", TokenStore.Kind.REFRESH_TOKEN, out bytes, out error) == TokenStore.NOT_FOUND,
           "nothing stored");

    // A cancel handle: a sign-in waiting for the browser, cancelled from another thread.
    TokenStore.Cancel? cancel;
    check (TokenStore.Cancel.create (out cancel, out error) == TokenStore.OK && cancel != null, "cancel handle");
    options.timeout_seconds = 60;
    options.open_url = (url) => { AtomicInt.inc (ref calls); return 0; };
    int cancelled_status = 0;
    string? cancelled_code = null;
    unowned TokenStore.Cancel handle = cancel;
    unowned TokenStore.Session waiting_session = session;
    var worker = new Thread<bool> ("sign-in", () => {
        TokenStore.ErrorDetails? thread_error;
        string? no_user;
        cancelled_status = waiting_session.sign_in_browser_cancellable ("alice", options, handle, out no_user, out thread_error);
        cancelled_code = thread_error != null ? thread_error.code () : null;
        return true;
    });
    for (int i = 0; i < 3000 && AtomicInt.get (ref calls) == 2; i++) Thread.usleep (10000);
    Thread.usleep (50000);
    int64 triggered = get_monotonic_time ();
    cancel.trigger ();
    worker.join ();
    int64 took = get_monotonic_time () - triggered;
    check (cancelled_status == TokenStore.ERROR && cancelled_code == "cancelled", "a cancelled sign-in fails cancelled");
    check (took < 100000, "cancelled within 100 ms, took %lld µs".printf (took));
    expect_error (session.logout_cancellable ("alice", cancel, out outcome, out error), error, "cancelled");
    check (session.resume_cancellable (null, out pending, out error) == TokenStore.OK, "resume with no cancel handle");
    // Last: the process stays hardened. Twice: harmless.
    check (TokenStore.harden_process (out error) == TokenStore.OK && error == null, "harden_process");
    check (TokenStore.harden_process (out error) == TokenStore.OK, "harden_process again");
    string limits;
    try {
        FileUtils.get_contents ("/proc/self/limits", out limits);
    } catch (FileError e) {
        limits = "";
    }
    check (/Max core file size +0 +0 /.match (limits), "RLIMIT_CORE 0 0 after harden_process");
    return failures == 0 ? 0 : 1;
}
