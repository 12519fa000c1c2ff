// libtokenstore-gobject from GJS (`gjs -m`), with Gio._promisify so that `await` works, run by
// scripts/test-gnome on a GLib main loop against the test server answering after 500 ms:
//
//   gjs -m test_gobject.js cancel STORE URL            a cancelled sign-in: G_IO_ERROR_CANCELLED
//                                                      within 100 ms, nothing stored
//   gjs -m test_gobject.js flow STORE URL USER TOKENCTL sign-in -> token -> logout; a logout by
//                                                      another process arrives as account-removed
//
// Both fail when a main-loop iteration was held up over 200 ms (a 5 ms tick, gap over 205 ms): a
// call holding the loop across a network or keyring wait. The largest gap is a METRIC; scheduler
// and GC noise alone reached 25 ms on CI and 53 ms at load 11, so it is a figure, not a limit.
import GLib from 'gi://GLib';
import Gio from 'gi://Gio';
import TokenStore from 'gi://TokenStore?version=1';
import {exit} from 'system';

Gio._promisify(TokenStore.Store, 'new_async', 'new_finish');
for (const method of ['get', 'set', 'delete', 'list_accounts', 'get_credential_state'])
    Gio._promisify(TokenStore.Store.prototype, `${method}_async`, `${method}_finish`);
for (const method of ['sign_in', 'get_access_token', 'logout', 'resume'])
    Gio._promisify(TokenStore.Session.prototype, `${method}_async`, `${method}_finish`);
Gio._promisify(Gio.Subprocess.prototype, 'wait_check_async', 'wait_check_finish');

let failures = 0;
function check(condition, what) {
    if (!condition) {
        failures++;
        printerr(`test_gobject.js: check failed: ${what}`);
    }
}

let lastTick = GLib.get_monotonic_time();
let maxGap = 0;
GLib.timeout_add(GLib.PRIORITY_DEFAULT, 5, () => {
    const now = GLib.get_monotonic_time();
    maxGap = Math.max(maxGap, now - lastTick);
    lastTick = now;
    return GLib.SOURCE_CONTINUE;
});
const sleep = ms => new Promise(resolve => GLib.timeout_add(GLib.PRIORITY_DEFAULT, ms, () => {
    resolve();
    return GLib.SOURCE_REMOVE;
}));

async function cancel(path, url) {
    const store = await TokenStore.Store.new_async('org.example.gnome', path, null);
    const session = TokenStore.Session.new_for_domain(store, url, 'tokenstore-test');
    session.set_redirect_ports([0]);
    const cancellable = new Gio.Cancellable();
    let at = 0;
    GLib.timeout_add(GLib.PRIORITY_DEFAULT, 300, () => {
        at = GLib.get_monotonic_time();
        cancellable.cancel();
        return GLib.SOURCE_REMOVE;
    });
    try {
        await session.sign_in_async('carol', null, cancellable);
        check(false, 'the cancelled sign-in succeeded');
    } catch (error) {
        check(error.matches(Gio.IOErrorEnum, Gio.IOErrorEnum.CANCELLED), `cancelled: ${error}`);
    }
    const took = (GLib.get_monotonic_time() - at) / 1000;
    check(took < 100, `cancelled within 100 ms, took ${took.toFixed(1)} ms`);
    check((await store.list_accounts_async(null)).length === 0, 'nothing stored');
    print(`METRIC gnome_cancel lang=gjs cancel_ms=${took.toFixed(1)} max_tick_gap_ms=${(maxGap / 1000).toFixed(1)}`);
}

async function flow(path, url, user, tokenctl) {
    const store = await TokenStore.Store.new_async('org.example.gnome', path, null);
    const removed = new Map();
    store.connect('account-removed', (_store, account) => removed.set(account.name, GLib.get_monotonic_time()));
    const states = [];
    store.connect('credential-state-changed', (_store, userId, from, to) => states.push([userId, from, to]));
    const session = TokenStore.Session.new_for_domain(store, url, 'tokenstore-test');
    session.set_redirect_ports([0]);

    check(await session.sign_in_async('alice', ['openid', 'email'], null) === user, 'the sign-in returns the user id');
    const token = await session.get_access_token_async('alice', null, null, 60, null);
    check(token.token.length > 0 && token.expires_at > Date.now() / 1000, 'an access token');
    const outcome = await session.logout_async('alice', null);
    check(outcome === TokenStore.LogoutOutcome.REVOKED, `logout revoked: ${outcome}`);
    await sleep(300);
    check(removed.has('alice'), 'account-removed for our own logout');
    // The logout that ends the browser session introspects (the C and Python flows run it).
    check(typeof session.logout_browser_async === 'function' && typeof session.logout_browser_finish === 'function' &&
          TokenStore.BrowserSessionOutcome.NOT_ENDED === 2, 'logout_browser and BrowserSessionOutcome introspect');
    check(states.some(([id, from, to]) => id === user && from === TokenStore.CredentialState.AUTHORIZED &&
        to === TokenStore.CredentialState.REVOKED), 'credential-state-changed authorized -> revoked');

    // Choosing who signs in: a hinted sign-in (prompt select_account, acr-values) signs in the hinted user.
    session.prompt = TokenStore.SignInPrompt.SELECT_ACCOUNT;
    session.login_hint = `${user}.hinted`;
    session.acr_values = 'urn:tokenstore:test:password';
    check(await session.sign_in_async('bob', null, null) === `${user}.hinted`, 'the hinted sign-in signs in the hinted user');
    session.login_hint = null;
    session.prompt = TokenStore.SignInPrompt.DEFAULT;
    const bob = (await store.list_accounts_async(null)).find(account => account.name === 'bob');
    check(bob && bob.signed_in, 'bob is signed in');
    const notified = [];
    bob?.connect('notify::signed-in', account => notified.push(account.signed_in));
    const started = GLib.get_monotonic_time();
    const process = Gio.Subprocess.new([tokenctl, '--quiet', '--store', path, 'logout', '--domain', url,
        '--client-id', 'tokenstore-test', '--account', 'bob'], Gio.SubprocessFlags.NONE);
    check(await process.wait_check_async(null), 'tokenctl logout succeeded');
    while (!removed.has('bob') && GLib.get_monotonic_time() - started < 5_000_000)
        await sleep(10);
    check(removed.has('bob'), "another process's logout arrived as account-removed");
    check(notified.length === 1 && notified[0] === false, `bob's signed-in went false: ${notified}`);
    const after = ((removed.get('bob') ?? started) - started) / 1000;
    print(`METRIC gnome_flow lang=gjs max_tick_gap_ms=${(maxGap / 1000).toFixed(1)} removed_after_ms=${after.toFixed(0)}`);
}

const [mode, ...args] = ARGV;
const loop = new GLib.MainLoop(null, false);
({cancel, flow})[mode](...args).catch(error => {
    failures++;
    printerr(`test_gobject.js: ${error}\n${error.stack}`);
}).finally(() => loop.quit());
loop.run();
if (maxGap >= 205000) {
    failures++;
    printerr(`test_gobject.js: the main loop stalled: a tick gap of ${(maxGap / 1000).toFixed(1)} ms`);
}
exit(failures ? 1 : 0);
