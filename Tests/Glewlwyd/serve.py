#!/usr/bin/env python3
"""Debian's glewlwyd (2.7.5, its OIDC plugin) on loopback for the tests: a real OAuth 2.0 /
OpenID Connect server nobody here wrote, with PKCE, refresh-token rotation, revocation, the
device authorization grant (RFC 8628), pushed authorization requests (RFC 9126) and DPoP.

    serve.py --state-dir DIR [--port N] [--port-file FILE] [--exit-with-parent] [--no-par]

The first start in DIR makes a throwaway server: an SQLite database from the package's own
schema (dbconfig-common's install script), an RSA key for RS256 ID tokens (openssl), random
passwords for glewlwyd's admin and the test user, a glewlwyd.conf bound to 127.0.0.1 only, and
then configures it through glewlwyd's admin API as an administrator would (the OIDC plugin
instance, the test user, the clients). Later starts with the same DIR and --port are the same
server. The port (a free one unless --port) is written to FILE once the server answers and is
configured; glewlwyd's log is DIR/glewlwyd.log. --no-par (at the first start) configures the
OIDC plugin without pushed authorization requests, so that clients send every parameter in the
browser's URL. Two users: alice (the default) and bob.

Glewlwyd itself is unchanged. The one file of ours it serves is the login page (glewlwyd's
`login_url`, a setting of its own): instead of glewlwyd's single-page app, a page that signs
the test user in through glewlwyd's documented login API (`POST /api/auth/`, `PUT
/api/auth/grant/{client_id}`) and goes on to the `callback_url` glewlwyd gave it, which is what
glewlwyd's own login page does after a person typed the password and clicked "continue". Like
glewlwyd's page (its webapp's login.js), it pre-fills the user name from the `login_hint`
glewlwyd passes on, and continues a live session's user (glewlwyd's `/api/profile_list`)
without a password unless glewlwyd passed `prompt=login` or `refresh_login` (max_age passed),
which make glewlwyd's page show the login form again: then it signs in with the password. Sent
by glewlwyd's end_session endpoint (`prompt=end_session`), it ends the session as glewlwyd's page
does when the user confirms, and follows the client's post-logout redirect.

Standard library only (Debian's python3), so no venv is needed.
"""
import argparse
import ctypes
import http.cookiejar
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

GLEWLWYD = os.environ.get("TOKENSTORE_GLEWLWYD", "/usr/bin/glewlwyd")
SCHEMA = Path("/usr/share/dbconfig-common/data/glewlwyd/install/sqlite3")
PLUGIN = "oidc"
USERNAME = "alice"
SECOND_USERNAME = "bob"
PUBLIC_CLIENT = "tokenstore-glewlwyd-public"
CONFIDENTIAL_CLIENT = "tokenstore-glewlwyd-confidential"
# Glewlwyd matches redirect URIs exactly, port included (the RFC 8252 any-port rule is not
# implemented): every port the tests use is registered.
REDIRECT_URIS = [f"http://127.0.0.1:{port}/callback" for port in range(53190, 53198)]
SCOPES = ["openid", "read"]

LOGIN_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>glewlwyd test login</title></head>
<body><p id="status">signing in</p>
<script>
(function () {
  var credentials = %(credentials)s;
  var params = new URLSearchParams(location.search);
  var status = document.getElementById("status");
  var prompt = params.get("prompt");
  var answer = "";
  function call(method, path, body) {
    // Synchronous on purpose: the page navigates before its load event, so a headless
    // browser that waits for the page (--dump-dom) waits for the whole sign-in.
    var request = new XMLHttpRequest();
    request.open(method, "/api" + path, false);
    request.setRequestHeader("Content-Type", "application/json");
    request.send(body ? JSON.stringify(body) : null);
    answer = request.responseText;
    return request.status;
  }
  // RP-initiated logout (glewlwyd's end_session endpoint sent the browser here with a valid
  // id_token_hint): what glewlwyd's page does when the user confirms "end session" — end the
  // OIDC session (its tokens disabled), end the glewlwyd session, go on to callback_url (the
  // client's registered post_logout_redirect_uri with its state).
  if (prompt === "end_session") {
    var plugin = params.get("plugin"), sid = params.get("sid");
    var ended = call("DELETE", "/" + encodeURIComponent(plugin) + "/session/" + encodeURIComponent(sid));
    if (ended !== 200) { status.textContent = "end session failed: " + ended; document.title = "end session failed"; return; }
    call("DELETE", "/auth/");
    var back = params.get("callback_url");
    if (back) { location.replace(back); } else { status.textContent = "session ended"; document.title = "session ended"; }
    return;
  }
  // glewlwyd's end states of the device flow (deviceComplete, deviceCodeError, ...) and
  // single_logout (an end_session without a valid id_token_hint): shown, nothing more.
  if (prompt && prompt !== "login") { status.textContent = "glewlwyd: " + prompt; document.title = prompt; return; }
  // The user name field, pre-filled from login_hint as glewlwyd's page does.
  var username = params.get("login_hint") || credentials.username;
  // A live session's user continues without a password, unless the login form is asked for again.
  var live = false;
  if (prompt !== "login" && !params.get("refresh_login") && call("GET", "/profile_list") === 200) {
    var users = JSON.parse(answer);
    live = users.length > 0 && users[0].username === username;
  }
  if (!live) {
    var login = call("POST", "/auth/", {username: username, password: credentials.passwords[username] || ""});
    if (login !== 200) { status.textContent = "login failed: " + login; document.title = "login failed"; return; }
  }
  var client = params.get("client_id"), scope = params.get("scope");
  if (client && scope) {
    var grant = call("PUT", "/auth/grant/" + encodeURIComponent(client), {scope: scope});
    if (grant !== 200) { status.textContent = "grant failed: " + grant; document.title = "grant failed"; return; }
  }
  var callback = params.get("callback_url");
  if (callback) { location.replace(callback + (callback.indexOf("?") > 0 ? "&g_continue" : "?g_continue")); }
})();
</script></body></html>
"""

CONFIG = """port=%(port)d
bind_address="127.0.0.1"
external_url="http://127.0.0.1:%(port)d"
login_url="login.html"
api_prefix="api"
static_files_path="%(static)s/"
allow_origin="http://127.0.0.1:%(port)d"
allow_methods="GET, POST, PUT, DELETE, OPTIONS"
allow_headers="Origin, X-Requested-With, Content-Type, Accept, Bearer, Authorization, DPoP"
expose_headers="Content-Encoding, Authorization"
log_mode="file"
log_level="%(log_level)s"
log_file="%(log)s"
cookie_secure=0
cookie_same_site="empty"
session_expiration=3600
session_key="GLEWLWYD2_SESSION_ID"
admin_session_authentication="cookie"
profile_session_authentication="cookie"
allow_multiple_user_per_session=true
login_api_enabled=true
plugin_api_run_enabled=""
add_x_frame_option_header_deny=true
admin_scope="g_admin"
profile_scope="g_profile"
user_module_path="/usr/lib/glewlwyd/user"
client_module_path="/usr/lib/glewlwyd/client"
user_auth_scheme_module_path="/usr/lib/glewlwyd/scheme"
plugin_module_path="/usr/lib/glewlwyd/plugin"
hash_algorithm="SHA512"
database =
{
  type = "sqlite3"
  path = "%(database)s"
};
static_files_mime_types =
(
  {
    extension = ".html"
    mime_type = "text/html"
  }
)
"""
# No `use_secure_connection=false` line: glewlwyd 2.7.5 reads the setting's presence, not its
# value, and then exits for want of a certificate.


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def prepare_state(state: Path) -> dict:
    """The throwaway server's files, made once: database, key, passwords, login page."""
    state.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o700)
    credentials_file = state / "credentials.json"
    if not credentials_file.exists():
        database = state / "glewlwyd.sqlite"
        schema = SCHEMA.read_text()
        subprocess.run(["sqlite3", str(database)], input=schema, text=True, check=True)
        key, public = state / "oidc-rsa.pem", state / "oidc-rsa.pub.pem"
        subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(key)],
                       check=True, stderr=subprocess.DEVNULL)
        subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout", "-out", str(public)], check=True)
        credentials = {
            "admin_password": secrets.token_urlsafe(24), "username": USERNAME, "password": secrets.token_urlsafe(24),
            "second_password": secrets.token_urlsafe(24),
            "confidential_secret": secrets.token_urlsafe(32), "configured": False,
        }
        credentials_file.write_text(json.dumps(credentials))
    for path in state.iterdir():
        if path.is_file():
            os.chmod(path, 0o600)
    credentials = json.loads(credentials_file.read_text())
    static = state / "static"
    static.mkdir(exist_ok=True)
    os.chmod(static, 0o700)
    passwords = {credentials["username"]: credentials["password"], SECOND_USERNAME: credentials["second_password"]}
    page = LOGIN_PAGE % {"credentials": json.dumps({"username": credentials["username"], "passwords": passwords})}
    (static / "login.html").write_text(page)
    os.chmod(static / "login.html", 0o600)
    return credentials


class Admin:
    """glewlwyd's admin API with a session cookie."""

    def __init__(self, port: int):
        self.base = f"http://127.0.0.1:{port}/api"
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def call(self, method: str, path: str, body=None, expect=(200,)):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with self.opener.open(request, timeout=30) as answer:
                status, text = answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read().decode()
        if status not in expect:
            raise RuntimeError(f"glewlwyd {method} {path}: HTTP {status}: {text[:300]}")
        return text


def plugin_parameters(port: int, state: Path, par: bool) -> dict:
    return {
        "iss": f"http://127.0.0.1:{port}/api/{PLUGIN}",
        "jwt-type": "rsa", "jwt-key-size": "256",
        "key": (state / "oidc-rsa.pem").read_text(), "cert": (state / "oidc-rsa.pub.pem").read_text(),
        "access-token-duration": 3600, "refresh-token-duration": 1209600, "code-duration": 600,
        # Rotation: every refresh answers with a new refresh token and disables the old one.
        "refresh-token-rolling": True, "refresh-token-one-use": "always",
        "allow-non-oidc": False,
        "auth-type-code-enabled": True, "auth-type-token-enabled": False, "auth-type-id-token-enabled": False,
        "auth-type-none-enabled": False, "auth-type-password-enabled": False, "auth-type-client-enabled": False,
        "auth-type-device-enabled": True, "auth-type-refresh-enabled": True,
        "device-authorization-expiration": 600, "device-authorization-interval": 1,
        "pkce-allowed": True, "pkce-method-plain-allowed": False,
        "introspection-revocation-allowed": True, "introspection-revocation-allow-target-client": True,
        "oauth-par-allowed": par, "oauth-par-required": False,
        "oauth-par-request_uri-prefix": "urn:ietf:params:oauth:request_uri:", "oauth-par-duration": 90,
        "oauth-dpop-allowed": True, "oauth-dpop-iat-duration": 60,
        "oauth-as-iss-id": True,
        # OIDC session management: ID tokens carry the session's `sid`, the discovery document
        # names `end_session_endpoint` (RP-initiated logout), and DELETE /api/oidc/session/{sid}
        # ends the session, as glewlwyd's own login page calls it when the user confirms.
        "session-management-allowed": True,
        "session-cookie-name": "GLEWLWYD2_OIDC_SID", "session-cookie-expiration": 2419200,
        "front-channel-logout-allowed": False, "back-channel-logout-allowed": False,
        "subject-type": "public",
        "claims": [], "scope": [],
    }


def configure(port: int, state: Path, credentials: dict, par: bool) -> None:
    """What an administrator does once, through glewlwyd's admin API."""
    admin = Admin(port)
    admin.call("POST", "/auth/", {"username": "admin", "password": "password"})  # the package's initial admin
    admin.call("PUT", "/profile/password", {"username": "admin", "old_password": "password",
                                            "password": credentials["admin_password"]})
    admin.call("POST", "/scope/", {"name": "read", "display_name": "Read", "description": "The test API",
                                   "password_required": False, "scheme": {}})
    admin.call("POST", "/mod/plugin/", {"module": "oidc", "name": PLUGIN, "display_name": "OpenID Connect",
                                        "parameters": plugin_parameters(port, state, par)})
    admin.call("POST", "/user/", {"username": credentials["username"], "password": credentials["password"],
                                  "name": "Alice Glewlwyd", "email": "alice@example.org", "scope": SCOPES,
                                  "enabled": True})
    admin.call("POST", "/user/", {"username": SECOND_USERNAME, "password": credentials["second_password"],
                                  "name": "Bob Glewlwyd", "email": "bob@example.org", "scope": SCOPES, "enabled": True})
    # The OIDC plugin checks a post_logout_redirect_uri against the client's
    # `post_logout_redirect_uris` (plural, a list), but the package's client backend declares only
    # `post_logout_redirect_uri` (singular, one value) and refuses an undeclared list: the
    # administrator declares the plural one, multiple, as glewlwyd's admin page would.
    backend = json.loads(admin.call("GET", "/mod/client/database"))
    backend["parameters"]["data-format"]["post_logout_redirect_uris"] = {"multiple": True, "read": True, "write": True}
    admin.call("PUT", "/mod/client/database", backend)
    admin.call("PUT", "/mod/client/database/reset")  # the instance reloads its settings
    common = {"enabled": True, "redirect_uri": REDIRECT_URIS, "post_logout_redirect_uris": REDIRECT_URIS, "scope": SCOPES,
              "authorization_type": ["code", "device_authorization", "refresh_token"]}
    admin.call("POST", "/client/", dict(common, client_id=PUBLIC_CLIENT, name="TokenStore (public)", confidential=False))
    admin.call("POST", "/client/", dict(common, client_id=CONFIDENTIAL_CLIENT, name="TokenStore (confidential)",
                                        confidential=True, client_secret=credentials["confidential_secret"],
                                        token_endpoint_auth_method=["client_secret_post"]))


def answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/config", timeout=1) as answer:
            return answer.status == 200
    except (OSError, urllib.error.URLError):
        return False


def start_glewlwyd(state: Path, port: int, log_level: str) -> subprocess.Popen:
    (state / "glewlwyd.conf").write_text(CONFIG % {
        "port": port, "static": state / "static", "log": state / "glewlwyd.log",
        "database": state / "glewlwyd.sqlite", "log_level": log_level})
    os.chmod(state / "glewlwyd.conf", 0o600)
    libc = ctypes.CDLL(None, use_errno=True)

    def die_with_us():
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: glewlwyd never outlives this supervisor

    return subprocess.Popen([GLEWLWYD, "--config-file", str(state / "glewlwyd.conf")], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=open(state / "glewlwyd.stderr", "ab"),
                            preexec_fn=die_with_us)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file")
    parser.add_argument("--exit-with-parent", action="store_true")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--no-par", action="store_true")
    args = parser.parse_args()
    if not os.access(GLEWLWYD, os.X_OK):
        print(f"serve.py: no {GLEWLWYD} (apt-get install glewlwyd)", file=sys.stderr)
        return 69
    for tool in ("sqlite3", "openssl"):
        if shutil.which(tool) is None:
            print(f"serve.py: {tool} is needed", file=sys.stderr)
            return 69
    state = Path(args.state_dir).resolve()
    credentials = prepare_state(state)
    child = None
    port = args.port
    for _ in range(5):  # a free port may be taken between the probe and glewlwyd's bind
        port = args.port or free_port()
        child = start_glewlwyd(state, port, args.log_level)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and child.poll() is None and not answers(port):
            time.sleep(0.1)
        if child.poll() is None and answers(port):
            break
        if child.poll() is None:
            child.kill()
        child.wait()
        child = None
        if args.port:
            break
    if child is None:
        print("serve.py: glewlwyd did not start; see glewlwyd.stderr and glewlwyd.log", file=sys.stderr)
        return 1

    def stop(*_):
        child.terminate()
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.kill()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if args.exit_with_parent:
        parent = os.getppid()

        def watch():
            while os.getppid() == parent:
                time.sleep(0.5)
            stop()

        threading.Thread(target=watch, daemon=True).start()
    if not credentials["configured"]:
        try:
            configure(port, state, credentials, par=not args.no_par)
        except Exception as error:  # noqa: BLE001 - reported, then the server is stopped
            print(f"serve.py: configuring glewlwyd failed: {error}", file=sys.stderr)
            child.kill()
            return 1
        credentials["configured"] = True
        credentials["port"] = port
        (state / "credentials.json").write_text(json.dumps(credentials))
    if args.port_file:
        Path(args.port_file + ".tmp").write_text(f"{port}\n")
        os.replace(args.port_file + ".tmp", args.port_file)
    print(f"serve.py: glewlwyd at http://127.0.0.1:{port}/api/{PLUGIN} (pid {child.pid})", file=sys.stderr, flush=True)
    status = child.wait()
    print(f"serve.py: glewlwyd exited with status {status}", file=sys.stderr)
    return 0 if status == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
