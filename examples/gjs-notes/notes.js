// gjs-notes: TokenStore from GJS in a GTK 4 window, on the GObject library's async API
// (libtokenstore-gobject through GObject Introspection, `gi://TokenStore`):
//
//   gjs -m examples/gjs-notes/notes.js --domain URL --client-id ID [--store PATH]
//
// "Sign in" awaits session.sign_in_async() (the system browser, $BROWSER first) with a
// Gio.Cancellable that "Cancel" triggers; "Log out" awaits session.logout_async(); a logout made
// by another process arrives as the store's account-removed signal. Each label change is also
// written to stdout ("gjs-notes: status=…") for scripts/test-gtk; no identifier is printed.
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';
import Gtk from 'gi://Gtk?version=4.0';
import TokenStore from 'gi://TokenStore?version=1';
import {exit, programArgs} from 'system';

Gio._promisify(TokenStore.Store, 'new_async', 'new_finish');
Gio._promisify(TokenStore.Session.prototype, 'sign_in_async', 'sign_in_finish');
Gio._promisify(TokenStore.Session.prototype, 'logout_async', 'logout_finish');
Gio._promisify(TokenStore.Session.prototype, 'get_access_token_async', 'get_access_token_finish');

const ACCOUNT = 'default';
const options = {};
for (let i = 0; i + 1 < programArgs.length; i += 2)
    options[programArgs[i].replace(/^--/, '')] = programArgs[i + 1];
if (!options.domain || !options['client-id']) {
    printerr('usage: gjs -m notes.js --domain URL --client-id ID [--store PATH]');
    exit(64);
}

const app = new Gtk.Application({application_id: 'org.example.GjsNotes', flags: Gio.ApplicationFlags.NON_UNIQUE});
app.connect('activate', () => {
    const window = new Gtk.ApplicationWindow({application: app, title: 'gjs-notes', default_width: 420, default_height: 200});
    const box = new Gtk.Box({orientation: Gtk.Orientation.VERTICAL, spacing: 10, margin_start: 20, margin_end: 20,
        margin_top: 20, margin_bottom: 20});
    const status = new Gtk.Label({xalign: 0, css_classes: ['heading']});
    const detail = new Gtk.Label({xalign: 0});
    const row = new Gtk.Box({spacing: 8});
    const signIn = Gtk.Button.new_with_mnemonic('_Sign in');
    const cancel = Gtk.Button.new_with_mnemonic('Ca_ncel');
    const logOut = Gtk.Button.new_with_mnemonic('_Log out');
    for (const button of [signIn, cancel, logOut])
        row.append(button);
    box.append(new Gtk.Label({label: 'gjs-notes · TokenStore', xalign: 0, css_classes: ['title-2']}));
    box.append(status);
    box.append(detail);
    box.append(row);
    window.set_child(box);

    let store = null, session = null, signedIn = false, busy = true, cancellable = null;
    const show = (label, name, text) => {
        label.label = text;
        print(`gjs-notes: ${name}=${text}`);
    };
    const update = () => {
        signIn.sensitive = session !== null && !busy && !signedIn;
        logOut.sensitive = !busy && signedIn;
        cancel.visible = cancellable !== null;
        print(`gjs-notes: ready=${busy ? 'no' : 'yes'}`);
    };

    signIn.connect('clicked', async () => {
        busy = true;
        cancellable = new Gio.Cancellable();
        update();
        show(status, 'status', 'Signing in (finish in the browser)…');
        try {
            await session.sign_in_async(ACCOUNT, null, cancellable);
            signedIn = true;
            const token = await session.get_access_token_async(ACCOUNT, null, null, 30, null);
            show(status, 'status', 'Signed in');
            show(detail, 'detail', `An access token of ${token.token.length} characters`);
        } catch (error) {
            show(status, 'status', error.matches(Gio.IOErrorEnum, Gio.IOErrorEnum.CANCELLED)
                ? 'Sign-in cancelled' : `Sign-in failed (${error.message})`);
        }
        busy = false;
        cancellable = null;
        update();
    });
    cancel.connect('clicked', () => cancellable?.cancel());
    logOut.connect('clicked', async () => {
        busy = true;
        update();
        try {
            const outcome = await session.logout_async(ACCOUNT, null);
            signedIn = false;
            show(status, 'status', 'Signed out');
            show(detail, 'detail', outcome === TokenStore.LogoutOutcome.REVOKED
                ? 'Logout: revoked at the server' : 'Logout: pending (the server will be told later)');
        } catch (error) {
            show(detail, 'detail', `Logout failed (${error.message})`);
        }
        busy = false;
        update();
    });

    show(status, 'status', 'Not signed in');
    update();
    window.present();
    print('gjs-notes: window=shown');
    TokenStore.Store.new_async('org.example.GjsNotes', options.store ?? null, null).then(opened => {
        store = opened;
        session = TokenStore.Session.new_for_domain(store, options.domain, options['client-id']);
        store.connect('account-removed', (_store, account) => {
            if (account.name !== ACCOUNT || !signedIn || busy)
                return;
            signedIn = false;
            show(status, 'status', 'Signed out (logged out elsewhere)');
            show(detail, 'detail', '');
            update();
        });
        busy = false;
        update();
    }).catch(error => show(status, 'status', `The store could not be opened (${error.message})`));
});
exit(app.run([]));
