#!/usr/bin/env python3
"""A real OAuth 2.0 authorization server for TokenStore's tests and demo.

Built on Flask + Authlib (authlib.integrations.flask_oauth2.AuthorizationServer,
Authlib's RefreshTokenGrant and RevocationEndpoint, plus a custom grant for Auth0's
native Apple token exchange). In-memory stores behind one lock, threaded, bound to
127.0.0.1 only.

Endpoints
  POST /oauth/token   grant_type=refresh_token (rotation + reuse detection) and
                      grant_type=urn:ietf:params:oauth:grant-type:token-exchange with
                      subject_token_type=http://auth0.com/oauth/token-type/apple-authz-code
  POST /oauth/revoke  RFC 7009
Test-only control paths (JSON in, JSON out), under /__test/:
  GET  /__test/health                     {"ok": true, "port": n}
  POST /__test/faults   {path,count,status,headers,body,json,content_type,delay,drop,
                         redirect,slow_body,phase}        queue a fault (several in order)
  GET  /__test/faults                     the queued faults
  DELETE /__test/faults                   clear them
  POST /__test/apple/code {"sub": id}     {"code": "..."} single-use Apple code
  POST /__test/introspect {"token": t}    {"active","kind","family_revoked","reason",...}
  GET  /__test/stats                      counters
  POST /__test/config {"rotate_refresh_tokens": b, "access_token_ttl": s,
                       "refresh_token_ttl": s|null, "declined_scopes": [scope, ...]}
  GET  /__test/config
  POST /__test/reset                      defaults, empty stores, zero stats, no faults
  POST /__test/revoke {"token": t} | {"sub": id}   revoke server-side (no client auth),
                                          like an admin or Apple revoking the grant

Rotation off: the presented refresh token stays valid and the token answer carries NO
refresh_token (what Auth0 does for a non-rotating client).

Reuse detection: presenting a refresh token that was already rotated revokes its whole
family (every refresh token and access token descended from the same sign-in) and
answers 400 invalid_grant. So if N callers present the same refresh token at once,
exactly one wins; each of the others is a reuse and the family ends up revoked.

Token values are never logged: the request log line shows method, path and status.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import secrets
import signal
import socket
import struct
import sys
import threading
import time
import uuid

os.environ.setdefault("AUTHLIB_INSECURE_TRANSPORT", "1")  # plain HTTP on loopback only

from flask import Flask, Response, g, jsonify, request  # noqa: E402
from werkzeug.serving import WSGIRequestHandler, make_server  # noqa: E402

from authlib.integrations.flask_oauth2 import AuthorizationServer  # noqa: E402
from authlib.oauth2.rfc6749 import grants  # noqa: E402
from authlib.oauth2.rfc6749.errors import (  # noqa: E402
    InvalidGrantError,
    InvalidRequestError,
    UnauthorizedClientError,
)
from authlib.oauth2.rfc6749.grants.base import BaseGrant, TokenEndpointMixin  # noqa: E402
from authlib.oauth2.rfc7009 import RevocationEndpoint  # noqa: E402

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
APPLE_CODE_TYPE = "http://auth0.com/oauth/token-type/apple-authz-code"
ALLOWED_SCOPES = ["openid", "profile", "email", "offline_access", "read:items", "write:items"]
DEFAULT_EXCHANGE_SCOPE = "openid"
ID_TOKEN_KEY = b"tokenstore-test-id-token-key"  # HS256; tests need not verify it
# declined_scopes: scopes a refresh answer leaves out although the grant holds them (a policy
# change at the server), to exercise the client's "server declined scopes" path.
DEFAULT_CONFIG = {"rotate_refresh_tokens": True, "access_token_ttl": 3600, "refresh_token_ttl": None,
                  "declined_scopes": []}
STAT_NAMES = [
    "token_requests",  # every request that reached /oauth/token (faulted ones too)
    "revoke_requests",  # every request that reached /oauth/revoke (faulted ones too)
    "refresh_grants",  # successful refresh_token grants
    "exchange_grants",  # successful Apple token exchanges
    "revocations",  # revoke calls the real endpoint answered 200
    "reuse_detections",  # families revoked because a rotated refresh token came back
    "reuse_presentations",  # rotated refresh tokens presented (each one is a reuse)
    "invalid_grants",  # token requests answered 400 invalid_grant
    "fault_hits",  # requests answered (or altered) by an injected fault
]

# ----------------------------------------------------------------------------------------
# Shared state. Every read and write of STATE goes through LOCK.

LOCK = threading.RLock()


def fresh_state():
    return {
        "config": dict(DEFAULT_CONFIG),
        "codes": {},  # apple code -> {"sub": ..., "used": bool}
        "tokens": {},  # token string -> record dict (see Token)
        "families": {},  # family id -> {"revoked": bool, "reason": str|None, "sub": ...}
        "stats": {name: 0 for name in STAT_NAMES},
        "faults": [],
    }


STATE = fresh_state()
STATE_FILE = None  # set from --state-file; written on a graceful stop, read at start


def save_state():
    if not STATE_FILE:
        return
    with LOCK:
        data = json.dumps(STATE)
    tmp = f"{STATE_FILE}.tmp{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, STATE_FILE)


def load_state():
    global STATE
    if STATE_FILE and os.path.exists(STATE_FILE):
        with open(STATE_FILE) as f:
            loaded = json.load(f)
        base = fresh_state()
        base.update(loaded)
        for name in STAT_NAMES:
            base["stats"].setdefault(name, 0)
        STATE = base


def bump(stat, n=1):
    with LOCK:
        STATE["stats"][stat] = STATE["stats"].get(stat, 0) + n


# ----------------------------------------------------------------------------------------
# Models (Authlib mixins' duck-typed methods)


class Client:
    def __init__(self, client_id, secret, auth_method):
        self.client_id = client_id
        self.client_secret = secret
        self.auth_method = auth_method

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        return None

    def get_allowed_scope(self, scope):
        return " ".join(s for s in (scope or "").split() if s in ALLOWED_SCOPES)

    def check_redirect_uri(self, redirect_uri):
        return False

    def check_client_secret(self, client_secret):
        if self.client_secret is None:
            return False
        return hmac.compare_digest(self.client_secret, client_secret or "")

    def check_endpoint_auth_method(self, method, endpoint):
        if self.auth_method == "none":
            return method == "none"
        return method in ("client_secret_post", "client_secret_basic")

    def check_response_type(self, response_type):
        return False

    def check_grant_type(self, grant_type):
        return grant_type in ("refresh_token", TOKEN_EXCHANGE)


CLIENTS = {
    "tokenstore-test": Client("tokenstore-test", None, "none"),
    "tokenstore-confidential": Client("tokenstore-confidential", "s3cret", "client_secret_post"),
}


class Token:
    """A view over a record in STATE["tokens"]; the record is a plain dict so the state
    can be saved as JSON. Record keys: kind ("refresh"|"access"), client_id, sub, scope,
    family, issued_at, expires_at (None = never), state ("active"|"rotated"|"revoked")."""

    def __init__(self, value, rec):
        self.value = value
        self.rec = rec

    @property
    def kind(self):
        return self.rec["kind"]

    def check_client(self, client):
        return self.rec["client_id"] == client.get_client_id()

    def get_scope(self):
        return self.rec["scope"]

    def get_expires_in(self):
        exp = self.rec.get("expires_at")
        return 0 if exp is None else max(0, int(exp - time.time()))

    def is_expired(self):
        exp = self.rec.get("expires_at")
        return exp is not None and time.time() >= exp

    def family_revoked(self):
        fam = STATE["families"].get(self.rec["family"])
        return bool(fam and fam["revoked"])

    def is_revoked(self):
        return self.rec["state"] != "active" or self.family_revoked()

    def get_user(self):
        return self.rec["sub"]

    def get_client(self):
        return CLIENTS.get(self.rec["client_id"])


def find_token(value):
    rec = STATE["tokens"].get(value or "")
    return Token(value, rec) if rec else None


def revoke_family(family_id, reason):
    """Revoke every token of a family. Returns True if the family was active before."""
    fam = STATE["families"].setdefault(family_id, {"revoked": False, "reason": None})
    was_active = not fam["revoked"]
    if was_active:
        fam["revoked"] = True
        fam["reason"] = reason
    for rec in STATE["tokens"].values():
        if rec["family"] == family_id and rec["state"] == "active":
            rec["state"] = "revoked"
    return was_active


# ----------------------------------------------------------------------------------------
# Token generation


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_id_token(sub, client_id, ttl):
    now = int(time.time())
    header = {"alg": "HS256", "typ": "JWT"}
    payload = {
        "iss": request.host_url,
        "sub": sub,
        "aud": client_id,
        "iat": now,
        "exp": now + int(ttl),
    }
    signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(payload).encode())
    sig = hmac.new(ID_TOKEN_KEY, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + b64url(sig)


def generate_bearer_token(grant_type, client, user=None, scope=None, expires_in=None,
                          include_refresh_token=True):
    ttl = STATE["config"]["access_token_ttl"]
    token = {
        "access_token": secrets.token_urlsafe(32),
        "token_type": "Bearer",
        "expires_in": int(ttl) if float(ttl).is_integer() else ttl,
        "scope": scope or "",
    }
    if include_refresh_token:
        token["refresh_token"] = secrets.token_urlsafe(36)
    if user and "openid" in (scope or "").split():
        token["id_token"] = make_id_token(user, client.get_client_id(), ttl)
    return token


def store_token_answer(token, client, sub, family, family_scope):
    now = time.time()
    cfg = STATE["config"]
    STATE["tokens"][token["access_token"]] = {
        "kind": "access", "client_id": client.get_client_id(), "sub": sub,
        "scope": token["scope"], "family": family, "issued_at": now,
        "expires_at": now + float(cfg["access_token_ttl"]), "state": "active",
    }
    if "refresh_token" in token:
        rt_ttl = cfg.get("refresh_token_ttl")
        STATE["tokens"][token["refresh_token"]] = {
            "kind": "refresh", "client_id": client.get_client_id(), "sub": sub,
            "scope": family_scope, "family": family, "issued_at": now,
            "expires_at": None if rt_ttl is None else now + float(rt_ttl), "state": "active",
        }


# ----------------------------------------------------------------------------------------
# Grants

TOKEN_AUTH_METHODS = ["none", "client_secret_post", "client_secret_basic"]


class RefreshTokenGrant(grants.RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = TOKEN_AUTH_METHODS

    def authenticate_refresh_token(self, refresh_token):
        tok = find_token(refresh_token)
        if tok is None or tok.kind != "refresh":
            return None
        if tok.rec["state"] == "rotated":
            # Reuse of a rotated refresh token: revoke the whole family.
            bump("reuse_presentations")
            if revoke_family(tok.rec["family"], "reuse"):
                bump("reuse_detections")
            return None
        if tok.is_revoked() or tok.is_expired():
            return None
        return tok

    def authenticate_user(self, refresh_token):
        return refresh_token.get_user()

    def issue_token(self, user, refresh_token):
        scope = self.request.payload.scope or refresh_token.get_scope()
        declined = set(STATE["config"].get("declined_scopes") or [])
        scope = " ".join(s for s in scope.split() if s not in declined)
        return self.generate_token(
            user=user, scope=scope,
            include_refresh_token=bool(STATE["config"]["rotate_refresh_tokens"]),
        )

    def save_token(self, token):
        rt = self.request.refresh_token
        store_token_answer(token, self.request.client, rt.get_user(), rt.rec["family"],
                           rt.get_scope())
        bump("refresh_grants")

    def revoke_old_credential(self, refresh_token):
        if STATE["config"]["rotate_refresh_tokens"]:
            refresh_token.rec["state"] = "rotated"


class AppleTokenExchangeGrant(BaseGrant, TokenEndpointMixin):
    """Auth0's native Apple sign-in: exchange an Apple authorization code."""

    GRANT_TYPE = TOKEN_EXCHANGE
    TOKEN_ENDPOINT_AUTH_METHODS = TOKEN_AUTH_METHODS

    def validate_token_request(self):
        client = self.authenticate_token_endpoint_client()
        if not client.check_grant_type(self.GRANT_TYPE):
            raise UnauthorizedClientError()
        self.request.client = client
        form = self.request.form
        if form.get("subject_token_type") != APPLE_CODE_TYPE:
            raise InvalidRequestError("Unsupported or missing 'subject_token_type'.")
        code = form.get("subject_token")
        if not code:
            raise InvalidRequestError("Missing 'subject_token'.")
        entry = STATE["codes"].get(code)
        if entry is None or entry["used"]:
            raise InvalidGrantError("Invalid or already used authorization code.")
        entry["used"] = True  # single use, even if the rest of the request fails
        self.request.user = entry["sub"]

    def create_token_response(self):
        requested = (self.request.payload.scope or DEFAULT_EXCHANGE_SCOPE).split()
        granted = [s for s in dict.fromkeys(requested) if s in ALLOWED_SCOPES]
        scope = " ".join(granted)
        client = self.request.client
        token = self.generate_token(user=self.request.user, scope=scope,
                                    include_refresh_token="offline_access" in granted)
        family = uuid.uuid4().hex
        STATE["families"][family] = {"revoked": False, "reason": None, "sub": self.request.user}
        store_token_answer(token, client, self.request.user, family, scope)
        bump("exchange_grants")
        return 200, token, self.TOKEN_RESPONSE_HEADER


class Revocation(RevocationEndpoint):
    CLIENT_AUTH_METHODS = TOKEN_AUTH_METHODS

    def query_token(self, token_string, token_type_hint):
        return find_token(token_string)  # the hint only orders the search (RFC 7009 2.1)

    def revoke_token(self, token, request):
        if token.kind == "refresh":
            # Revoking a refresh token ends the grant: the whole family goes.
            revoke_family(token.rec["family"], "revoked")
        else:
            token.rec["state"] = "revoked"


class Server(AuthorizationServer):
    def handle_error_response(self, request, error):
        if error.error == "invalid_client":
            error.status_code = 401
        if error.error == "unsupported_token_type":
            error.status_code = 400  # RFC 7009 2.2.1
        return super().handle_error_response(request, error)


# ----------------------------------------------------------------------------------------
# Flask app

app = Flask(__name__)
app.config["OAUTH2_SCOPES_SUPPORTED"] = ALLOWED_SCOPES
authorization = Server(app, query_client=lambda cid: CLIENTS.get(cid), save_token=lambda t, r: None)
authorization.register_token_generator("default", generate_bearer_token)
authorization.register_grant(RefreshTokenGrant)
authorization.register_grant(AppleTokenExchangeGrant)
authorization.register_endpoint(Revocation)


@app.post("/oauth/token")
def token_endpoint():
    with LOCK:
        resp = authorization.create_token_response()
        if resp.status_code == 400 and b'"invalid_grant"' in resp.get_data():
            bump("invalid_grants")
        return resp


@app.post("/oauth/revoke")
def revoke_endpoint():
    with LOCK:
        resp = authorization.create_endpoint_response(Revocation.ENDPOINT_NAME)
        if resp.status_code == 200:
            bump("revocations")
        return resp


# ---- faults ------------------------------------------------------------------------------

RESET_SOCKETS = set()  # connections to close with an RST (SO_LINGER 0) instead of a FIN


class DropConnection(ConnectionResetError):
    pass


def drop_response(mode):
    """A response whose body, when werkzeug starts sending it (before any header is
    written), cuts the connection and raises a ConnectionError, which werkzeug treats as
    a dropped connection: the client gets no HTTP answer at all."""
    sock = request.environ.get("werkzeug.socket")
    handler = request.environ.get("tokenstore.handler")

    def body():
        if handler is not None:
            handler.close_connection = True
        if sock is not None:
            try:
                if mode == "reset":
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    with LOCK:
                        RESET_SOCKETS.add(sock)
                    # Reads see EOF now (so werkzeug's drain of the request body cannot
                    # block); on Linux SHUT_RD sends nothing, the close then sends an RST.
                    sock.shutdown(socket.SHUT_RD)
                else:
                    sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        raise DropConnection("fault: connection dropped")
        yield b""  # pragma: no cover  (makes this a generator)

    return Response(body(), status=200)


def fault_response(fault):
    if fault.get("drop"):
        return drop_response("reset" if fault["drop"] == "reset" else "eof")
    headers = dict(fault.get("headers") or {})
    if fault.get("redirect"):
        headers["Location"] = fault["redirect"]
        return Response(fault.get("body", ""), status=int(fault.get("status", 307)), headers=headers)
    if "json" in fault:
        body = json.dumps(fault["json"])
        ctype = fault.get("content_type", "application/json")
    else:
        body = fault.get("body", "")
        default_ctype = "text/plain; charset=utf-8"
        try:
            json.loads(body)
            default_ctype = "application/json"
        except ValueError:
            pass
        ctype = fault.get("content_type", default_ctype)
    return Response(body, status=int(fault.get("status", 200)), headers=headers, content_type=ctype)


def slow(resp, seconds):
    data = resp.get_data()
    steps = max(1, min(len(data), 20))
    size = -(-len(data) // steps) if data else 0

    def gen():
        yield b""  # headers go out now
        if not data:
            time.sleep(seconds)
        for i in range(steps):
            time.sleep(seconds / steps)
            chunk = data[i * size:(i + 1) * size]
            if chunk:
                yield chunk

    out = Response(gen(), status=resp.status_code, headers=list(resp.headers.items()))
    out.headers["Content-Length"] = str(len(data))
    return out


def take_fault(path):
    with LOCK:
        for i, fault in enumerate(STATE["faults"]):
            if fault.get("path", "*") in ("*", path):
                fault["count"] = int(fault.get("count", 1)) - 1
                if fault["count"] <= 0:
                    del STATE["faults"][i]
                STATE["stats"]["fault_hits"] += 1
                return dict(fault)
    return None


def has_action(fault):
    return any(k in fault for k in ("status", "drop", "redirect", "body", "json"))


@app.before_request
def before():
    path = request.path
    if path.startswith("/__test/"):
        return None
    if path == "/oauth/token":
        bump("token_requests")
    elif path == "/oauth/revoke":
        bump("revoke_requests")
    request.get_data()  # read the whole body now, whatever answer follows
    fault = take_fault(path)
    g.fault = fault
    if not fault:
        return None
    if fault.get("delay"):
        time.sleep(float(fault["delay"]))
    if fault.get("phase", "before") == "before" and has_action(fault):
        g.fault_done = True
        return fault_response(fault)
    return None


@app.after_request
def after(resp):
    fault = g.get("fault")
    if not fault:
        return resp
    if fault.get("phase", "before") == "after" and has_action(fault) and not g.get("fault_done"):
        resp = fault_response(fault)  # the real request WAS processed; its answer is lost
    if fault.get("slow_body") and not fault.get("drop"):
        resp = slow(resp, float(fault["slow_body"]))
    return resp


# ---- control paths ------------------------------------------------------------------------

FAULT_KEYS = {"path", "count", "status", "headers", "body", "json", "content_type", "delay",
              "drop", "redirect", "slow_body", "phase"}


def bad(message):
    return jsonify({"error": "invalid_request", "error_description": message}), 400


@app.get("/__test/health")
def health():
    return jsonify({"ok": True, "port": request.environ.get("SERVER_PORT")})


@app.route("/__test/faults", methods=["GET", "POST", "DELETE"])
def faults():
    if request.method == "DELETE":
        with LOCK:
            STATE["faults"].clear()
        return jsonify({"faults": []})
    if request.method == "GET":
        with LOCK:
            return jsonify({"faults": list(STATE["faults"])})
    body = request.get_json(force=True, silent=True)
    items = body if isinstance(body, list) else [body]
    for item in items:
        if not isinstance(item, dict):
            return bad("fault must be a JSON object")
        unknown = set(item) - FAULT_KEYS
        if unknown:
            return bad(f"unknown fault keys: {sorted(unknown)}")
        if item.get("phase", "before") not in ("before", "after"):
            return bad("phase must be 'before' or 'after'")
        if item.get("drop") not in (None, False, True, "eof", "reset"):
            return bad("drop must be true, 'eof' or 'reset'")
        if int(item.get("count", 1)) < 1:
            return bad("count must be >= 1")
    with LOCK:
        for item in items:
            entry = dict(item)
            entry.setdefault("path", "*")
            entry["count"] = int(entry.get("count", 1))
            STATE["faults"].append(entry)
        return jsonify({"faults": list(STATE["faults"])})


@app.post("/__test/apple/code")
def apple_code():
    body = request.get_json(force=True, silent=True) or {}
    sub = body.get("sub")
    if not isinstance(sub, str) or not sub:
        return bad("'sub' (the Apple user id) is required")
    code = "c" + secrets.token_hex(16) + ".0." + secrets.token_hex(4)
    with LOCK:
        STATE["codes"][code] = {"sub": sub, "used": False}
    return jsonify({"code": code})


@app.post("/__test/introspect")
def introspect():
    body = request.get_json(force=True, silent=True) or {}
    with LOCK:
        tok = find_token(body.get("token"))
        if tok is None:
            return jsonify({"active": False, "kind": None, "family_revoked": False,
                            "reason": None, "sub": None, "scope": None, "client_id": None})
        fam = STATE["families"].get(tok.rec["family"], {})
        if tok.family_revoked():
            reason = fam.get("reason") or "revoked"
        elif tok.rec["state"] != "active":
            reason = tok.rec["state"]  # "rotated" or "revoked"
        elif tok.is_expired():
            reason = "expired"
        else:
            reason = None
        return jsonify({
            "active": reason is None,
            "kind": tok.kind,
            "family_revoked": tok.family_revoked(),
            "reason": reason,
            "sub": tok.rec["sub"],
            "scope": tok.rec["scope"],
            "client_id": tok.rec["client_id"],
            "expires_in": None if tok.rec.get("expires_at") is None else tok.get_expires_in(),
        })


@app.get("/__test/stats")
def stats():
    with LOCK:
        out = dict(STATE["stats"])
        out["active_refresh_tokens"] = sum(
            1 for v, r in STATE["tokens"].items()
            if r["kind"] == "refresh" and not Token(v, r).is_revoked() and not Token(v, r).is_expired())
        out["families"] = len(STATE["families"])
        out["revoked_families"] = sum(1 for f in STATE["families"].values() if f["revoked"])
        out["pending_faults"] = sum(int(f.get("count", 1)) for f in STATE["faults"])
        return jsonify(out)


@app.route("/__test/config", methods=["GET", "POST"])
def config():
    if request.method == "POST":
        body = request.get_json(force=True, silent=True) or {}
        unknown = set(body) - set(DEFAULT_CONFIG)
        if unknown:
            return bad(f"unknown config keys: {sorted(unknown)}")
        if "access_token_ttl" in body and not (isinstance(body["access_token_ttl"], (int, float))
                                               and body["access_token_ttl"] > 0):
            return bad("access_token_ttl must be a positive number")
        with LOCK:
            STATE["config"].update(body)
    with LOCK:
        return jsonify(dict(STATE["config"]))


@app.post("/__test/reset")
def reset():
    global STATE
    with LOCK:
        STATE.clear()
        STATE.update(fresh_state())
    return jsonify({"ok": True})


@app.post("/__test/revoke")
def admin_revoke():
    body = request.get_json(force=True, silent=True) or {}
    with LOCK:
        families = set()
        if "token" in body:
            tok = find_token(body["token"])
            if tok:
                families.add(tok.rec["family"])
        elif "sub" in body:
            families = {r["family"] for r in STATE["tokens"].values() if r["sub"] == body["sub"]}
        else:
            return bad("give 'token' or 'sub'")
        count = sum(1 for f in families if revoke_family(f, "revoked"))
        return jsonify({"revoked_families": count})


# ----------------------------------------------------------------------------------------
# Serving


class Handler(WSGIRequestHandler):
    def make_environ(self):
        environ = super().make_environ()
        environ["tokenstore.handler"] = self
        return environ

    def log_request(self, code="-", size="-"):
        if not LOG_REQUESTS:
            return
        path = (self.path or "").split("?", 1)[0]
        sys.stderr.write(f"{self.command} {path} {getattr(code, 'value', code)}\n")
        sys.stderr.flush()

    def log_error(self, *args):
        pass  # e.g. "Request timed out"; nothing useful and never a token


LOG_REQUESTS = True


def main(argv=None):
    global STATE_FILE, LOG_REQUESTS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 = any free port")
    ap.add_argument("--port-file", help="write the bound port here (atomically)")
    ap.add_argument("--state-file", help="load state from here at start, save it on SIGTERM/SIGINT")
    ap.add_argument("--exit-with-parent", action="store_true",
                    help="exit when the parent process goes away")
    ap.add_argument("--quiet", action="store_true", help="no request log lines")
    args = ap.parse_args(argv)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        ap.error("this test server binds to loopback only")
    STATE_FILE = args.state_file
    LOG_REQUESTS = not args.quiet
    load_state()

    import logging
    logging.getLogger("werkzeug").setLevel(logging.ERROR)

    srv = make_server(args.host, args.port, app, threaded=True, request_handler=Handler)
    # Request threads must not hold up shutdown (a client's idle keep-alive connection
    # would otherwise keep server_close() waiting).
    srv.daemon_threads = True
    srv.block_on_close = False
    original_shutdown_request = srv.shutdown_request

    def shutdown_request(req):
        with LOCK:
            reset = req in RESET_SOCKETS
            RESET_SOCKETS.discard(req)
        if reset:
            srv.close_request(req)  # SO_LINGER 0: close sends an RST, no FIN first
        else:
            original_shutdown_request(req)

    srv.shutdown_request = shutdown_request
    port = srv.socket.getsockname()[1]

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # A parent may spawn us with these blocked (the mask is inherited): unblock them, or
    # SIGTERM would never arrive and the state would not be saved.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})

    if args.exit_with_parent:
        parent = os.getppid()

        def watch():
            while True:
                time.sleep(0.5)
                if os.getppid() != parent:
                    os.kill(os.getpid(), signal.SIGTERM)
                    return

        threading.Thread(target=watch, daemon=True).start()

    print(f"PORT {port}", flush=True)
    if args.port_file:
        tmp = f"{args.port_file}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.replace(tmp, args.port_file)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
        save_state()
    return 0


if __name__ == "__main__":
    sys.exit(main())
