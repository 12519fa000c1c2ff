#!/usr/bin/env python3
"""Serves the DOT test project on 127.0.0.1 with the stdlib's wsgiref (threaded).

    serve.py --state-dir DIR [--port N] [--port-file FILE] [--exit-with-parent]

Binds 127.0.0.1:N (0, the default: a free port), then sets up DIR once (a Django secret, an
RSA key for RS256 ID tokens, the SQLite database migrated) and on every start makes sure the
test user (a new random password each start) and the public client exist, then writes the
port to FILE and serves. Restarted with the same DIR and --port it is the same server: the
same issuer, key, client and tokens.
"""
import argparse
import os
import secrets
import socketserver
import sys
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

HERE = Path(__file__).resolve().parent
CLIENT_ID = "tokenstore-dot-public"
REDIRECT_URIS = " ".join(f"http://127.0.0.1:{p}/callback" for p in (53180, 53181, 53182, 53183))
USERNAME = "dot-test-user"


class ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):  # the middleware logs method, path and status; no query strings
        pass


def prepare_state(state: Path) -> None:
    state.mkdir(parents=True, exist_ok=True)
    secret = state / "django-secret"
    if not secret.exists():
        secret.write_text(secrets.token_urlsafe(48))
    key = state / "oidc-rsa.pem"
    if not key.exists():
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        key.write_bytes(pem)
    os.chmod(secret, 0o600)
    os.chmod(key, 0o600)


def setup_django() -> None:
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    from django.contrib.auth import get_user_model
    from oauth2_provider.models import get_application_model

    import testhooks

    password = secrets.token_urlsafe(24)
    user, _ = get_user_model().objects.get_or_create(username=USERNAME)
    user.set_password(password)
    user.save()
    testhooks.CREDENTIALS.update(username=USERNAME, password=password)
    Application = get_application_model()
    Application.objects.update_or_create(
        client_id=CLIENT_ID,
        defaults=dict(
            name="TokenStore tests", user=user, client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE, redirect_uris=REDIRECT_URIS,
            algorithm=Application.RS256_ALGORITHM, skip_authorization=True, client_secret="",
            hash_client_secret=False))


def watch_parent() -> None:
    """Exits when the process that started this one is gone (a test that crashed)."""
    import threading
    import time

    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file")
    parser.add_argument("--exit-with-parent", action="store_true", help="exit when the parent process is gone")
    args = parser.parse_args()
    if args.exit_with_parent:
        watch_parent()
    state = Path(args.state_dir).resolve()
    prepare_state(state)
    # Bind first: the issuer names the port, and settings.py reads it.
    server = make_server("127.0.0.1", args.port, lambda e, s: [], server_class=ThreadingServer, handler_class=QuietHandler)
    port = server.server_address[1]
    os.environ.update(DOT_STATE_DIR=str(state), DOT_PORT=str(port), DJANGO_SETTINGS_MODULE="settings")
    sys.path.insert(0, str(HERE))
    setup_django()
    from django.core.wsgi import get_wsgi_application

    server.set_app(get_wsgi_application())
    if args.port_file:
        Path(args.port_file).write_text(f"{port}\n")
    print(f"dotserver: http://127.0.0.1:{port}/o", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
