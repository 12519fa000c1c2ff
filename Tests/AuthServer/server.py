#!/usr/bin/env python3
"""A real OAuth 2.0 authorization server for TokenStore's tests and demo.

Built on Flask + Authlib (authlib.integrations.flask_oauth2.AuthorizationServer,
Authlib's AuthorizationCodeGrant with a PKCE extension, RefreshTokenGrant and
RevocationEndpoint, plus a custom grant for Auth0's native Apple token exchange).
In-memory stores behind one lock, threaded, bound to 127.0.0.1 only.

It behaves like an Auth0 tenant whose only connection is Sign in with Apple
(`connection=apple`), for the browser sign-in of RFC 8252 (loopback redirect + PKCE):

  GET  /authorize            response_type=code, client_id, redirect_uri (exact match
                             against the client's registered list, port included; a
                             mismatch is an error PAGE, never a redirect), scope, state,
                             nonce, code_challenge + code_challenge_method=S256 (required
                             for the public client), optional audience, connection, max_age,
                             prompt, login_hint, acr_values. login_hint is pre-filled at the
                             emulated Apple page: the hinted identity (an Apple user id, an
                             "apple|" prefix dropped) is the one who signs in there.
                             connection=apple: 302 to the emulated Apple page below. No
                             connection: a login page whose one form goes on with
                             connection=apple (it does not submit itself).
                             Browser session: a sign-in at the Apple page sets the cookie
                             tsauth_session (the user, auth_time, acr). A later /authorize
                             that brings it is answered at once with a code (no page, the
                             session's auth_time and acr) unless prompt is login,
                             select_account or consent (the login pages), max_age is older
                             than the session, login_hint names another user, or acr_values
                             does not hold the session's acr. prompt=none without such a
                             session: error=login_required. The ID token's acr: the first
                             acr_values entry the server supports (all, or /__test/oidc/acr's
                             "supported"), else "urn:tokenstore:test:password"; no acr when
                             none was asked for.
  GET  /appleid/auth/authorize  the emulated Apple: an auto-submitting form_post page that
                             POSTs code, state and (first sign-in only) the `user` JSON to
  POST /login/callback       which 302s to the app's redirect_uri with code and state.
  GET  /.well-known/jwks.json, /.well-known/openid-configuration
  POST /oauth/token   grant_type=authorization_code (+ code_verifier; the code is single
                      use and bound to client_id and redirect_uri), grant_type=refresh_token
                      (rotation + reuse detection) and
                      grant_type=urn:ietf:params:oauth:grant-type:token-exchange with
                      subject_token_type=http://auth0.com/oauth/token-type/apple-authz-code
  POST /oauth/revoke  RFC 7009
  POST /oauth/device/code   RFC 8628 device authorization (Auth0's path; also in the
                      discovery document): client_id, scope, audience, dpop_jkt; a user
                      code XXXX-XXXX, verification_uri {issuer}activate, interval 1 s
                      (/__test/device sets it). grant_type=urn:ietf:params:oauth:grant-type:
                      device_code at /oauth/token: authorization_pending until the test
                      approves or denies the user code (/__test/device), slow_down for a poll
                      sooner than the interval (which then grows by 5 s, RFC 8628 3.5) or
                      when armed, access_denied, expired_token, invalid_grant once used.
  POST /oauth/par     RFC 9126 pushed authorization request (advertised as
                      pushed_authorization_request_endpoint only while /__test/config
                      "par" is true; "require_par" refuses /authorize without request_uri):
                      the /authorize parameters as a form (+ a DPoP proof binding the code
                      like dpop_jkt), 201 {request_uri, expires_in 60}; /authorize then takes
                      client_id + request_uri (one use) instead of the parameters.

ID tokens: RS256 with the server's RSA key (kept in the state file), `kid` in the header;
iss "http://127.0.0.1:PORT/", sub "apple|<Apple id>", aud client_id (or [client_id,
audience] with azp), iat, exp (+36000 s, Auth0's default), auth_time, sid, nonce when one
was sent; name, given_name, family_name (scope profile) and email, email_verified (scope
email) only on the user's first sign-in, as Apple sends them only once.
Test-only control paths (JSON in, JSON out), under /__test/:
  GET  /__test/health                     {"ok": true, "port": n}
  POST /__test/faults   {path,count,status,headers,body,json,content_type,delay,drop,
                         redirect,slow_body,phase}        queue a fault (several in order)
  GET  /__test/faults                     the queued faults
  DELETE /__test/faults                   clear them
  POST /__test/apple/code {"sub": id, "name"?, "email"?, "first_sign_in"?}
                                          {"code": "..."} single-use Apple code
  POST /__test/introspect {"token": t}    {"active","kind","family_revoked","reason",...}
  GET  /__test/stats                      counters
  POST /__test/config {"rotate_refresh_tokens": b, "access_token_ttl": s,
                       "refresh_token_ttl": s|null, "declined_scopes": [scope, ...],
                       "reuse_interval": s}   (Auth0's reuse interval: a rotated-out
                                          refresh token still works for s seconds)
  GET  /__test/config
  POST /__test/reset                      defaults, empty stores, zero stats, no faults
  GET|POST /__test/dpop {"rotate_nonce"?: b, "reject_next"?: n, "nonce_required"?: b,
                         "required"?: b, "iat_window"?: s, "forget_jtis"?: b}   DPoP
                                          switches (see dpop_control); GET: the nonce
  POST /__test/dpop/check {"proof", "method", "url", "access_token"?}   verify one proof:
                                          {"jkt", "header", "claims"} or 400 {"error"}
  GET|POST /__test/device {"interval"?: s, "expires_in"?: s, "slow_down"?: n,
                      "approve"?: user_code, "deny"?: user_code, "expire"?: user_code,
                      "apple_id"?: id}   the device grant: settings, the test approving or
                      denying a user code as the user would; GET lists the codes (user code,
                      status, poll times, interval; never the device code) and
                      authorize_log: the parameter NAMES of the last 20 GET /authorize
  POST /__test/revoke {"token": t} | {"sub": id}   revoke server-side (no client auth),
                                          like an admin or Apple revoking the grant
  GET|POST /__test/resource {...}         the protected API /api/notes and its RFC 9728
                                          metadata: challenges on demand (protected_api.py)
Browser sign-in (OIDC) control, under /__test/oidc (each "next" switch is used once):
  GET  /__test/oidc                       clients' redirect URIs, armed switches, Apple
                                          users, issuer, kid, the switch names
  POST /__test/oidc/redirect_uris {"client_id"?, "redirect_uris": [...],
                                   "any_loopback_port"?: b}   replace a client's list
  POST /__test/oidc/next_user {"apple_id", "name"?, "email"?, "first_sign_in"?: b}
                                          who signs in at the next Apple page
  POST /__test/oidc/next_id_token {"fault": NAME, "value"?: s}   the next sign-in's ID
                                          token is bad in this way (ID_TOKEN_FAULTS)
  POST /__test/oidc/next_redirect {"fault": NAME, "error_description"?: s}   the next
                                          sign-in's redirect is bad (REDIRECT_FAULTS)
  DELETE /__test/oidc/next                disarm next_user, next_id_token, next_redirect
  POST /__test/oidc/rotate_key {"keep_old"?: b}   a new signing key (the old one stays
                                          in the JWKS unless keep_old is false)
  POST /__test/oidc/sessions {"age": s}   age every browser session by s seconds
  DELETE /__test/oidc/sessions            end every browser session
  GET /oidc/logout (end_session_endpoint: OIDC RP-initiated logout: id_token_hint,
      client_id, post_logout_redirect_uri registered for the client, state echoed) and
      GET /v2/logout (Auth0: client_id, returnTo registered, its query aside) end the
      cookie's browser session, clear the cookie and 302 back; /__test/oidc lists the last
      20 in "end_sessions" (kind, id_token_hint_sub, state, ended)
  POST /__test/oidc/acr {"supported": [..] | null}   the acr values a login can meet
  GET /__test/oidc also lists "sessions" (user, auth_time, acr, age) and "authorizations":
  the last 20 /authorize requests' prompt, login_hint, max_age, acr_values and whether a
  login page was shown (login_form), newest last
The Apple user of a browser sign-in: /authorize's login_hint if given, else next_user
(then cleared), else DEFAULT_APPLE_USER. A user's first sign-in is the first one since the
server met them (or since first_sign_in=true); the native exchange shares that record.
next_id_token is taken by the next sign-in of either kind: a browser one when
/login/callback issues its code, a native Apple exchange at /oauth/token. next_redirect
is taken by the next emulated Apple page. /__test/reset clears all of it (back to the
default redirect URIs) but keeps the signing key.

Rotation off: the presented refresh token stays valid and the token answer carries NO
refresh_token (what Auth0 does for a non-rotating client).

Reuse detection: presenting a refresh token that was already rotated revokes its whole
family (every refresh token and access token descended from the same sign-in) and
answers 400 invalid_grant. So if N callers present the same refresh token at once,
exactly one wins; each of the others is a reuse and the family ends up revoked.

A used authorization code presented again is refused (invalid_grant) and the tokens
issued from it are revoked (RFC 6749 4.1.2), family reason "code_reuse".

DPoP (RFC 9449, dpop.py), as Auth0 does it for public clients: a token request with a
`DPoP` proof (ES256, typ dpop+jwt, jwk, htm, htu, iat within 60 s, a jti never seen, the
server's current nonce: else 400 use_dpop_nonce with a DPoP-Nonce header) gets token_type
DPoP, its access token bound to the key's RFC 7638 thumbprint (cnf.jkt, shown by
/__test/introspect) and, for a sign-in, its refresh-token family bound too: a refresh of
a bound family without a proof or with another key is invalid_grant, the family untouched.
/authorize's dpop_jkt binds the code to that key. /userinfo takes `Authorization: DPoP`
with a proof carrying ath (no nonce asked there). Every token answer to a request with a
proof carries the nonce to use next (DPoP-Nonce). Requests without a proof stay Bearer.

Token values are never logged: the request log line shows method, path and status.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import html
import json
import os
import secrets
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse
import uuid

os.environ.setdefault("AUTHLIB_INSECURE_TRANSPORT", "1")  # plain HTTP on loopback only

from flask import Flask, Response, g, jsonify, request  # noqa: E402
import profiles  # noqa: E402  (provider profiles, issue 26; beside this file)
import dpop  # noqa: E402  (DPoP proof checks, issue 27; beside this file)
import protected_api  # noqa: E402  (a protected API answering challenges; beside this file)
from werkzeug.serving import WSGIRequestHandler, make_server  # noqa: E402

from authlib.integrations.flask_oauth2 import AuthorizationServer  # noqa: E402
from authlib.common.urls import add_params_to_uri  # noqa: E402
from authlib.oauth2.base import OAuth2Error, invalid_error_characters  # noqa: E402
from authlib.oauth2.rfc6749 import grants  # noqa: E402
from authlib.oauth2.rfc6749.errors import (  # noqa: E402
    InvalidGrantError,
    InvalidRequestError,
    UnauthorizedClientError,
)
from authlib.oauth2.rfc6749.grants.base import BaseGrant, TokenEndpointMixin  # noqa: E402
from authlib.oauth2.rfc7009 import RevocationEndpoint  # noqa: E402
from authlib.oauth2.rfc7636 import CodeChallenge  # noqa: E402
from authlib.oidc.core.errors import LoginRequiredError  # noqa: E402
from joserfc import jwt as jose_jwt  # noqa: E402
from joserfc.jwk import RSAKey  # noqa: E402

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
APPLE_CODE_TYPE = "http://auth0.com/oauth/token-type/apple-authz-code"
ALLOWED_SCOPES = ["openid", "profile", "email", "offline_access", "read:items", "write:items"]
DEFAULT_EXCHANGE_SCOPE = "openid"
AUTHORIZATION_CODE = "authorization_code"
DEVICE_CODE = "urn:ietf:params:oauth:grant-type:device_code"
PAR_URI_PREFIX = "urn:ietf:params:oauth:request_uri:"
PAR_TTL = 60
# Loopback callbacks registered for every client by default (Auth0 matches exactly, port
# included, so an app must register each port it may listen on).
DEFAULT_CALLBACK_PORTS = [53180, 53181, 53182, 53183]
DEFAULT_REDIRECT_URIS = [f"http://127.0.0.1:{p}/callback" for p in DEFAULT_CALLBACK_PORTS]
# Who signs in at the emulated Apple page when the test chose nobody.
DEFAULT_APPLE_USER = {"apple_id": "000792.d71059495fa24644b94e4a644e2e3b4a.0638",
                      "name": "Jane Appleseed", "email": "jane.appleseed@privaterelay.appleid.com"}
APPLE_SERVICES_ID = "com.example.tokenstore.signin"  # the emulated Apple "client_id"
ID_TOKEN_TTL = 36000  # Auth0's default ID token lifetime
AUTHORIZATION_CODE_TTL = 600
TRANSACTION_TTL = 600  # from /authorize to /login/callback
DEFAULT_DENIED_DESCRIPTION = "The user cancelled the sign-in at Apple (user_cancelled_authorize)."
# The bad ID tokens a test can ask for (POST /__test/oidc/next_id_token {"fault": name}).
ID_TOKEN_FAULTS = {
    "wrong_aud": "aud is another client (value, default 'another-client')",
    "wrong_iss": "iss is value, default the issuer WITHOUT its trailing slash",
    "expired": "exp one hour ago (iat two hours ago)",
    "bad_signature": "RS256 with the right kid, one signature bit flipped",
    "unknown_kid": "signed with the real key, kid not in the JWKS (value, default random)",
    "missing_kid": "signed with the real key, no kid in the header",
    "alg_none": "alg none, empty signature",
    "alg_hs256": "HS256 keyed with the public key's PEM (the key-confusion attack)",
    "wrong_nonce": "nonce is value (default random), even when none was sent",
    "missing_nonce": "no nonce claim although one was sent",
    "missing_sub": "no sub claim",
    "missing_azp": "aud [client_id, audience] (audience default https://api.example.com/) without azp",
    "old_auth_time": "auth_time one day ago (fails a max_age check)",
    "missing_auth_time": "no auth_time claim (fails a max_age check)",
    "wrong_acr": "acr is value, default 'urn:tokenstore:test:weak' (fails an acr_values check)",
}
SESSION_COOKIE = "tsauth_session"
FALLBACK_ACR = "urn:tokenstore:test:password"  # what a login gives when no asked acr is supported
# The bad redirects a test can ask for (POST /__test/oidc/next_redirect {"fault": name}).
REDIRECT_FAULTS = {
    "wrong_state": "the redirect carries a state the app never sent (and a valid code)",
    "access_denied": "the user cancels at Apple: error=access_denied&error_description=...&state=...",
    "no_redirect": "/login/callback answers a page and never redirects: the app's callback is never called",
    "wrong_iss_param": "the redirect carries iss=https://attacker.example/ (RFC 9207 mix-up), with a valid code",
    "oauth_error": "the redirect carries error=<error, default invalid_scope>&error_description=...&state=...",
}
# declined_scopes: scopes a refresh answer leaves out although the grant holds them (a policy
# change at the server), to exercise the client's "server declined scopes" path.
# profile: the provider shape (profiles.py: auth0, okta, keycloak, entra, google).
DEFAULT_CONFIG = {"rotate_refresh_tokens": True, "access_token_ttl": 3600, "refresh_token_ttl": None,
                  "declined_scopes": [], "profile": "auth0", "reuse_interval": 0,
                  "par": False, "require_par": False}
STAT_NAMES = [
    "token_requests",  # every request that reached /oauth/token (faulted ones too)
    "revoke_requests",  # every request that reached /oauth/revoke (faulted ones too)
    "refresh_grants",  # successful refresh_token grants
    "exchange_grants",  # successful Apple token exchanges
    "revocations",  # revoke calls the real endpoint answered 200
    "reuse_detections",  # families revoked because a rotated refresh token came back
    "reuse_presentations",  # rotated refresh tokens presented (each one is a reuse)
    "reuse_interval_grants",  # rotated refresh tokens accepted again within the reuse interval
    "invalid_grants",  # token requests answered 400 invalid_grant
    "fault_hits",  # requests answered (or altered) by an injected fault
    "authorizations",  # authorization codes issued to an app's redirect_uri
    "code_grants",  # successful authorization_code grants
    "dpop_proofs",  # DPoP proofs accepted at the token endpoint (and at /userinfo)
    "dpop_nonce_challenges",  # token requests answered 400 use_dpop_nonce
    "dpop_invalid_proofs",  # requests refused for a bad proof (invalid_dpop_proof)
    "dpop_key_mismatches",  # bound refresh tokens / codes presented with another key or none
    "device_authorizations",  # device codes issued at /oauth/device/code
    "device_polls",  # device_code grant requests
    "device_grants",  # device codes redeemed for tokens
    "device_too_early_polls",  # polls sooner than the code's interval (answered slow_down)
    "par_requests",  # pushed authorization requests accepted (201)
    "par_authorizations",  # /authorize requests that used a request_uri
    "silent_authorizations",  # /authorize answered from the browser session, without a page
]

# ----------------------------------------------------------------------------------------
# Shared state. Every read and write of STATE goes through LOCK.

LOCK = threading.RLock()


def fresh_oidc():
    return {
        # client id -> {"redirect_uris": [...], "any_loopback_port": bool}
        "clients": {cid: {"redirect_uris": list(DEFAULT_REDIRECT_URIS), "any_loopback_port": False}
                    for cid in ("tokenstore-test", "tokenstore-confidential")},
        "next_user": None,  # Apple id of the next sign-in at the Apple page
        "next_id_token": None,  # {"fault": name, "value": s|None}
        "next_redirect": None,  # {"fault": name, "error_description": s|None}
        "sessions": {},  # browser session cookie value -> {"apple_id", "auth_time", "acr"}
        "acr_supported": None,  # None: every asked acr value; else the list the server can meet
        # each /authorize that passed the checks, newest last (at most 20): what was asked
        # (prompt, login_hint, max_age, acr_values) and whether a login page was shown
        "authorizations": [],
        # the last 20 end-session requests: {"kind", "id_token_hint_sub", "state", "ended"}
        "end_sessions": [],
    }


def fresh_state():
    return {
        "config": dict(DEFAULT_CONFIG),
        "codes": {},  # apple code -> {"sub": ..., "used": bool}
        "tokens": {},  # token string -> record dict (see Token)
        "families": {},  # family id -> {"revoked": bool, "reason": str|None, "sub": ...,
        #                                "auth_time": n, "audience": s|None}
        "stats": {name: 0 for name in STAT_NAMES},
        "faults": [],
        "auth_codes": {},  # our authorization code -> record (see AuthCode)
        "transactions": {},  # state sent to Apple -> the validated /authorize request
        "apple_users": {},  # Apple id -> {"name", "email", "authorized": bool}
        "oidc": fresh_oidc(),
        "keys": None,  # {"signing": {"kid", "pem"}, "retired": [public JWK, ...]}; kept by reset
        "dpop": dpop.fresh_state(),  # nonce, switches, jti replay cache (dpop.py)
        # device_code -> record (see device_authorization_endpoint); settings for new codes
        "device": {"codes": {}, "interval": 1, "expires_in": 600, "slow_down": 0},
        "par": {},  # request_uri -> {"client_id", "query": [(k, v)], "dpop_jkt", "expires_at"}
        "authorize_log": [],  # parameter NAMES of each GET /authorize (never values), newest last
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
        for name, value in fresh_oidc().items():
            base["oidc"].setdefault(name, value)
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

    def is_public(self):
        return self.auth_method == "none"

    def check_redirect_uri(self, redirect_uri):
        conf = STATE["oidc"]["clients"].get(self.client_id) or {}
        return redirect_uri_matches(redirect_uri, conf.get("redirect_uris") or [],
                                    bool(conf.get("any_loopback_port")))

    def check_client_secret(self, client_secret):
        if self.client_secret is None:
            return False
        return hmac.compare_digest(self.client_secret, client_secret or "")

    def check_endpoint_auth_method(self, method, endpoint):
        if self.auth_method == "none":
            return method == "none"
        return method in ("client_secret_post", "client_secret_basic")

    def check_response_type(self, response_type):
        return response_type == "code"

    def check_grant_type(self, grant_type):
        return grant_type in ("refresh_token", TOKEN_EXCHANGE, AUTHORIZATION_CODE, DEVICE_CODE)


LOOPBACK_HOSTS = ("127.0.0.1", "[::1]")


def redirect_uri_matches(uri, registered, any_loopback_port):
    """Exact string match, as Auth0 does (port included). With any_loopback_port, a
    loopback http URI also matches a registered one that differs only in its port
    (RFC 8252 7.3)."""
    if uri in registered:
        return True
    if not any_loopback_port:
        return False

    def without_port(u):
        try:
            parts = urllib.parse.urlsplit(u)
            parts.port  # noqa: B018  (raises on a bad port)
        except ValueError:
            return None
        host = parts.netloc.rsplit(":", 1)[0] if not parts.netloc.endswith("]") else parts.netloc
        if parts.scheme != "http" or host not in LOOPBACK_HOSTS:
            return None
        return (host, parts.path, parts.query, parts.fragment)

    mine = without_port(uri)
    return mine is not None and any(without_port(r) == mine for r in registered)


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


# ---- signing keys and ID tokens -------------------------------------------------------------

ISSUER = None  # "http://127.0.0.1:PORT/", set by main() from the bound address
_KEY_CACHE = {}  # kid -> RSAKey (importing a PEM each time would be slow)


def issuer():
    return ISSUER or request.host_url


def profile_name():
    with LOCK:
        return STATE["config"].get("profile") or "auth0"


def current_profile():
    return profiles.PROFILES[profile_name()]


def token_iss():
    """The `iss` of ID tokens under the current profile ({base}/ for auth0)."""
    return profiles.token_issuer(profile_name(), issuer())


def new_signing_key():
    key = RSAKey.generate_key(2048, parameters={"alg": "RS256", "use": "sig"}, auto_kid=True)
    _KEY_CACHE[key.kid] = key
    return {"kid": key.kid, "pem": key.as_pem(private=True).decode()}


def ensure_keys():
    """The RSA signing key, made once and kept in STATE (so in the state file)."""
    if not STATE.get("keys"):
        STATE["keys"] = {"signing": new_signing_key(), "retired": []}
        return True
    return False


def signing_key():
    rec = STATE["keys"]["signing"]
    key = _KEY_CACHE.get(rec["kid"])
    if key is None:
        key = RSAKey.import_key(rec["pem"], parameters={"kid": rec["kid"], "alg": "RS256", "use": "sig"})
        _KEY_CACHE[rec["kid"]] = key
    return key


def public_jwk(key):
    jwk = key.as_dict(private=False)
    jwk.update({"kid": key.kid, "alg": "RS256", "use": "sig"})
    return jwk


def jwks():
    return {"keys": [public_jwk(signing_key())] + list(STATE["keys"].get("retired") or [])}


def _jws_compact(header, claims, sign):
    signing_input = (b64url(json.dumps(header, separators=(",", ":")).encode()) + "."
                     + b64url(json.dumps(claims, separators=(",", ":")).encode()))
    return signing_input + "." + sign(signing_input.encode())


def make_id_token(sub, client_id, *, audience=None, nonce=None, auth_time=None, profile=None,
                  fault=None, acr=None):
    """An Auth0-like ID token for the Apple user `sub`. `fault` ({"fault": name, "value": s})
    makes it bad in one of the ID_TOKEN_FAULTS ways."""
    now = int(time.time())
    kind = (fault or {}).get("fault")
    value = (fault or {}).get("value")
    claims = {
        "iss": token_iss(),
        "sub": "apple|" + sub,
        "aud": [client_id, audience] if audience else client_id,
        "iat": now,
        "exp": now + ID_TOKEN_TTL,
        "auth_time": int(auth_time if auth_time is not None else now),
        "sid": secrets.token_urlsafe(16),
    }
    if current_profile().get("tenant"):
        claims["tid"] = current_profile()["tenant"]
    if audience:
        claims["azp"] = client_id
    if nonce:
        claims["nonce"] = nonce
    if acr:
        claims["acr"] = acr
    if profile:
        claims.update(profile)
    key = signing_key()
    header = {"alg": "RS256", "typ": "JWT", "kid": key.kid}

    if kind == "wrong_aud":
        other = value or "another-client"
        claims["aud"] = [other, audience] if audience else other
    elif kind == "wrong_iss":
        claims["iss"] = value or issuer().rstrip("/")
    elif kind == "expired":
        claims["iat"] = now - 7200
        claims["exp"] = now - 3600
        claims["auth_time"] = min(claims["auth_time"], now - 7200)
    elif kind == "unknown_kid":
        header["kid"] = value or "unknown-" + secrets.token_hex(8)
    elif kind == "missing_kid":
        del header["kid"]
    elif kind == "wrong_nonce":
        claims["nonce"] = value or secrets.token_urlsafe(32)
    elif kind == "missing_nonce":
        claims.pop("nonce", None)
    elif kind == "missing_sub":
        del claims["sub"]
    elif kind == "missing_azp":
        claims["aud"] = [client_id, audience or value or "https://api.example.com/"]
        claims.pop("azp", None)
    elif kind == "old_auth_time":
        claims["auth_time"] = now - 86400
    elif kind == "missing_auth_time":
        del claims["auth_time"]
    elif kind == "wrong_acr":
        claims["acr"] = value or "urn:tokenstore:test:weak"

    if kind == "alg_none":
        return _jws_compact({"alg": "none", "typ": "JWT", "kid": key.kid}, claims, lambda _: "")
    if kind == "alg_hs256":
        secret = key.as_pem(private=False)
        return _jws_compact({"alg": "HS256", "typ": "JWT", "kid": key.kid}, claims,
                            lambda data: b64url(hmac.new(secret, data, hashlib.sha256).digest()))
    token = jose_jwt.encode(header, claims, key, algorithms=["RS256"])
    if kind == "bad_signature":
        head, payload, sig = token.split(".")
        raw = bytearray(base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4)))
        raw[len(raw) // 2] ^= 0x01
        token = f"{head}.{payload}.{b64url(bytes(raw))}"
    return token


def take_switch(name):
    """Pops the armed one-shot switch STATE["oidc"][name] (None when nothing is armed)."""
    value = STATE["oidc"].get(name)
    STATE["oidc"][name] = None
    return value


def apple_user(apple_id):
    """The registry entry of an Apple user (made on first mention)."""
    users = STATE["apple_users"]
    if apple_id not in users:
        if apple_id == DEFAULT_APPLE_USER["apple_id"]:
            name, email = DEFAULT_APPLE_USER["name"], DEFAULT_APPLE_USER["email"]
        else:
            name = "Test User"
            email = hashlib.sha256(apple_id.encode()).hexdigest()[:10] + "@privaterelay.appleid.com"
        users[apple_id] = {"name": name, "email": email, "authorized": False}
    return users[apple_id]


def update_apple_user(apple_id, body):
    entry = apple_user(apple_id)
    for field in ("name", "email"):
        if field in body:
            entry[field] = body[field]
    if body.get("first_sign_in") is not None:
        entry["authorized"] = not body["first_sign_in"]
    return entry


def profile_claims(name, email, scope):
    """The profile claims an ID token carries on a first sign-in, as the scope allows."""
    scopes = (scope or "").split()
    out = {}
    if name and "profile" in scopes:
        out["name"] = name
        given, _, family = name.partition(" ")
        out["given_name"] = given
        if family:
            out["family_name"] = family
    if email and "email" in scopes:
        out["email"] = email
        out["email_verified"] = True
    return out


def generate_bearer_token(grant_type, client, user=None, scope=None, expires_in=None,
                          include_refresh_token=True):
    """Access (and refresh) token; each grant adds its own id_token."""
    ttl = STATE["config"]["access_token_ttl"]
    token = {
        "access_token": secrets.token_urlsafe(32),
        "token_type": "DPoP" if g.get("dpop_jkt") else "Bearer",
        "expires_in": int(ttl) if float(ttl).is_integer() else ttl,
        "scope": scope or "",
    }
    if include_refresh_token:
        token["refresh_token"] = secrets.token_urlsafe(36)
    return token


def new_family(sub, auth_time, audience=None, acr=None):
    """A grant family; `acr` is the sign-in's (the code's), which its access tokens carry to the API."""
    family = uuid.uuid4().hex
    # A sign-in made with a DPoP proof binds the family's refresh tokens to that key (Auth0
    # binds a public client's refresh tokens); an unbound family stays unbound.
    STATE["families"][family] = {"revoked": False, "reason": None, "sub": sub,
                                 "auth_time": int(auth_time), "audience": audience,
                                 "jkt": g.get("dpop_jkt"), "acr": acr}
    return family


def store_token_answer(token, client, sub, family, family_scope, audience=None):
    now = time.time()
    cfg = STATE["config"]
    STATE["tokens"][token["access_token"]] = {
        "kind": "access", "client_id": client.get_client_id(), "sub": sub, "audience": audience,
        "scope": token["scope"], "family": family, "issued_at": now,
        "expires_at": now + float(cfg["access_token_ttl"]), "state": "active",
        "jkt": g.get("dpop_jkt"),  # cnf.jkt: the DPoP key the access token is bound to
    }
    if "refresh_token" in token:
        rt_ttl = cfg.get("refresh_token_ttl")
        STATE["tokens"][token["refresh_token"]] = {
            "kind": "refresh", "client_id": client.get_client_id(), "sub": sub,
            "scope": family_scope, "family": family, "issued_at": now,
            "expires_at": None if rt_ttl is None else now + float(rt_ttl), "state": "active",
            "jkt": (STATE["families"].get(family) or {}).get("jkt"),  # bound for its whole family
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
        bound = tok.rec.get("jkt")
        if bound and g.get("dpop_jkt") != bound:
            # A bound refresh token without a proof, or with a proof by another key (a stolen
            # token replayed elsewhere): refused, and nothing about the family changes.
            bump("dpop_key_mismatches")
            return None
        if tok.rec["state"] == "rotated" and not tok.family_revoked() and not tok.is_expired() \
                and time.time() - tok.rec.get("rotated_at", 0) <= float(STATE["config"].get("reuse_interval") or 0):
            # Auth0's reuse interval (Okta's grace period): a rotated-out refresh token presented
            # again shortly after its rotation (an answer lost on the way back, a client that died
            # before it stored the new one) still works, and the family lives on.
            bump("reuse_interval_grants")
            return tok
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
        token = self.generate_token(
            user=user, scope=scope,
            include_refresh_token=bool(STATE["config"]["rotate_refresh_tokens"])
            and not current_profile().get("no_rotation"),
        )
        if "openid" in scope.split():
            fam = STATE["families"].get(refresh_token.rec["family"]) or {}
            token["id_token"] = make_id_token(
                user, self.request.client.get_client_id(), audience=fam.get("audience"),
                auth_time=fam.get("auth_time"))
        return token

    def save_token(self, token):
        rt = self.request.refresh_token
        # Auth0's Multi-Resource Refresh Token: the access token is for the API named by
        # `audience` (the family's sign-in audience when none is sent).
        fam = STATE["families"].get(rt.rec["family"]) or {}
        audience = self.request.form.get("audience") or fam.get("audience")
        store_token_answer(token, self.request.client, rt.get_user(), rt.rec["family"],
                           rt.get_scope(), audience=audience)
        bump("refresh_grants")

    def revoke_old_credential(self, refresh_token):
        if current_profile().get("old_refresh_tokens_stay_valid") or current_profile().get("no_rotation"):
            return  # Entra: a rotated-out refresh token keeps working; Google: no rotation
        if STATE["config"]["rotate_refresh_tokens"] and refresh_token.rec["state"] != "rotated":
            refresh_token.rec["state"] = "rotated"
            refresh_token.rec["rotated_at"] = time.time()


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
        profile = form.get("user_profile")
        self.request.user_profile = None
        if profile:
            try:
                parsed = json.loads(profile)
                if not isinstance(parsed, dict):
                    raise ValueError
            except ValueError:
                raise InvalidRequestError("'user_profile' must be a JSON object.") from None
            self.request.user_profile = parsed

    def create_token_response(self):
        requested = (self.request.payload.scope or DEFAULT_EXCHANGE_SCOPE).split()
        granted = [s for s in dict.fromkeys(requested) if s in ALLOWED_SCOPES]
        scope = " ".join(granted)
        client = self.request.client
        sub = self.request.user
        token = self.generate_token(user=sub, scope=scope,
                                    include_refresh_token="offline_access" in granted)
        now = time.time()
        audience = self.request.form.get("audience") or None
        family = new_family(sub, now, audience)
        store_token_answer(token, client, sub, family, scope, audience=audience)
        user = apple_user(sub)
        first = not user["authorized"]
        user["authorized"] = True
        fault = take_switch("next_id_token")
        if "openid" in granted:
            profile = None
            if first:  # Apple gives the app the name once; the app passes it as user_profile
                name = user["name"]
                given = ((self.request.user_profile or {}).get("name") or {})
                if isinstance(given, dict) and (given.get("firstName") or given.get("lastName")):
                    name = " ".join(p for p in (given.get("firstName"), given.get("lastName")) if p)
                profile = profile_claims(name, user["email"], scope)
            token["id_token"] = make_id_token(sub, client.get_client_id(), auth_time=now,
                                              profile=profile, fault=fault)
        bump("exchange_grants")
        return 200, token, self.TOKEN_RESPONSE_HEADER


class DeviceGrantError(OAuth2Error):
    """An RFC 8628 3.5 answer: authorization_pending, slow_down, access_denied, expired_token."""

    status_code = 400

    def __init__(self, error, description):
        super().__init__(description=description)
        self.error = error


class DeviceCodeGrant(BaseGrant, TokenEndpointMixin):
    """RFC 8628 3.4: the device code, polled until the test approves or denies its user code."""

    GRANT_TYPE = DEVICE_CODE
    TOKEN_ENDPOINT_AUTH_METHODS = TOKEN_AUTH_METHODS

    def validate_token_request(self):
        client = self.authenticate_token_endpoint_client()
        self.request.client = client
        bump("device_polls")
        rec = STATE["device"]["codes"].get(self.request.form.get("device_code") or "")
        if rec is None or rec["client_id"] != client.get_client_id():
            raise InvalidGrantError("Unknown device code.")
        now = time.time()
        last = rec["polls"][-1] if rec["polls"] else None
        rec["polls"].append(now)
        if rec["status"] == "used":
            raise InvalidGrantError("The device code was already used.")
        if rec["status"] == "denied":
            raise DeviceGrantError("access_denied", "The user declined the sign-in.")
        if now >= rec["expires_at"] or rec["status"] == "expired":
            raise DeviceGrantError("expired_token", "The device code expired.")
        if rec.get("dpop_jkt") and g.get("dpop_jkt") != rec["dpop_jkt"]:
            bump("dpop_key_mismatches")  # dpop_jkt at the device authorization binds the code
            raise InvalidGrantError("The device code is bound to another DPoP key.")
        if rec["status"] == "pending":
            if STATE["device"]["slow_down"] > 0:
                STATE["device"]["slow_down"] -= 1
                rec["interval"] += 5
                raise DeviceGrantError("slow_down", "Poll less often.")
            if last is not None and now - last < rec["interval"] - 0.25:
                bump("device_too_early_polls")
                rec["interval"] += 5
                raise DeviceGrantError("slow_down", "Poll less often.")
            raise DeviceGrantError("authorization_pending", "The user has not approved the sign-in yet.")
        rec["status"] = "used"  # approved: single use
        self.request.user = rec["sub"]
        self.request.device = rec

    def create_token_response(self):
        rec = self.request.device
        client = self.request.client
        sub = self.request.user
        granted = rec["scope"].split()
        token = self.generate_token(user=sub, scope=rec["scope"], include_refresh_token="offline_access" in granted)
        family = new_family(sub, rec["approved_at"], rec.get("audience"))
        store_token_answer(token, client, sub, family, rec["scope"], audience=rec.get("audience"))
        if "openid" in granted:
            user = apple_user(sub)
            profile = profile_claims(user["name"], user["email"], rec["scope"]) if not user["authorized"] else None
            user["authorized"] = True
            token["id_token"] = make_id_token(sub, client.get_client_id(), audience=rec.get("audience"),
                                              auth_time=rec["approved_at"], profile=profile,
                                              fault=take_switch("next_id_token"))
        bump("device_grants")
        return 200, token, self.TOKEN_RESPONSE_HEADER


class AuthCode:
    """A view over a record in STATE["auth_codes"]. Record keys: client_id, redirect_uri,
    scope, nonce, code_challenge, code_challenge_method, audience, max_age, sub, profile,
    auth_time, id_token_fault, issued_at, expires_at, used, family."""

    def __init__(self, value, rec):
        self.value = value
        self.rec = rec

    def get_redirect_uri(self):
        return self.rec["redirect_uri"]

    def get_scope(self):
        return self.rec["scope"]


class PKCE(CodeChallenge):
    """RFC 7636 with S256 only; the public client MUST send a code_challenge at /authorize
    (Authlib's own check only requires the verifier at the token endpoint)."""

    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]

    def validate_code_challenge(self, grant, redirect_uri):
        request = grant.request
        challenge = request.payload.data.get("code_challenge")
        method = request.payload.data.get("code_challenge_method")
        if request.client.is_public() and not challenge:
            raise InvalidRequestError("Missing 'code_challenge': PKCE is required for this client.")
        if challenge and method != "S256":
            raise InvalidRequestError("'code_challenge_method' must be S256.")
        super().validate_code_challenge(grant, redirect_uri)

    def get_authorization_code_challenge(self, authorization_code):
        return authorization_code.rec.get("code_challenge")

    def get_authorization_code_challenge_method(self, authorization_code):
        return authorization_code.rec.get("code_challenge_method")


PROMPTS = {"login", "select_account", "consent", "none"}


def asked_acr(data):
    return (data.get("acr_values") or "").split()


def usable_session(data):
    """The browser session the request's cookie names, when it may answer without a page:
    not older than max_age, of the login_hint's user, with an acr among acr_values."""
    session = STATE["oidc"]["sessions"].get(request.cookies.get(SESSION_COOKIE) or "")
    if session is None:
        return None
    max_age = data.get("max_age")
    if max_age is not None and max_age.isdigit() and time.time() - session["auth_time"] > int(max_age):
        return None
    hint = (data.get("login_hint") or "").removeprefix("apple|")
    if hint and hint != session["apple_id"]:
        return None
    asked = asked_acr(data)
    if asked and session.get("acr") not in asked:
        return None
    return session


def login_acr(asked):
    """The acr of a login at the Apple page: the first asked value the server supports."""
    if not asked:
        return None
    supported = STATE["oidc"]["acr_supported"]
    return next((value for value in asked if supported is None or value in supported), FALLBACK_ACR)


def record_authorization(data, login_form):
    log = STATE["oidc"]["authorizations"]
    log.append({"prompt": data.get("prompt"), "login_hint": data.get("login_hint"),
                "max_age": data.get("max_age"), "acr_values": data.get("acr_values"),
                "login_form": login_form})
    del log[:-20]


class Auth0AuthorizeChecks:
    """The rest of what /authorize checks once client and redirect_uri are known (errors go
    back to the redirect_uri): connection, prompt, max_age, response_mode, nonce."""

    def __call__(self, grant):
        grant.register_hook("after_validate_authorization_request_payload", self.validate)

    def validate(self, grant, redirect_uri):
        data = grant.request.payload.data
        connection = data.get("connection")
        if connection not in (None, "", "apple"):
            raise InvalidRequestError("the connection is not enabled for this client")
        if data.get("response_mode") not in (None, "", "query"):
            raise InvalidRequestError("only response_mode=query is supported")
        prompts = (data.get("prompt") or "").split()
        if set(prompts) - PROMPTS:
            raise InvalidRequestError("'prompt' must be login, select_account, consent or none")
        if "none" in prompts and len(prompts) > 1:
            raise InvalidRequestError("'prompt=none' cannot be combined with another value")
        max_age = data.get("max_age")
        if max_age is not None and not (max_age.isdigit() and len(max_age) < 10):
            raise InvalidRequestError("'max_age' must be a non-negative integer")
        if "none" in prompts and usable_session(data) is None:
            # No page may be shown, and no browser session answers for the user (OIDC 3.1.2.6).
            raise LoginRequiredError()
        nonce = data.get("nonce")
        if nonce is not None and not nonce:
            raise InvalidRequestError("'nonce' is empty")


class AuthorizationCodeGrant(grants.AuthorizationCodeGrant):
    """RFC 6749 4.1 with PKCE; codes come from /login/callback (see login_callback)."""

    TOKEN_ENDPOINT_AUTH_METHODS = TOKEN_AUTH_METHODS

    def validate_requested_scope(self):
        pass  # unknown scopes are dropped (Client.get_allowed_scope), as Auth0 ignores them

    def query_authorization_code(self, code, client):
        rec = STATE["auth_codes"].get(code or "")
        if rec is None or rec["client_id"] != client.get_client_id():
            return None
        if rec.get("dpop_jkt") and g.get("dpop_jkt") != rec["dpop_jkt"]:
            # RFC 9449 10: the code was asked for with dpop_jkt; only that key redeems it.
            bump("dpop_key_mismatches")
            return None
        if rec["used"]:
            # RFC 6749 4.1.2: deny, and revoke the tokens issued from this code.
            if rec.get("family"):
                revoke_family(rec["family"], "code_reuse")
            return None
        rec["used"] = True  # single use, even if the rest of the request fails
        if time.time() >= rec["expires_at"]:
            return None
        return AuthCode(code, rec)

    def authenticate_user(self, authorization_code):
        return authorization_code.rec["sub"]

    def delete_authorization_code(self, authorization_code):
        pass  # marked used in query_authorization_code

    def save_authorization_code(self, code, request):  # pragma: no cover
        raise NotImplementedError("codes are issued by /login/callback")

    def create_token_response(self):
        client = self.request.client
        rec = self.request.authorization_code.rec
        sub = rec["sub"]
        self.request.user = sub
        scope = rec["scope"]
        granted = scope.split()
        token = self.generate_token(user=sub, scope=scope,
                                    include_refresh_token="offline_access" in granted
                                    or bool(current_profile().get("refresh_without_offline_access")))
        family = new_family(sub, rec["auth_time"], rec.get("audience"), rec.get("acr"))
        rec["family"] = family
        store_token_answer(token, client, sub, family, scope, audience=rec.get("audience"))
        if "openid" in granted:
            token["id_token"] = make_id_token(
                sub, client.get_client_id(), audience=rec.get("audience"), nonce=rec.get("nonce"),
                auth_time=rec["auth_time"], profile=rec.get("profile"), fault=rec.get("id_token_fault"),
                acr=rec.get("acr"))
        bump("code_grants")
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
authorization.register_grant(AuthorizationCodeGrant, [PKCE(required=True), Auth0AuthorizeChecks()])
authorization.register_grant(AppleTokenExchangeGrant)
authorization.register_grant(DeviceCodeGrant)
authorization.register_endpoint(Revocation)


def public_url():
    """The URL the client called (a profile's public path, before ProfileRouting rewrote it),
    which is what a DPoP proof's htu names."""
    path = request.environ.get("tokenstore.public_path") or request.path
    return f"http://{request.host}{path}"


def dpop_error(error):
    if error.error == "use_dpop_nonce":
        bump("dpop_nonce_challenges")
    else:
        bump("dpop_invalid_proofs")
    headers = {"Cache-Control": "no-store"}
    if error.nonce:
        headers["DPoP-Nonce"] = error.nonce
    return jsonify({"error": error.error, "error_description": error.description}), 400, headers


def check_dpop(method, access_token=None, nonce_required=None):
    """The request's DPoP proof: its key's thumbprint in g.dpop_jkt (None when no proof was
    sent), or a dpop.ProofError."""
    proofs = request.headers.getlist("DPoP")
    g.dpop_jkt = None
    if not proofs or STATE["dpop"].get("ignore_proofs"):
        return None
    if len(proofs) > 1:
        raise dpop.ProofError("invalid_dpop_proof", "more than one DPoP header")
    g.dpop_jkt = dpop.check(proofs[0], method, public_url(), STATE["dpop"], time.time(),
                            access_token=access_token, nonce_required=nonce_required)
    bump("dpop_proofs")
    return g.dpop_jkt


@app.post("/oauth/token")
def token_endpoint():
    with LOCK:
        try:
            check_dpop("POST")
        except dpop.ProofError as error:
            return dpop_error(error)
        if g.dpop_jkt is None and STATE["dpop"]["required"]:
            return dpop_error(dpop.ProofError("invalid_dpop_proof", "a DPoP proof is required"))
        resp = authorization.create_token_response()
        if resp.status_code == 400 and b'"invalid_grant"' in resp.get_data():
            bump("invalid_grants")
        if request.headers.get("DPoP"):
            resp.headers["DPoP-Nonce"] = STATE["dpop"]["nonce"]  # the nonce to use next
        return resp


@app.post("/oauth/revoke")
def revoke_endpoint():
    with LOCK:
        resp = authorization.create_endpoint_response(Revocation.ENDPOINT_NAME)
        if resp.status_code == 200:
            bump("revocations")
        return resp


# ---- the device grant (RFC 8628) and pushed authorization requests (RFC 9126) ------------

USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"  # RFC 8628 6.1: no vowels, no look-alikes


def authenticate_form_client():
    """The client of a form POST (client_id + client_secret for a confidential one), or None."""
    client = CLIENTS.get(request.form.get("client_id") or "")
    if client is None:
        return None
    if not client.is_public() and not client.check_client_secret(request.form.get("client_secret")):
        return None
    return client


@app.post("/oauth/device/code")
def device_authorization_endpoint():
    with LOCK:
        client = authenticate_form_client()
        if client is None:
            return jsonify({"error": "invalid_client", "error_description": "Unknown client."}), 401
        requested = (request.form.get("scope") or "openid").split()
        scope = " ".join(s for s in dict.fromkeys(requested) if s in ALLOWED_SCOPES)
        device_code = secrets.token_urlsafe(32)
        letters = "".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(8))
        user_code = f"{letters[:4]}-{letters[4:]}"
        settings = STATE["device"]
        now = time.time()
        settings["codes"][device_code] = {
            "client_id": client.get_client_id(), "scope": scope, "user_code": user_code,
            "audience": request.form.get("audience") or request.form.get("resource") or None,
            "dpop_jkt": request.form.get("dpop_jkt") or None, "status": "pending", "sub": None,
            "approved_at": None, "issued_at": now, "expires_at": now + float(settings["expires_in"]),
            "interval": int(settings["interval"]), "polls": [],
        }
        bump("device_authorizations")
        base = issuer()
        answer = {"device_code": device_code, "user_code": user_code, "verification_uri": base + "activate",
                  "verification_uri_complete": base + "activate?" + urllib.parse.urlencode({"user_code": user_code}),
                  "expires_in": int(settings["expires_in"]), "interval": int(settings["interval"])}
        return jsonify(answer), 200, {"Cache-Control": "no-store"}


@app.get("/activate")
def activate_page():
    """Where a person types the user code (the test approves through /__test/device instead)."""
    code = html.escape(request.args.get("user_code") or "")
    return page(200, "Activate your device",
                f'<h1>Activate your device</h1>\n<form method="get"><input name="user_code" value="{code}">'
                "<button>Continue</button></form>")


def device_by_user_code(user_code):
    for rec in STATE["device"]["codes"].values():
        if rec["user_code"] == user_code:
            return rec
    return None


@app.post("/oauth/par")
def pushed_authorization_endpoint():
    with LOCK:
        if not STATE["config"]["par"]:
            return jsonify({"error": "invalid_request", "error_description": "PAR is not enabled."}), 400
        try:
            check_dpop("POST")
        except dpop.ProofError as error:
            return dpop_error(error)
        client = authenticate_form_client()
        if client is None:
            return jsonify({"error": "invalid_client", "error_description": "Unknown client."}), 401
        form = request.form
        if form.get("request_uri"):
            return jsonify({"error": "invalid_request", "error_description": "request_uri is not allowed here."}), 400
        redirect_uri = form.get("redirect_uri") or ""
        if not client.check_redirect_uri(redirect_uri):
            return jsonify({"error": "invalid_request", "error_description": "redirect_uri is not registered."}), 400
        jkt = form.get("dpop_jkt") or None
        if g.dpop_jkt and jkt and jkt != g.dpop_jkt:
            return jsonify({"error": "invalid_dpop_proof", "error_description": "dpop_jkt is not the proof's key."}), 400
        query = [(k, v) for k, v in form.items(multi=True) if k not in ("client_secret", "dpop_jkt")]
        if g.dpop_jkt or jkt:
            query.append(("dpop_jkt", g.dpop_jkt or jkt))
        now = time.time()
        prune(STATE["par"], now)
        request_uri = PAR_URI_PREFIX + secrets.token_urlsafe(24)
        STATE["par"][request_uri] = {"client_id": client.get_client_id(), "query": query, "expires_at": now + PAR_TTL}
        bump("par_requests")
        return jsonify({"request_uri": request_uri, "expires_in": PAR_TTL}), 201, {"Cache-Control": "no-store"}


def take_pushed_request():
    """For GET /authorize: a request_uri replaces the query with the pushed parameters (once).
    An error page for an unknown, used, expired or foreign one, or when PAR is required and
    the request came without one; None otherwise."""
    args = request.args
    log = STATE["authorize_log"]
    log.append(sorted(set(args.keys())))
    del log[:-20]
    request_uri = args.get("request_uri")
    if not request_uri:
        if STATE["config"]["require_par"]:
            return error_page("invalid_request", "Pushed authorization requests are required (request_uri).")
        return None
    pushed = STATE["par"].pop(request_uri, None)
    if pushed is None or pushed["expires_at"] <= time.time() or pushed["client_id"] != args.get("client_id"):
        return error_page("invalid_request", "The request_uri is unknown, used, expired or of another client.")
    query = urllib.parse.urlencode(pushed["query"])
    request.environ["QUERY_STRING"] = query
    request.query_string = query.encode()  # werkzeug keeps it from the request line
    for cached in ("args", "values", "url", "full_path"):
        request.__dict__.pop(cached, None)  # werkzeug caches them; read the pushed ones
    bump("par_authorizations")
    return None


# ---- browser sign-in: /authorize -> emulated Apple -> /login/callback -> the app ----------


def page(status, title, body_html, extra_head=""):
    doc = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
           f"<title>{html.escape(title)}</title>{extra_head}</head>\n<body>\n{body_html}\n</body></html>\n")
    return Response(doc, status=status, content_type="text/html; charset=utf-8",
                    headers={"Cache-Control": "no-store"})


def error_page(error, description, status=400, title="Oops!, something went wrong"):
    """Auth0 shows a page (no redirect) when it cannot trust the redirect_uri."""
    return page(status, title,
                f"<h1>{html.escape(title)}</h1>\n<p id=\"error\">{html.escape(error)}</p>\n"
                f"<p id=\"error_description\">{html.escape(description)}</p>")


def form_page(title, action, method, fields, auto_submit, button="Continue"):
    inputs = "\n".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in fields)
    button_html = f'<button type="submit">{html.escape(button)}</button>'
    if auto_submit:
        button_html = f"<noscript>{button_html}</noscript>"
    script = "\n<script>document.forms[0].submit();</script>" if auto_submit else ""
    return page(200, title,
                f"<h1>{html.escape(title)}</h1>\n"
                f'<form method="{method}" action="{html.escape(action)}">\n{inputs}\n{button_html}\n</form>'
                + script)


def redirect_to(uri, params):
    return Response("", status=302, headers={"Location": add_params_to_uri(uri, params),
                                             "Cache-Control": "no-store"})


def prune(table, now):
    for key in [k for k, v in table.items() if v["expires_at"] <= now]:
        del table[key]


@app.get("/authorize")
def authorize_endpoint():
    with LOCK:
        refused = take_pushed_request()
        if refused is not None:
            return refused
        args = request.args
        client = CLIENTS.get(args.get("client_id") or "")
        if client is None:
            return error_page("invalid_request", f"Unknown client: {args.get('client_id') or ''}")
        redirect_uri = args.get("redirect_uri")
        if not redirect_uri:
            return error_page("invalid_request", "Missing required parameter: redirect_uri")
        if not client.check_redirect_uri(redirect_uri):
            return error_page(
                "invalid_request",
                f"The provided redirect_uri is not in the list of allowed callback URLs: {redirect_uri}",
                title="Callback URL mismatch")
        try:
            grant = authorization.get_consent_grant(end_user=None)
        except OAuth2Error as error:
            if error.redirect_uri:  # client and redirect_uri are trusted: tell the app
                return authorization.handle_response(*error())
            return error_page(error.error, error.get_error_description() or error.error)
        data = grant.request.payload.data
        prompts = set((data.get("prompt") or "").split())
        session = usable_session(data)
        silent = session is not None and not prompts & {"login", "select_account", "consent"}
        record_authorization(data, login_form=not silent)
        if not silent and not data.get("connection") and profile_name() == "auth0":
            # Universal Login with one enabled connection: the user has to press the button.
            fields = [(k, v) for k, v in args.items(multi=True) if k != "connection"]
            fields.append(("connection", "apple"))
            return form_page("Log in to TokenStore (test)", "/authorize", "get", fields,
                             auto_submit=False, button="Continue with Apple")
        now = time.time()
        prune(STATE["transactions"], now)
        record = {
            "client_id": client.get_client_id(), "redirect_uri": redirect_uri,
            "scope": grant.request.scope or "", "state": data.get("state"),
            "nonce": data.get("nonce"), "code_challenge": data.get("code_challenge"),
            "code_challenge_method": data.get("code_challenge_method"),
            "audience": data.get("audience") or None, "max_age": data.get("max_age"),
            "login_hint": (data.get("login_hint") or "").removeprefix("apple|") or None, "redirect_fault": None,
            "acr_values": asked_acr(data), "dpop_jkt": args.get("dpop_jkt") or None,
            "expires_at": now + TRANSACTION_TTL,
        }
        if silent:
            # The browser's session answers: no page, a code at once (its auth_time and acr).
            bump("silent_authorizations")
            code = issue_code(record, session["apple_id"], None, session["auth_time"], session.get("acr"))
            return app_redirect(record, [("code", code)])
        tx = secrets.token_urlsafe(24)
        STATE["transactions"][tx] = record
        apple = urllib.parse.urlencode({
            "client_id": APPLE_SERVICES_ID, "redirect_uri": issuer() + "login/callback",
            "response_type": "code", "response_mode": "form_post", "scope": "name email",
            "state": tx})
        return Response("", status=302, headers={"Location": f"/appleid/auth/authorize?{apple}",
                                                 "Cache-Control": "no-store"})


@app.get("/appleid/auth/authorize")
def apple_authorize():
    """The emulated Apple: signs in the chosen user at once and form_posts the result to
    Auth0's /login/callback, with the `user` JSON only on the user's first authorization."""
    with LOCK:
        tx_id = request.args.get("state") or ""
        tx = STATE["transactions"].get(tx_id)
        if tx is None or tx["expires_at"] <= time.time():
            return error_page("invalid_request", "Unknown or expired sign-in transaction.")
        if tx.get("apple_done"):
            return error_page("invalid_request", "This sign-in transaction was already used.")
        tx["apple_done"] = True
        fault = take_switch("next_redirect")
        tx["redirect_fault"] = fault
        fields = [("state", tx_id)]
        if fault and fault["fault"] == "access_denied":
            fields.append(("error", "user_cancelled_authorize"))
        else:
            apple_id = tx.get("login_hint") or take_switch("next_user") or DEFAULT_APPLE_USER["apple_id"]
            user = apple_user(apple_id)
            code = "c" + secrets.token_hex(16) + ".0." + secrets.token_hex(4)
            STATE["codes"][code] = {"sub": apple_id, "used": False}
            fields.append(("code", code))
            if not user["authorized"]:
                given, _, family = (user["name"] or "").partition(" ")
                fields.append(("user", json.dumps(
                    {"name": {"firstName": given, "lastName": family}, "email": user["email"]})))
            user["authorized"] = True
        if tx.get("login_hint"):
            fields.append(("prefilled_login_hint", tx["login_hint"]))  # the hinted identity, pre-filled
        return form_page("Sign in with Apple (test)", issuer() + "login/callback", "post", fields,
                         auto_submit=True)


@app.post("/login/callback")
def login_callback():
    with LOCK:
        form = request.form
        tx = STATE["transactions"].pop(form.get("state") or "", None)
        if tx is None or tx["expires_at"] <= time.time():
            return error_page("invalid_request", "Invalid state")
        fault = tx.get("redirect_fault") or {}
        kind = fault.get("fault")
        state = tx.get("state")
        if kind == "wrong_state":
            state = "wrong-" + secrets.token_urlsafe(24)

        def to_app(params):
            return app_redirect(tx, params, state=state, fault_kind=kind)

        entry = STATE["codes"].get(form.get("code") or "")
        valid = entry is not None and not entry["used"]
        if entry is not None:
            entry["used"] = True  # Auth0 redeemed it at Apple: single use
        if kind == "no_redirect":
            return page(200, "Signing in", "<p>Signing in with Apple did not finish.</p>")
        if kind == "oauth_error":
            return to_app([("error", fault.get("error") or "invalid_scope"),
                           ("error_description", fault.get("error_description") or "The scope is not allowed.")])
        if form.get("error"):
            return to_app([("error", "access_denied"),
                           ("error_description", fault.get("error_description") or DEFAULT_DENIED_DESCRIPTION)])
        if not valid:
            return to_app([("error", "invalid_request"),
                           ("error_description", "Invalid authorization code from Apple.")])
        profile = None
        if form.get("user"):  # only on the user's first authorization at Apple
            try:
                posted = json.loads(form["user"])
                name = " ".join(p for p in ((posted.get("name") or {}).get("firstName"),
                                            (posted.get("name") or {}).get("lastName")) if p)
                profile = profile_claims(name, posted.get("email"), tx["scope"])
            except (ValueError, AttributeError):
                profile = None
        now = int(time.time())
        acr = login_acr(tx.get("acr_values") or [])
        code = issue_code(tx, entry["sub"], profile, now, acr)
        response = to_app([("code", code)])
        # The browser is now signed in here: a later /authorize with this cookie needs no page.
        sid = secrets.token_urlsafe(24)
        STATE["oidc"]["sessions"][sid] = {"apple_id": entry["sub"], "auth_time": now, "acr": acr}
        # Persistent, as a provider's "remember me" session is (Auth0's lasts days): a browser keeps it across restarts.
        response.set_cookie(SESSION_COOKIE, sid, max_age=86400, httponly=True, samesite="Lax", path="/")
        return response


def issue_code(tx, sub, profile, auth_time, acr):
    """An authorization code for the validated request `tx` (a transaction record)."""
    now = time.time()
    prune(STATE["auth_codes"], now)
    code = secrets.token_urlsafe(32)
    STATE["auth_codes"][code] = {
        "client_id": tx["client_id"], "redirect_uri": tx["redirect_uri"], "scope": tx["scope"],
        "nonce": tx.get("nonce"), "code_challenge": tx.get("code_challenge"),
        "code_challenge_method": tx.get("code_challenge_method"), "audience": tx.get("audience"),
        "max_age": tx.get("max_age"), "sub": sub, "profile": profile,
        "auth_time": int(auth_time), "acr": acr, "id_token_fault": take_switch("next_id_token"),
        "issued_at": now, "expires_at": now + AUTHORIZATION_CODE_TTL, "used": False,
        "family": None, "dpop_jkt": tx.get("dpop_jkt"),
    }
    bump("authorizations")
    return code


def app_redirect(tx, params, state=None, fault_kind=None):
    """The 302 to the app's redirect_uri with `params`, the state and (RFC 9207) iss."""
    state = state if state is not None else tx.get("state")
    if state:
        params.append(("state", state))
    if fault_kind == "wrong_iss_param":
        params.append(("iss", "https://attacker.example/"))
    elif current_profile().get("iss_parameter"):  # RFC 9207
        params.append(("iss", profiles.document_issuer(profile_name(), issuer())))
    return redirect_to(tx["redirect_uri"], params)


@app.get("/userinfo")
def userinfo():
    """OIDC UserInfo: an API an app calls with its access token (examples/gtk-notes does).
    The token's user, with the profile claims its scope allows; 401 invalid_token for a
    missing, unknown, expired or revoked access token (a logged-out one included)."""
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    with LOCK:
        tok = find_token(value.strip()) if scheme.lower() in ("bearer", "dpop") else None
        if tok is not None and (tok.rec.get("jkt") or scheme.lower() == "dpop"):
            # A DPoP-bound access token (RFC 9449 7): scheme DPoP and a proof by the bound
            # key with ath; the server's current nonce too when resource_nonce is on (9).
            try:
                jkt = check_dpop("GET", access_token=value.strip(),
                                 nonce_required=bool(STATE["dpop"]["resource_nonce"]))
            except dpop.ProofError as error:
                bump("dpop_nonce_challenges" if error.error == "use_dpop_nonce" else "dpop_invalid_proofs")
                bump("userinfo_refused")
                headers = {"WWW-Authenticate": f'DPoP error="{error.error}", algs="ES256"'}
                if error.nonce:
                    headers["DPoP-Nonce"] = error.nonce
                return (jsonify({"error": error.error, "error_description": error.description}), 401, headers)
            if scheme.lower() != "dpop" or jkt is None or jkt != tok.rec.get("jkt"):
                tok = None
        if tok is None or tok.kind != "access" or tok.is_revoked() or tok.is_expired():
            bump("userinfo_refused")
            return (jsonify({"error": "invalid_token"}), 401,
                    {"WWW-Authenticate": 'Bearer error="invalid_token"'})
        bump("userinfo_requests")
        sub = tok.rec["sub"]  # the Apple user id; the ID token's sub is "apple|" + it
        out = {"sub": "apple|" + sub}
        entry = STATE["apple_users"].get(sub)
        if entry:
            out.update(profile_claims(entry["name"], entry["email"], tok.rec["scope"]))
        return jsonify(out)


@app.get("/.well-known/jwks.json")
def jwks_endpoint():
    with LOCK:
        return jsonify(jwks())


@app.get("/.well-known/openid-configuration")
def openid_configuration():
    base = issuer()
    return jsonify({
        "issuer": base,
        "authorization_endpoint": base + "authorize",
        "token_endpoint": base + "oauth/token",
        "revocation_endpoint": base + "oauth/revoke",
        "jwks_uri": base + ".well-known/jwks.json",
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": [AUTHORIZATION_CODE, "refresh_token", TOKEN_EXCHANGE],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": TOKEN_AUTH_METHODS,
        "scopes_supported": ALLOWED_SCOPES,
        "claims_supported": ["aud", "auth_time", "azp", "email", "email_verified", "exp",
                             "family_name", "given_name", "iat", "iss", "name", "nonce", "sid", "sub"],
        "request_parameter_supported": False,
        "device_authorization_endpoint": base + "oauth/device/code",
        "end_session_endpoint": base + "oidc/logout",
        **({"pushed_authorization_request_endpoint": base + "oauth/par",
            "require_pushed_authorization_requests": bool(STATE["config"]["require_par"])}
           if STATE["config"]["par"] else {}),
    })


@app.get("/__profile/openid-configuration")
def profile_openid_configuration():
    """The discovery document of a provider profile (profiles.py), reached at its own path."""
    name, base = profile_name(), issuer()
    p = profiles.PROFILES[name]
    doc = {
        "issuer": profiles.document_issuer(name, base),
        "authorization_endpoint": profiles.endpoint_url(name, base, "authorization"),
        "token_endpoint": profiles.endpoint_url(name, base, "token"),
        "jwks_uri": profiles.endpoint_url(name, base, "jwks"),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": TOKEN_AUTH_METHODS,
        "scopes_supported": p.get("scopes", ALLOWED_SCOPES),
    }
    revocation = profiles.endpoint_url(name, base, "revocation")
    if revocation and not p.get("revocation_only_in_rfc8414"):
        doc["revocation_endpoint"] = revocation
    if p.get("iss_parameter"):
        doc["authorization_response_iss_parameter_supported"] = True
    return jsonify(doc)


@app.get("/__profile/oauth-authorization-server")
def profile_authorization_server_metadata():
    """RFC 8414 metadata of a provider profile: the issuer and its revocation endpoint."""
    name, base = profile_name(), issuer()
    doc = {"issuer": profiles.configured_issuer(name, base),
           "token_endpoint": profiles.endpoint_url(name, base, "token")}
    revocation = profiles.endpoint_url(name, base, "revocation")
    if revocation:
        doc["revocation_endpoint"] = revocation
    return jsonify(doc)


class ProfileRouting:
    """WSGI middleware: a profile's public paths onto the internal routes (profiles.rewrite)."""

    def __init__(self, wsgi_app):
        self.wsgi_app = wsgi_app

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO") or "/"
        if path.startswith("/__"):  # the test control paths and internal documents
            if path.startswith("/__profile/"):
                start_response("404 NOT FOUND", [("Content-Type", "text/plain")])
                return [b"not found"]
            return self.wsgi_app(environ, start_response)
        environ["tokenstore.public_path"] = path  # a DPoP proof's htu names this one
        internal = profiles.rewrite(profile_name(), path, environ.get("HTTP_HOST"))
        if internal is None:
            start_response("404 NOT FOUND", [("Content-Type", "text/plain")])
            return [b"not found at this provider"]
        environ["PATH_INFO"] = internal
        return self.wsgi_app(environ, start_response)


app.wsgi_app = ProfileRouting(app.wsgi_app)


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
    problem = check_user_fields(body)
    if problem:
        return bad(problem)
    code = "c" + secrets.token_hex(16) + ".0." + secrets.token_hex(4)
    with LOCK:
        if any(k in body for k in ("name", "email", "first_sign_in")):
            update_apple_user(sub, body)
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
            "audience": tok.rec.get("audience"),
            "expires_in": None if tok.rec.get("expires_at") is None else tok.get_expires_in(),
            "token_type": "DPoP" if tok.rec.get("jkt") else "Bearer",
            "cnf": {"jkt": tok.rec["jkt"]} if tok.rec.get("jkt") else None,  # RFC 9449 6.2
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
        if "profile" in body and body["profile"] not in profiles.PROFILES:
            return bad(f"profile must be one of {sorted(profiles.PROFILES)}")
        if "access_token_ttl" in body and not (isinstance(body["access_token_ttl"], (int, float))
                                               and body["access_token_ttl"] > 0):
            return bad("access_token_ttl must be a positive number")
        if "reuse_interval" in body and not (isinstance(body["reuse_interval"], (int, float))
                                             and body["reuse_interval"] >= 0):
            return bad("reuse_interval must be a non-negative number of seconds")
        with LOCK:
            STATE["config"].update(body)
    with LOCK:
        return jsonify(dict(STATE["config"]))


DPOP_SWITCHES = {"rotate_nonce", "nonce_required", "required", "iat_window", "reject_next",
                 "forget_jtis", "resource_nonce", "ignore_proofs"}


@app.route("/__test/dpop", methods=["GET", "POST"])
def dpop_control():
    """GET: the DPoP state (current nonce, switches, jti cache size). POST: rotate_nonce: true
    (a new nonce now: the next proof with the old one is answered use_dpop_nonce), reject_next:
    n (the next n proofs are answered use_dpop_nonce, each with a new nonce: a nonce rotated
    mid-flow, n=2 is two in a row), nonce_required, required (a token request without a proof
    is refused), iat_window (seconds), forget_jtis: true (empty the replay cache), resource_nonce
    (/userinfo, the resource server, requires the current nonce as well: 401 use_dpop_nonce with
    DPoP-Nonce, RFC 9449 9), ignore_proofs (a server without DPoP: proofs are not looked at, answers
    are Bearer)."""
    if request.method == "POST":
        body = request.get_json(force=True, silent=True) or {}
        unknown = set(body) - DPOP_SWITCHES
        if unknown:
            return bad(f"unknown dpop switches: {sorted(unknown)}")
        if "reject_next" in body and not (isinstance(body["reject_next"], int) and body["reject_next"] >= 0):
            return bad("reject_next must be a non-negative integer")
        if "iat_window" in body and not (isinstance(body["iat_window"], (int, float)) and body["iat_window"] > 0):
            return bad("iat_window must be a positive number")
        with LOCK:
            state = STATE["dpop"]
            if body.get("rotate_nonce"):
                dpop.rotate_nonce(state)
            if body.get("forget_jtis"):
                state["jtis"].clear()
            for key in ("nonce_required", "required", "iat_window", "reject_next", "resource_nonce", "ignore_proofs"):
                if key in body:
                    state[key] = body[key]
    with LOCK:
        state = STATE["dpop"]
        return jsonify({"nonce": state["nonce"], "nonce_required": state["nonce_required"],
                        "required": state["required"], "iat_window": state["iat_window"],
                        "reject_next": state["reject_next"], "resource_nonce": state["resource_nonce"],
                        "jtis": len(state["jtis"])})


@app.post("/__test/dpop/check")
def dpop_check():
    """{"proof", "method", "url", "access_token"?} -> {"jkt", "header", "claims"} or 400 with
    the error: one proof verified as the endpoints verify it (its jti is remembered, no nonce
    asked), so a client's proofs can be checked by this independent implementation."""
    body = request.get_json(force=True, silent=True) or {}
    if not all(isinstance(body.get(k), str) for k in ("proof", "method", "url")):
        return bad("proof, method and url are required strings")
    with LOCK:
        try:
            jkt = dpop.check(body["proof"], body["method"], body["url"], STATE["dpop"], time.time(),
                             access_token=body.get("access_token"), nonce_required=False)
        except dpop.ProofError as error:
            return jsonify({"error": error.error, "error_description": error.description}), 400
    head, claims, _ = body["proof"].split(".")
    return jsonify({"jkt": jkt, "header": json.loads(dpop.b64url_decode(head)),
                    "claims": json.loads(dpop.b64url_decode(claims))})


@app.route("/__test/device", methods=["GET", "POST"])
def device_control():
    with LOCK:
        settings = STATE["device"]
        if request.method == "POST":
            body = request.get_json(force=True, silent=True) or {}
            unknown = set(body) - {"interval", "expires_in", "slow_down", "approve", "deny", "expire", "apple_id"}
            if unknown:
                return bad(f"unknown device keys: {sorted(unknown)}")
            for key in ("interval", "expires_in", "slow_down"):
                if key in body:
                    settings[key] = body[key]
            for action, status in (("approve", "approved"), ("deny", "denied"), ("expire", "expired")):
                if action in body:
                    rec = device_by_user_code(body[action])
                    if rec is None or rec["status"] != "pending":
                        return bad(f"no pending device code with user code {body[action]!r}")
                    rec["status"] = status
                    if status == "approved":
                        rec["sub"] = body.get("apple_id") or DEFAULT_APPLE_USER["apple_id"]
                        rec["approved_at"] = time.time()
        codes = [{k: v for k, v in rec.items() if k != "sub"} for rec in settings["codes"].values()]
        return jsonify({"interval": settings["interval"], "expires_in": settings["expires_in"],
                        "slow_down": settings["slow_down"], "codes": codes,
                        "authorize_log": STATE["authorize_log"]})


@app.post("/__test/reset")
def reset():
    with LOCK:
        keys = STATE.get("keys")  # the signing key is the server's identity: it stays
        STATE.clear()
        STATE.update(fresh_state())
        STATE["keys"] = keys
        protected_api.reset()
    return jsonify({"ok": True})


def oidc_view():
    return {
        "issuer": issuer(),
        "kid": STATE["keys"]["signing"]["kid"],
        "clients": STATE["oidc"]["clients"],
        "next_user": STATE["oidc"]["next_user"],
        "next_id_token": STATE["oidc"]["next_id_token"],
        "next_redirect": STATE["oidc"]["next_redirect"],
        "apple_users": STATE["apple_users"],
        "id_token_faults": ID_TOKEN_FAULTS,
        "redirect_faults": REDIRECT_FAULTS,
        "default_redirect_uris": DEFAULT_REDIRECT_URIS,
        "default_apple_user": DEFAULT_APPLE_USER,
        "sessions": [dict(v, age=int(time.time()) - v["auth_time"]) for v in STATE["oidc"]["sessions"].values()],
        "acr_supported": STATE["oidc"]["acr_supported"],
        "authorizations": STATE["oidc"]["authorizations"],
        "end_sessions": STATE["oidc"]["end_sessions"],
    }


@app.get("/__test/oidc")
def oidc_state():
    with LOCK:
        return jsonify(oidc_view())


def check_user_fields(body):
    for field in ("name", "email"):
        if field in body and not isinstance(body[field], str):
            return f"'{field}' must be a string"
    if body.get("first_sign_in") not in (None, True, False):
        return "'first_sign_in' must be true, false or null"
    return None


@app.post("/__test/oidc/redirect_uris")
def oidc_redirect_uris():
    body = request.get_json(force=True, silent=True) or {}
    unknown = set(body) - {"client_id", "redirect_uris", "any_loopback_port"}
    if unknown:
        return bad(f"unknown keys: {sorted(unknown)}")
    client_id = body.get("client_id", "tokenstore-test")
    if client_id not in CLIENTS:
        return bad(f"unknown client {client_id!r}")
    uris = body.get("redirect_uris")
    if not isinstance(uris, list) or not all(isinstance(u, str) and u for u in uris):
        return bad("'redirect_uris' must be a list of non-empty strings")
    if body.get("any_loopback_port") not in (None, True, False):
        return bad("'any_loopback_port' must be a boolean")
    with LOCK:
        conf = STATE["oidc"]["clients"].setdefault(client_id, {})
        conf["redirect_uris"] = list(uris)
        conf["any_loopback_port"] = bool(body.get("any_loopback_port", False))
        return jsonify(oidc_view())


@app.post("/__test/oidc/next_user")
def oidc_next_user():
    body = request.get_json(force=True, silent=True) or {}
    unknown = set(body) - {"apple_id", "name", "email", "first_sign_in"}
    if unknown:
        return bad(f"unknown keys: {sorted(unknown)}")
    apple_id = body.get("apple_id")
    if not isinstance(apple_id, str) or not apple_id or "|" in apple_id:
        return bad("'apple_id' (an Apple user id, without 'apple|') is required")
    problem = check_user_fields(body)
    if problem:
        return bad(problem)
    with LOCK:
        update_apple_user(apple_id, body)
        STATE["oidc"]["next_user"] = apple_id
        return jsonify(oidc_view())


@app.post("/__test/oidc/next_id_token")
def oidc_next_id_token():
    body = request.get_json(force=True, silent=True) or {}
    unknown = set(body) - {"fault", "value"}
    if unknown:
        return bad(f"unknown keys: {sorted(unknown)}")
    if body.get("fault") not in ID_TOKEN_FAULTS:
        return bad(f"'fault' must be one of {sorted(ID_TOKEN_FAULTS)}")
    if body.get("value") is not None and not isinstance(body["value"], str):
        return bad("'value' must be a string")
    with LOCK:
        STATE["oidc"]["next_id_token"] = {"fault": body["fault"], "value": body.get("value")}
        return jsonify(oidc_view())


@app.post("/__test/oidc/next_redirect")
def oidc_next_redirect():
    body = request.get_json(force=True, silent=True) or {}
    unknown = set(body) - {"fault", "error_description", "error"}
    if unknown:
        return bad(f"unknown keys: {sorted(unknown)}")
    error = body.get("error")
    if error is not None and (not isinstance(error, str) or not error or invalid_error_characters(error)):
        return bad("'error' must be a non-empty string of RFC 6749 error characters")
    if body.get("fault") not in REDIRECT_FAULTS:
        return bad(f"'fault' must be one of {sorted(REDIRECT_FAULTS)}")
    desc = body.get("error_description")
    if desc is not None and (not isinstance(desc, str) or not desc or invalid_error_characters(desc)):
        return bad("'error_description' must be a non-empty string of RFC 6749 error characters")
    with LOCK:
        STATE["oidc"]["next_redirect"] = {"fault": body["fault"], "error_description": desc, "error": error}
        return jsonify(oidc_view())


@app.delete("/__test/oidc/next")
def oidc_disarm():
    with LOCK:
        for name in ("next_user", "next_id_token", "next_redirect"):
            STATE["oidc"][name] = None
        return jsonify(oidc_view())


def end_browser_session(kind, client_id, return_to, sub, state):
    """Ends the browser session the request's cookie names and sends the browser to
    `return_to` (registered for `client_id`, its query aside), the cookie cleared."""
    conf = STATE["oidc"]["clients"].get(client_id or "") or {}
    bare = urllib.parse.urlunsplit(urllib.parse.urlsplit(return_to or "")._replace(query=""))
    if not return_to or not redirect_uri_matches(bare, conf.get("redirect_uris") or [],
                                                 bool(conf.get("any_loopback_port"))):
        return error_page("invalid_request", "logout return address not registered")
    with LOCK:
        ended = STATE["oidc"]["sessions"].pop(request.cookies.get(SESSION_COOKIE) or "", None) is not None
        entries = STATE["oidc"]["end_sessions"]
        entries.append({"kind": kind, "id_token_hint_sub": sub, "state": state is not None, "ended": ended})
        del entries[:-20]
    target = return_to
    if state is not None:
        target += ("&" if "?" in target else "?") + urllib.parse.urlencode({"state": state})
    response = Response(status=302, headers={"Location": target, "Cache-Control": "no-store"})
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@app.get("/oidc/logout")
def oidc_logout():
    """OIDC RP-initiated logout 1.0: id_token_hint (its sub recorded; the signature is not
    checked here), client_id, post_logout_redirect_uri (registered), state (echoed)."""
    sub = None
    hint = request.args.get("id_token_hint")
    if hint:
        try:
            payload = hint.split(".")[1]
            sub = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))).get("sub")
        except (IndexError, ValueError):
            return error_page("invalid_request", "id_token_hint is not a JWT")
    return end_browser_session("oidc", request.args.get("client_id"), request.args.get("post_logout_redirect_uri"),
                               sub, request.args.get("state"))


@app.get("/v2/logout")
def auth0_logout():
    """Auth0's logout: client_id and returnTo (registered, its query aside: any state travels
    inside it); no id_token_hint."""
    return end_browser_session("auth0", request.args.get("client_id"), request.args.get("returnTo"), None, None)


@app.route("/__test/oidc/sessions", methods=["POST", "DELETE"])
def oidc_sessions():
    """POST {"age": s}: every browser session authenticated s seconds earlier than it was;
    DELETE: every browser session ended (as a logout at the server would)."""
    with LOCK:
        if request.method == "DELETE":
            STATE["oidc"]["sessions"] = {}
            return jsonify(oidc_view())
        body = request.get_json(force=True, silent=True) or {}
        age = body.get("age")
        if set(body) != {"age"} or not isinstance(age, int) or isinstance(age, bool) or age < 0:
            return bad("expected {\"age\": seconds (a non-negative integer)}")
        for session in STATE["oidc"]["sessions"].values():
            session["auth_time"] -= age
        return jsonify(oidc_view())


@app.post("/__test/oidc/acr")
def oidc_acr():
    """{"supported": [value, ...] | null}: the acr values a login can meet (null: every one)."""
    body = request.get_json(force=True, silent=True) or {}
    supported = body.get("supported")
    if set(body) != {"supported"} or not (supported is None or (
            isinstance(supported, list) and all(isinstance(v, str) and v and " " not in v for v in supported))):
        return bad("expected {\"supported\": [acr values] or null}")
    with LOCK:
        STATE["oidc"]["acr_supported"] = supported
        return jsonify(oidc_view())


@app.post("/__test/oidc/rotate_key")
def oidc_rotate_key():
    body = request.get_json(force=True, silent=True) or {}
    with LOCK:
        old = public_jwk(signing_key())
        retired = [] if body.get("keep_old") is False else [old] + list(STATE["keys"].get("retired") or [])
        STATE["keys"] = {"signing": new_signing_key(), "retired": retired}
        return jsonify(jwks())


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


protected_api.install(app, sys.modules[__name__])  # /api/notes and its metadata (protected_api.py)


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
    global STATE_FILE, LOG_REQUESTS, ISSUER
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
    if ensure_keys():
        save_state()  # a new signing key is on disk at once, not only after a graceful stop

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
    host = f"[{args.host}]" if ":" in args.host else args.host
    ISSUER = f"http://{host}:{port}/"

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
