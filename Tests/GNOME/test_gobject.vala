/*
 * libtokenstore-gobject from Vala, async/yield through the vapi vapigen made from
 * TokenStore-1.gir (namespace Ts), run by scripts/test-gnome on a GLib main loop against the
 * test server answering after 500 ms:
 *
 *   test_gobject_vala cancel STORE URL             a cancelled sign-in: IOError.CANCELLED within
 *                                                  100 ms, nothing stored
 *   test_gobject_vala flow STORE URL USER TOKENCTL sign-in -> token -> logout; a logout by
 *                                                  another process arrives as account-removed
 *
 * Both fail when a main-loop iteration was held up over 200 ms (a 5 ms tick, gap over 205 ms): a
 * call holding the loop across a network or keyring wait. The largest gap is a METRIC; scheduler
 * and GC noise alone reached 25 ms on CI and 53 ms at load 11, so it is a figure, not a limit.
 */
int failures = 0;
int64 last_tick = 0;
int64 max_gap = 0;

void check (bool condition, string what) {
    if (!condition) {
        failures++;
        stderr.printf ("test_gobject.vala: check failed: %s\n", what);
    }
}

async void sleep_ms (uint millis) {
    Timeout.add (millis, () => { sleep_ms.callback (); return Source.REMOVE; });
    yield;
}

async void cancel_test (string path, string url) throws Error {
    var store = yield new Ts.Store ("org.example.gnome", path, null);
    var session = new Ts.Session.for_domain (store, url, "tokenstore-test");
    session.set_redirect_ports ({ 0 });
    var cancellable = new Cancellable ();
    int64 at = 0;
    Timeout.add (300, () => { at = get_monotonic_time (); cancellable.cancel (); return Source.REMOVE; });
    try {
        yield session.sign_in_async ("carol", null, cancellable);
        check (false, "the cancelled sign-in succeeded");
    } catch (IOError.CANCELLED e) {
    }
    double took = (get_monotonic_time () - at) / 1000.0;
    check (took < 100, "cancelled within 100 ms, took %.1f ms".printf (took));
    var accounts = yield store.list_accounts_async (null);
    check (accounts.length == 0, "nothing stored");
    print ("METRIC gnome_cancel lang=vala cancel_ms=%.1f max_tick_gap_ms=%.1f\n", took, max_gap / 1000.0);
}

async void flow_test (string path, string url, string user, string tokenctl) throws Error {
    var store = yield new Ts.Store ("org.example.gnome", path, null);
    var removed = new HashTable<string, int64?> (str_hash, str_equal);
    store.account_removed.connect ((account) => { removed[account.name] = get_monotonic_time (); });
    bool revoked_seen = false;
    store.credential_state_changed.connect ((user_id, old_state, new_state) => {
        if (user_id == user && old_state == Ts.CredentialState.AUTHORIZED && new_state == Ts.CredentialState.REVOKED)
            revoked_seen = true;
    });
    var session = new Ts.Session.for_domain (store, url, "tokenstore-test");
    session.set_redirect_ports ({ 0 });

    var user_id = yield session.sign_in_async ("alice", null, null);
    check (user_id == user, "the sign-in returns the user id");
    var token = yield session.get_access_token_async ("alice", null, null, 60, null);
    check (token.token.length > 0 && token.expires_at > get_real_time () / 1000000, "an access token");
    var outcome = yield session.logout_async ("alice", null);
    check (outcome == Ts.LogoutOutcome.REVOKED, "logout revoked");
    yield sleep_ms (300);
    check (removed.contains ("alice"), "account-removed for our own logout");
    // The logout that also ends the browser session at the server (alice is logged out already).
    Ts.BrowserSessionOutcome browser_session;
    string? browser_code;
    var logged_out = yield session.logout_browser_async ("alice", null, out browser_session, out browser_code);
    check (logged_out == Ts.LogoutOutcome.NOT_FOUND && browser_session == Ts.BrowserSessionOutcome.ENDED
           && browser_code == null, "logout_browser ended the browser session");
    check (revoked_seen, "credential-state-changed authorized -> revoked");

    yield session.sign_in_async ("bob", null, null);
    var accounts = yield store.list_accounts_async (null);
    Ts.Account? bob = null;
    foreach (var account in accounts) if (account.name == "bob") bob = account;
    check (bob != null && bob.signed_in, "bob is signed in");
    int notified_false = 0;
    if (bob != null) bob.notify["signed-in"].connect (() => { if (!bob.signed_in) notified_false++; });
    int64 started = get_monotonic_time ();
    var process = new Subprocess (SubprocessFlags.NONE, tokenctl, "--quiet", "--store", path, "logout", "--domain", url,
                                  "--client-id", "tokenstore-test", "--account", "bob");
    check (yield process.wait_check_async (null), "tokenctl logout succeeded");
    while (!removed.contains ("bob") && get_monotonic_time () - started < 5000000) yield sleep_ms (10);
    check (removed.contains ("bob"), "another process's logout arrived as account-removed");
    check (notified_false == 1, "bob's signed-in went false with notify");
    double after = removed.contains ("bob") ? (removed["bob"] - started) / 1000.0 : -1;
    print ("METRIC gnome_flow lang=vala max_tick_gap_ms=%.1f removed_after_ms=%.0f\n", max_gap / 1000.0, after);
}

int main (string[] args) {
    var loop = new MainLoop ();
    last_tick = get_monotonic_time ();
    Timeout.add (5, () => {
        var now = get_monotonic_time ();
        max_gap = int64.max (max_gap, now - last_tick);
        last_tick = now;
        return Source.CONTINUE;
    });
    if (args.length == 4 && args[1] == "cancel") {
        cancel_test.begin (args[2], args[3], (source, result) => {
            try { cancel_test.end (result); } catch (Error e) { failures++; stderr.printf ("cancel: %s\n", e.message); }
            loop.quit ();
        });
    } else if (args.length == 6 && args[1] == "flow") {
        flow_test.begin (args[2], args[3], args[4], args[5], (source, result) => {
            try { flow_test.end (result); } catch (Error e) { failures++; stderr.printf ("flow: %s\n", e.message); }
            loop.quit ();
        });
    } else {
        stderr.printf ("usage: test_gobject_vala cancel STORE URL | flow STORE URL USER TOKENCTL\n");
        return 64;
    }
    loop.run ();
    if (max_gap >= 205000) {
        failures++;
        stderr.printf ("test_gobject.vala: the main loop stalled: a tick gap of %.1f ms\n", max_gap / 1000.0);
    }
    return failures == 0 ? 0 : 1;
}
