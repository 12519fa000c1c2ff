#!/usr/bin/env python3
"""Self-check of Tests/AuthServer/server.py and useragent.py against a real started server.

    scripts/authserver selftest                        # the same, with the venv's python
    PY=.build/authserver-venv/bin/python
    $PY Tests/AuthServer/test_server.py                # starts its own server(s)
    $PY Tests/AuthServer/test_server.py --url URL      # checks a running one (skips restart)
    $PY Tests/AuthServer/test_server.py -k oidc        # only checks whose name has "oidc"

The server is started with .build/authserver-venv/bin/python (or
$TOKENSTORE_AUTHSERVER_PYTHON); create that venv with `scripts/authserver venv`. The ID
token checks verify signatures with joserfc, so run this file with that venv's python too.
Prints one line a check and a closing 'N passed, N failed'; exits non-zero on a failure.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SERVER = os.path.join(HERE, "server.py")
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
APPLE = "http://auth0.com/oauth/token-type/apple-authz-code"
PUBLIC = "tokenstore-test"
CONF, SECRET = "tokenstore-confidential", "s3cret"

BASE = ""
SEEN_TOKENS: list[str] = []  # every token value handed out, to check the log never shows one


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


OPENER = urllib.request.build_opener(NoRedirect)


class Answer:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body or b"null")


def call(method, path, form=None, js=None, timeout=10, headers=None):
    data, headers = None, dict(headers or {})
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    elif js is not None:
        data = json.dumps(js).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(BASE + path, data=data, method=method, headers=headers)
    try:
        with OPENER.open(req, timeout=timeout) as r:
            return Answer(r.status, r.headers, r.read())
    except urllib.error.HTTPError as e:
        return Answer(e.code, e.headers, e.read())


def ctl(method, path, js=None):
    a = call(method, "/__test/" + path, js=js if js is not None else ({} if method == "POST" else None))
    assert a.status == 200, (path, a.status, a.body)
    return a.json()


def token(form, headers=None):
    a = call("POST", "/oauth/token", form=form, headers=headers)
    if a.status == 200:
        j = a.json()
        SEEN_TOKENS.extend(v for k, v in j.items() if k in ("access_token", "refresh_token"))
    return a


def sign_in(sub="001.user", scope="openid profile offline_access", client=PUBLIC, secret=None):
    code = ctl("POST", "apple/code", {"sub": sub})["code"]
    form = {"grant_type": EXCHANGE, "subject_token_type": APPLE, "subject_token": code,
            "client_id": client, "scope": scope}
    if secret:
        form["client_secret"] = secret
    a = token(form)
    assert a.status == 200, (a.status, a.body)
    return a.json()


def refresh(rt, client=PUBLIC, scope=None, secret=None):
    form = {"grant_type": "refresh_token", "client_id": client, "refresh_token": rt}
    if scope:
        form["scope"] = scope
    if secret:
        form["client_secret"] = secret
    return token(form)


def revoke(tok, client=PUBLIC, secret=None, hint="refresh_token", **extra):
    form = {"client_id": client, "token": tok}
    if hint is not None:
        form["token_type_hint"] = hint
    if secret is not None:
        form["client_secret"] = secret
    form.update(extra)
    return call("POST", "/oauth/revoke", form=form)


def introspect(tok):
    return ctl("POST", "introspect", {"token": tok})


def stats():
    return ctl("GET", "stats")


def raw_post(path, body=b"", timeout=10):
    """A raw HTTP exchange; returns (status, headers, body) or raises the transport error."""
    host, port = BASE.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    conn.request("POST", path, body=body,
                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    r = conn.getresponse()
    return r.status, r.headers, r.read()


# ----------------------------------------------------------------------------------------
# Checks

CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


@check
def exchange_success_and_scopes():
    j = sign_in("001.alice", "openid profile offline_access bogus:scope write:items")
    assert j["token_type"] == "Bearer" and j["expires_in"] == 3600, j
    assert j["scope"] == "openid profile offline_access write:items", j["scope"]
    assert j["refresh_token"] and j["access_token"], j
    payload = j["id_token"].split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["sub"] == "apple|001.alice" and claims["aud"] == PUBLIC, claims
    i = introspect(j["refresh_token"])
    assert i["active"] and i["kind"] == "refresh" and not i["family_revoked"], i
    assert introspect(j["access_token"])["kind"] == "access"
    j2 = sign_in("001.alice", "openid read:items")
    assert "refresh_token" not in j2 and j2["scope"] == "openid read:items", j2
    j3 = sign_in("001.alice", "read:items offline_access")
    assert "id_token" not in j3 and "refresh_token" in j3, j3


@check
def exchange_errors():
    code = ctl("POST", "apple/code", {"sub": "001.bob"})["code"]
    form = {"grant_type": EXCHANGE, "subject_token_type": APPLE, "subject_token": code,
            "client_id": PUBLIC, "scope": "openid offline_access"}
    assert token(form).status == 200
    a = token(form)  # the code is single-use
    assert a.status == 400 and a.json()["error"] == "invalid_grant", a.body
    a = token(dict(form, subject_token="nonsense"))
    assert a.status == 400 and a.json()["error"] == "invalid_grant", a.body
    code = ctl("POST", "apple/code", {"sub": "001.bob"})["code"]
    a = token(dict(form, subject_token=code, subject_token_type="urn:other"))
    assert a.status == 400 and a.json()["error"] == "invalid_request", a.body
    a = token(dict(form, subject_token=code, client_id="nobody"))
    assert a.status == 401 and a.json()["error"] == "invalid_client", a.body
    a = token(dict(form, subject_token=code, client_id=CONF, client_secret="wrong"))
    assert a.status == 401 and a.json()["error"] == "invalid_client", a.body
    a = token(dict(form, subject_token=code, client_id=CONF))  # confidential, no secret
    assert a.status == 401 and a.json()["error"] == "invalid_client", a.body
    j = sign_in("001.bob", client=CONF, secret=SECRET)
    assert j["refresh_token"]
    a = token({"grant_type": "password", "client_id": PUBLIC})
    assert a.status == 400 and a.json()["error"] == "unsupported_grant_type", a.body


@check
def reuse_interval_keeps_a_rotated_token_working_briefly():
    """Auth0's reuse interval: within it a rotated-out refresh token still works (the family lives
    on); after it, presenting it is reuse and the family goes."""
    ctl("POST", "config", {"reuse_interval": 2})
    try:
        before = stats()
        rt0 = sign_in("001.gina")["refresh_token"]
        a = refresh(rt0)
        assert a.status == 200, a.body
        rt1 = a.json()["refresh_token"]
        a = refresh(rt0)  # the answer was lost: the client presents rt0 again, at once
        assert a.status == 200, a.body
        rt2 = a.json()["refresh_token"]
        assert introspect(rt1)["active"] and introspect(rt2)["active"], (introspect(rt1), introspect(rt2))
        assert call("POST", "/__test/config", js={"reuse_interval": -1}).status == 400
        time.sleep(2.2)
        a = refresh(rt0)  # past the interval: reuse
        assert a.status == 400 and a.json()["error"] == "invalid_grant", a.body
        assert not introspect(rt2)["active"] and introspect(rt2)["reason"] == "reuse"
        after = stats()
        assert after["reuse_interval_grants"] - before["reuse_interval_grants"] == 1, (before, after)
        assert after["reuse_detections"] - before["reuse_detections"] == 1, (before, after)
    finally:
        ctl("POST", "config", {"reuse_interval": 0})


@check
def refresh_rotation_and_reuse_detection():
    before = stats()
    j = sign_in("001.carol")
    rt0, at0 = j["refresh_token"], j["access_token"]
    a = refresh(rt0)
    assert a.status == 200, a.body
    j1 = a.json()
    rt1 = j1["refresh_token"]
    assert rt1 != rt0 and j1["scope"] == "openid profile offline_access", j1
    assert introspect(rt0)["reason"] == "rotated" and not introspect(rt0)["active"]
    assert introspect(rt1)["active"]
    a = refresh(rt1, scope="openid")  # narrower scope is fine
    assert a.status == 200 and a.json()["scope"] == "openid", a.body
    rt2 = a.json()["refresh_token"]
    assert introspect(rt2)["scope"] == "openid profile offline_access"  # the grant keeps its scope
    a = refresh(rt2, scope="openid write:items")  # wider than the grant
    assert a.status == 400 and a.json()["error"] == "invalid_scope", a.body
    assert introspect(rt2)["active"]
    # Reuse of rt0 (already rotated): the whole family goes.
    a = refresh(rt0)
    assert a.status == 400 and a.json()["error"] == "invalid_grant", a.body
    for t in (rt0, rt1, rt2, at0, j1["access_token"]):
        i = introspect(t)
        assert not i["active"] and i["family_revoked"] and i["reason"] == "reuse", i
    a = refresh(rt2)
    assert a.status == 400 and a.json()["error"] == "invalid_grant", a.body
    after = stats()
    assert after["refresh_grants"] - before["refresh_grants"] == 2, (before, after)
    assert after["reuse_detections"] - before["reuse_detections"] == 1, (before, after)
    a = refresh("never-issued")
    assert a.status == 400 and a.json()["error"] == "invalid_grant", a.body
    j = sign_in("001.carol")
    a = refresh(j["refresh_token"], client=CONF, secret=SECRET)  # another client's token
    assert a.status == 400 and a.json()["error"] == "invalid_grant", a.body


@check
def rotation_off():
    ctl("POST", "config", {"rotate_refresh_tokens": False})
    try:
        rt = sign_in("001.dave")["refresh_token"]
        for _ in range(3):
            a = refresh(rt)
            assert a.status == 200 and "refresh_token" not in a.json(), a.body
        assert introspect(rt)["active"]
    finally:
        ctl("POST", "config", {"rotate_refresh_tokens": True})


@check
def access_token_expiry():
    ctl("POST", "config", {"access_token_ttl": 1})
    try:
        j = sign_in("001.erin")
        assert j["expires_in"] == 1, j
        assert introspect(j["access_token"])["active"]
        time.sleep(1.2)
        i = introspect(j["access_token"])
        assert not i["active"] and i["reason"] == "expired", i
        a = refresh(j["refresh_token"])
        assert a.status == 200 and a.json()["expires_in"] == 1
    finally:
        ctl("POST", "config", {"access_token_ttl": 3600})
    assert ctl("GET", "config")["access_token_ttl"] == 3600


@check
def protected_api_challenges():
    """/api/notes (protected_api.py): a good token 200; invalid_token on demand and for a bad token;
    step-up by acr and max_age, met by a later browser sign-in with acr_values; RFC 9728 metadata."""
    def get(access_token):
        return call("GET", "/api/notes", headers={"Authorization": "Bearer " + access_token})
    ctl("POST", "resource", {"acr_values": None, "max_age": None, "resource_metadata": None, "invalid_token_next": 0})
    j = sign_in("001.api.user")
    a = get(j["access_token"])
    assert a.status == 200 and a.json()["sub"] == "001.api.user", (a.status, a.body)
    assert get("nope").status == 401
    ctl("POST", "resource", {"invalid_token_next": 1})
    a = get(j["access_token"])
    assert a.status == 401 and a.headers["WWW-Authenticate"] == 'Bearer error="invalid_token"', a.headers
    assert get(j["access_token"]).status == 200
    ctl("POST", "resource", {"acr_values": ["urn:x:mfa"], "max_age": 60, "age_sign_ins": 120})
    a = get(j["access_token"])
    challenge = a.headers["WWW-Authenticate"]
    assert a.status == 401 and 'error="insufficient_user_authentication"' in challenge, challenge
    assert 'acr_values="urn:x:mfa"' in challenge and 'max_age="60"' in challenge, challenge
    weak = Flow(max_age="60").tokens()  # a new sign-in without the acr: still refused
    a = get(weak["access_token"])
    assert a.status == 401 and 'error="insufficient_user_authentication"' in a.headers["WWW-Authenticate"], a.status
    fresh = Flow(acr_values="urn:x:mfa", max_age="60").tokens()  # the code's acr is on the grant
    assert claims_of(fresh["id_token"])["acr"] == "urn:x:mfa"
    a = get(fresh["access_token"])
    assert a.status == 200 and a.json()["acr"] == "urn:x:mfa", (a.status, a.body)
    a = get(refresh(fresh["refresh_token"]).json()["access_token"])  # and a refreshed token too
    assert a.status == 200 and a.json()["acr"] == "urn:x:mfa", (a.status, a.body)
    ctl("POST", "resource", {"acr_values": None, "max_age": None, "resource_metadata": "foreign", "invalid_token_next": 1})
    challenge = get(fresh["access_token"]).headers["WWW-Authenticate"]
    url = BASE + "/.well-known/oauth-protected-resource/api/notes"
    assert f'resource_metadata="{url}"' in challenge, challenge
    doc = call("GET", "/.well-known/oauth-protected-resource/api/notes").json()
    assert doc["resource"] == BASE + "/api/notes" and doc["authorization_servers"] == ["https://foreign-as.example/"], doc
    ctl("POST", "resource", {"resource_metadata": "own"})
    doc = call("GET", "/.well-known/oauth-protected-resource/api/notes").json()
    assert doc["authorization_servers"] == [BASE + "/"], doc
    state = ctl("GET", "resource")
    # two step-ups: the first sign-in's token and the one of the sign-in without the acr
    assert state["counters"]["step_ups"] == 2 and state["counters"]["metadata_requests"] == 2, state
    assert call("POST", "/__test/resource", js={"resource_metadata": "elsewhere"}).status == 400
    assert call("POST", "/__test/resource", js={"max_age": -1}).status == 400
    ctl("POST", "resource", {"resource_metadata": None})


@check
def userinfo_bearer():
    """GET /userinfo: the access token's user for a live bearer access token, 401 otherwise."""
    def get(authorization):
        req = urllib.request.Request(BASE + "/userinfo", headers={"Authorization": authorization} if authorization else {})
        try:
            with OPENER.open(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("WWW-Authenticate")
    j = sign_in("001.ursula", scope="openid profile email offline_access")
    status, body = get("Bearer " + j["access_token"])
    assert status == 200 and body["sub"] == "apple|001.ursula", (status, body)
    for refused in (None, "Bearer nope", "Basic " + j["access_token"], "Bearer " + j["refresh_token"]):
        status, challenge = get(refused)
        assert status == 401 and 'error="invalid_token"' in (challenge or ""), (refused is None, status, challenge)
    assert revoke(j["refresh_token"]).status == 200
    assert get("Bearer " + j["access_token"])[0] == 401  # logged out: the family is revoked


@check
def revocation_rfc7009():
    before = stats()
    j = sign_in("001.frank")
    a = revoke(j["refresh_token"])
    assert a.status == 200 and a.json() == {}, (a.status, a.body)
    i = introspect(j["refresh_token"])
    assert not i["active"] and i["family_revoked"] and i["reason"] == "revoked", i
    assert not introspect(j["access_token"])["active"]
    a = refresh(j["refresh_token"])
    assert a.status == 400 and a.json()["error"] == "invalid_grant", a.body
    assert revoke(j["refresh_token"]).status == 200  # already revoked
    assert revoke("unknown-token").status == 200
    assert revoke("unknown-token", hint=None).status == 200
    a = call("POST", "/oauth/revoke", form={"client_id": PUBLIC, "token_type_hint": "refresh_token"})
    assert a.status == 400 and a.json()["error"] == "invalid_request", a.body
    a = revoke("x", hint="id_token")
    assert a.status == 400 and a.json()["error"] == "unsupported_token_type", (a.status, a.body)
    a = revoke("x", client="nobody")
    assert a.status == 401 and a.json()["error"] == "invalid_client", a.body
    a = revoke("x", client=CONF, secret="wrong")
    assert a.status == 401 and a.json()["error"] == "invalid_client", a.body
    a = revoke("x", client=CONF)
    assert a.status == 401 and a.json()["error"] == "invalid_client", a.body
    j = sign_in("001.frank", client=CONF, secret=SECRET)
    assert revoke(j["refresh_token"], client=CONF, secret=SECRET).status == 200
    assert not introspect(j["refresh_token"])["active"]
    j = sign_in("001.frank")
    assert revoke(j["access_token"], hint="access_token").status == 200
    assert not introspect(j["access_token"])["active"] and introspect(j["refresh_token"])["active"]
    after = stats()
    assert after["revocations"] - before["revocations"] == 6, (before, after)


@check
def admin_revoke():
    j = sign_in("001.gina")
    k = sign_in("001.gina")
    assert ctl("POST", "revoke", {"sub": "001.gina"})["revoked_families"] == 2
    assert not introspect(j["refresh_token"])["active"] and not introspect(k["refresh_token"])["active"]


@check
def fault_status_headers_body_and_queue():
    before = stats()
    ctl("POST", "faults", {"path": "/oauth/revoke", "count": 2, "status": 503,
                           "headers": {"Retry-After": "2"}})
    ctl("POST", "faults", {"path": "/oauth/revoke", "status": 429, "body": "slow down <html>",
                           "content_type": "text/html"})
    ctl("POST", "faults", {"path": "/oauth/token", "status": 500,
                           "json": {"error": "server_error"}})
    assert stats()["pending_faults"] == 4
    for _ in range(2):
        a = revoke("whatever")
        assert a.status == 503 and a.headers["Retry-After"] == "2", (a.status, dict(a.headers))
    a = revoke("whatever")
    assert a.status == 429 and a.body == b"slow down <html>", (a.status, a.body)
    assert a.headers["Content-Type"].startswith("text/html") and "Retry-After" not in a.headers
    a = revoke("whatever")
    assert a.status == 200  # the queue for this path is empty now
    a = refresh("anything")
    assert a.status == 500 and a.json() == {"error": "server_error"}, a.body
    ctl("POST", "faults", [{"path": "*", "status": 502, "body": "Bad Gateway"}])
    assert revoke("x").status == 502
    ctl("POST", "faults", {"path": "/oauth/token", "count": 5, "status": 503})
    assert ctl("DELETE", "faults")["faults"] == [] and stats()["pending_faults"] == 0
    assert refresh("anything").status == 400
    after = stats()
    assert after["fault_hits"] - before["fault_hits"] == 5, (before, after)
    assert after["revocations"] - before["revocations"] == 1
    bad = call("POST", "/__test/faults", js={"stauts": 503})
    assert bad.status == 400, bad.body


@check
def fault_delay():
    ctl("POST", "faults", {"path": "/oauth/revoke", "delay": 1.0})
    t = time.monotonic()
    a = revoke("x")
    assert a.status == 200 and time.monotonic() - t >= 0.95  # delayed, then the real answer
    ctl("POST", "faults", {"path": "/oauth/revoke", "delay": 2.0})
    t = time.monotonic()
    try:
        revoke_with_timeout = call("POST", "/oauth/revoke", form={"client_id": PUBLIC, "token": "x"},
                                   timeout=0.5)
        raise AssertionError(f"expected a timeout, got {revoke_with_timeout.status}")
    except (TimeoutError, socket.timeout, urllib.error.URLError):
        pass
    assert time.monotonic() - t < 1.5
    time.sleep(1.6)  # let the delayed request finish server-side


def expect_transport_error(path, form):
    try:
        status, _, _ = raw_post(path, urllib.parse.urlencode(form).encode())
    except (ConnectionResetError, http.client.RemoteDisconnected, BrokenPipeError) as e:
        return type(e).__name__
    raise AssertionError(f"expected a transport error, got HTTP {status}")


@check
def fault_drop_eof_and_reset():
    ctl("POST", "faults", {"path": "/oauth/revoke", "drop": True})
    name = expect_transport_error("/oauth/revoke", {"client_id": PUBLIC, "token": "x"})
    assert name == "RemoteDisconnected", name  # closed, no answer: EOF
    ctl("POST", "faults", {"path": "/oauth/revoke", "drop": "reset"})
    name = expect_transport_error("/oauth/revoke", {"client_id": PUBLIC, "token": "x"})
    assert name == "ConnectionResetError", name  # RST
    # urllib (what most clients look like) sees it as a transport error too
    ctl("POST", "faults", {"path": "/oauth/token", "drop": True})
    try:
        call("POST", "/oauth/token", form={"grant_type": "refresh_token"})
        raise AssertionError("no transport error")
    except (urllib.error.URLError, http.client.RemoteDisconnected, ConnectionError):
        pass
    assert revoke("x").status == 200  # the server still serves


@check
def fault_after_processing():
    """phase=after: the server does the work (rotates, revokes) and the answer is lost."""
    j = sign_in("001.hank")
    ctl("POST", "faults", {"path": "/oauth/token", "drop": True, "phase": "after"})
    expect_transport_error("/oauth/token", {"grant_type": "refresh_token", "client_id": PUBLIC,
                                            "refresh_token": j["refresh_token"]})
    assert introspect(j["refresh_token"])["reason"] == "rotated"
    j = sign_in("001.hank")
    ctl("POST", "faults", {"path": "/oauth/revoke", "status": 503, "phase": "after"})
    assert revoke(j["refresh_token"]).status == 503
    assert not introspect(j["refresh_token"])["active"]


@check
def fault_redirect():
    ctl("POST", "faults", {"path": "/oauth/revoke", "redirect": "http://127.0.0.1:1/elsewhere"})
    a = revoke("x")
    assert a.status == 307 and a.headers["Location"] == "http://127.0.0.1:1/elsewhere", a.status
    ctl("POST", "faults", {"path": "/oauth/revoke", "redirect": "/oauth/revoke", "status": 302})
    a = revoke("x")
    assert a.status == 302 and a.headers["Location"] == "/oauth/revoke", a.status


@check
def fault_slow_body():
    ctl("POST", "faults", {"path": "/oauth/revoke", "slow_body": 1.5, "status": 200,
                           "body": '{"padding": "' + "x" * 100 + '"}'})
    host, port = BASE.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    t = time.monotonic()
    conn.request("POST", "/oauth/revoke", body=b"client_id=tokenstore-test&token=x",
                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    r = conn.getresponse()
    t_headers = time.monotonic() - t
    body = r.read()
    t_body = time.monotonic() - t
    assert r.status == 200 and len(body) == int(r.headers["Content-Length"]), (r.status, body)
    assert json.loads(body)["padding"] == "x" * 100
    assert t_headers < 0.5 and t_body >= 1.4, (t_headers, t_body)
    # slow_body alone slows the real answer
    ctl("POST", "faults", {"path": "/oauth/revoke", "slow_body": 0.6})
    t = time.monotonic()
    a = revoke("x")
    assert a.status == 200 and a.json() == {} and time.monotonic() - t >= 0.55


@check
def concurrent_same_refresh_token_is_reuse():
    """8 threads present one refresh token at once: exactly one wins; the other 7 present
    a token that is by then rotated, which IS reuse: the family (and the winner's new
    refresh token) is revoked. This is why TokenStore must single-flight renewals."""
    before = stats()
    rt = sign_in("001.ivy")["refresh_token"]
    barrier = threading.Barrier(8)
    results = []

    def worker():
        barrier.wait()
        a = refresh(rt)
        results.append((a.status, a.json()))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    ok = [j for s, j in results if s == 200]
    errs = [j for s, j in results if s != 200]
    assert len(ok) == 1 and len(errs) == 7, results
    assert all(j["error"] == "invalid_grant" for j in errs), errs
    new_rt = ok[0]["refresh_token"]
    i = introspect(new_rt)
    assert not i["active"] and i["family_revoked"] and i["reason"] == "reuse", i
    after = stats()
    assert after["refresh_grants"] - before["refresh_grants"] == 1
    assert after["reuse_detections"] - before["reuse_detections"] == 1
    assert after["reuse_presentations"] - before["reuse_presentations"] == 7


def _present_from_process(base, rt, barrier, queue):
    global BASE
    BASE = base
    results = []

    def worker():
        barrier.wait()
        results.append(refresh(rt).status)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    queue.put(results)


@check
def concurrent_processes_same_refresh_token():
    """4 processes x 4 threads present one refresh token at once: exactly one 200."""
    import multiprocessing
    ctx = multiprocessing.get_context("fork")
    before = stats()
    rt = sign_in("001.procs")["refresh_token"]
    barrier, queue = ctx.Barrier(16), ctx.Queue()
    procs = [ctx.Process(target=_present_from_process, args=(BASE, rt, barrier, queue))
             for _ in range(4)]
    [p.start() for p in procs]
    statuses = sorted(sum((queue.get(timeout=30) for _ in procs), []))
    [p.join(timeout=30) for p in procs]
    assert statuses == [200] + [400] * 15, statuses
    after = stats()
    assert after["refresh_grants"] - before["refresh_grants"] == 1
    assert after["reuse_detections"] - before["reuse_detections"] == 1


@check
def concurrent_independent_families():
    """16 threads, each its own family, 10 rotations each: all succeed, no reuse."""
    before = stats()
    rts = [sign_in(f"001.par{i}")["refresh_token"] for i in range(16)]
    failures = []

    def worker(rt):
        for _ in range(10):
            a = refresh(rt)
            if a.status != 200:
                failures.append(a.body)
                return
            rt = a.json()["refresh_token"]

    threads = [threading.Thread(target=worker, args=(rt,)) for rt in rts]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not failures, failures[:3]
    after = stats()
    assert after["refresh_grants"] - before["refresh_grants"] == 160
    assert after["reuse_detections"] == before["reuse_detections"]


@check
def reset_clears_everything():
    j = sign_in("001.jack")
    ctl("POST", "faults", {"status": 500})
    ctl("POST", "config", {"rotate_refresh_tokens": False, "access_token_ttl": 5})
    ctl("POST", "reset")
    s = stats()
    assert all(v == 0 for v in s.values()), s
    assert ctl("GET", "config") == {"rotate_refresh_tokens": True, "access_token_ttl": 3600,
                                    "refresh_token_ttl": None, "declined_scopes": [], "profile": "auth0",
                                    "reuse_interval": 0, "par": False, "require_par": False}
    assert introspect(j["refresh_token"]) ["kind"] is None
    assert revoke("x").status == 200


# ----------------------------------------------------------------------------------------
# Browser sign-in (OIDC): /authorize -> emulated Apple form_post -> /login/callback -> app

sys.path.insert(0, HERE)
import useragent  # noqa: E402  (its HTML form parser drives the flow here too)

USERAGENT = os.path.join(HERE, "useragent.py")
DEFAULT_CALLBACK = "http://127.0.0.1:53180/callback"
DEFAULT_APPLE_ID = "000792.d71059495fa24644b94e4a644e2e3b4a.0638"
FULL_SCOPE = "openid profile email offline_access"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_json(part: str):
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def pkce():
    verifier = b64url(os.urandom(32))
    return verifier, b64url(hashlib.sha256(verifier.encode()).digest())


def fetch(method, url, form=None, timeout=10, cookie=None):
    """Like call(), for an absolute URL or a path; never follows a redirect. `cookie`: the
    browser session cookie's value to send."""
    if url.startswith("/"):
        url = BASE + url
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    headers = {"Content-Type": "application/x-www-form-urlencoded"} if form is not None else {}
    if cookie:
        headers["Cookie"] = f"tsauth_session={cookie}"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with OPENER.open(req, timeout=timeout) as r:
            return Answer(r.status, r.headers, r.read())
    except urllib.error.HTTPError as e:
        return Answer(e.code, e.headers, e.read())


def authorize_params(challenge, **over):
    params = {"response_type": "code", "client_id": PUBLIC, "redirect_uri": DEFAULT_CALLBACK,
              "scope": FULL_SCOPE, "state": b64url(os.urandom(32)), "nonce": b64url(os.urandom(32)),
              "code_challenge": challenge, "code_challenge_method": "S256", "connection": "apple"}
    params.update(over)
    return {k: v for k, v in params.items() if v is not None}


def query_of(location):
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))


def only_form(answer):
    assert answer.status == 200 and answer.headers["Content-Type"].startswith("text/html"), answer.status
    forms = useragent.Forms()
    forms.feed(answer.body.decode())
    assert len(forms.forms) == 1, forms.forms
    return forms.forms[0]


class Flow:
    """One browser sign-in driven step by step, each answer kept for inspection."""

    def __init__(self, cookie=None, **over):
        self.verifier, challenge = pkce()
        self.params = authorize_params(challenge, **over)
        self.authorize = fetch("GET", "/authorize?" + urllib.parse.urlencode(self.params), cookie=cookie)
        self.apple = self.callback = None
        self.redirect = None  # the query the app's redirect_uri receives
        self.session = None  # the browser session cookie a login at the Apple page set
        location = self.authorize.headers["Location"] or "" if self.authorize.status == 302 else ""
        if location.startswith(self.params["redirect_uri"] + "?"):
            self.redirect = query_of(location)  # answered without a page (session), or an error
            return
        if not location.startswith("/appleid/"):
            return
        self.apple = fetch("GET", self.authorize.headers["Location"])
        self.form = only_form(self.apple)
        self.fields = dict(self.form["fields"])
        self.callback = fetch("POST", self.form["action"], form=self.form["fields"])
        for line in self.callback.headers.get_all("Set-Cookie") or []:
            name, _, rest = line.partition("=")
            if name == "tsauth_session":
                self.session = rest.split(";")[0]
        if self.callback.status == 302:
            location = self.callback.headers["Location"]
            assert location.startswith(self.params["redirect_uri"] + "?"), location
            self.redirect = query_of(location)

    def exchange(self, **over):
        """The token request for this flow's code; a value None in `over` leaves a field out."""
        form = {"grant_type": "authorization_code", "client_id": PUBLIC, "code": self.redirect["code"],
                "redirect_uri": self.params["redirect_uri"], "code_verifier": self.verifier}
        form.update(over)
        return token({k: v for k, v in form.items() if v is not None})

    def tokens(self):
        assert self.redirect and "code" in self.redirect, (self.authorize.status, self.redirect)
        assert self.redirect["state"] == self.params["state"], self.redirect
        a = self.exchange()
        assert a.status == 200, (a.status, a.body)
        return a.json()


def jwks():
    from joserfc.jwk import KeySet
    return KeySet.import_key_set(call("GET", "/.well-known/jwks.json").json())


def id_token_problems(tok, *, nonce=None, client_id=PUBLIC, max_age=None, leeway=60, keys=None, acr_values=None):
    """What an Auth0.swift-like validator (IDTokenValidator, see LINUX-SIGNIN.md 1.2) rejects
    in `tok`, as a set of check names; empty when the token is good."""
    from joserfc import jws
    from joserfc.errors import JoseError
    head, payload, _ = tok.split(".")
    header, claims = b64url_json(head), b64url_json(payload)
    keys = keys or jwks()
    problems = set()
    if header.get("alg") != "RS256":
        problems.add("alg")
    else:
        key = next((k for k in keys.keys if header.get("kid") and k.kid == header["kid"]), None)
        if key is None:
            problems.add("kid")
        else:
            try:
                jws.deserialize_compact(tok, key, algorithms=["RS256"])
            except JoseError:
                problems.add("signature")
    now = time.time()
    if claims.get("iss") != BASE + "/":
        problems.add("iss")
    if not claims.get("sub"):
        problems.add("sub")
    aud = claims.get("aud")
    auds = aud if isinstance(aud, list) else [aud]
    if client_id not in auds:
        problems.add("aud")
    if not isinstance(claims.get("exp"), int) or claims["exp"] + leeway <= now:
        problems.add("exp")
    if not isinstance(claims.get("iat"), int):
        problems.add("iat")
    if nonce is not None and claims.get("nonce") != nonce:
        problems.add("nonce")
    if len(auds) > 1 and claims.get("azp") != client_id:
        problems.add("azp")
    if max_age is not None and (not isinstance(claims.get("auth_time"), int)
                                or claims["auth_time"] + int(max_age) + leeway < now):
        problems.add("auth_time")
    if acr_values is not None and claims.get("acr") not in acr_values.split():
        problems.add("acr")
    return problems


def claims_of(tok):
    return b64url_json(tok.split(".")[1])


def oidc(method, name, js=None):
    return ctl(method, "oidc" + ("/" + name if name else ""), js)


def set_redirect_uris(uris, any_port=None, client=PUBLIC):
    body = {"client_id": client, "redirect_uris": uris}
    if any_port is not None:
        body["any_loopback_port"] = any_port
    return oidc("POST", "redirect_uris", body)


@check
def device_grant_pending_slow_down_approved_denied_expired():
    ctl("POST", "reset")
    conf = call("GET", "/.well-known/openid-configuration").json()
    assert conf["device_authorization_endpoint"] == BASE + "/oauth/device/code", conf
    assert "pushed_authorization_request_endpoint" not in conf, "PAR is advertised only when switched on"

    def start():
        answer = call("POST", "/oauth/device/code", form={"client_id": PUBLIC, "scope": "openid offline_access"})
        assert answer.status == 200, answer.text
        body = answer.json()
        assert body["verification_uri"] == BASE + "/activate" and body["interval"] == 1, body
        assert body["verification_uri_complete"].endswith("user_code=" + body["user_code"]), body
        return body

    def poll(code):
        return call("POST", "/oauth/token", form={"grant_type": "urn:ietf:params:oauth:grant-type:device_code",
                                                  "device_code": code, "client_id": PUBLIC})

    body = start()
    assert poll(body["device_code"]).json()["error"] == "authorization_pending"
    assert poll(body["device_code"]).json()["error"] == "slow_down", "a poll sooner than the interval"
    ctl("POST", "device", {"approve": body["user_code"], "apple_id": "001.device"})
    granted = poll(body["device_code"])
    assert granted.status == 200 and granted.json()["refresh_token"] and granted.json()["id_token"], granted.text
    assert poll(body["device_code"]).json()["error"] == "invalid_grant", "a device code works once"
    denied = start()
    ctl("POST", "device", {"deny": denied["user_code"]})
    assert poll(denied["device_code"]).json()["error"] == "access_denied"
    expired = start()
    ctl("POST", "device", {"expire": expired["user_code"]})
    assert poll(expired["device_code"]).json()["error"] == "expired_token"
    assert stats()["device_grants"] == 1 and stats()["device_too_early_polls"] == 1, stats()
    ctl("POST", "reset")


@check
def par_pushes_and_authorize_takes_request_uri_once():
    ctl("POST", "reset")
    form = {"client_id": PUBLIC, "response_type": "code", "redirect_uri": "http://127.0.0.1:53180/callback",
            "scope": "openid offline_access", "state": "s1", "nonce": "n1", "connection": "apple",
            "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGwSMQw-cM", "code_challenge_method": "S256"}
    assert call("POST", "/oauth/par", form=form).status == 400, "PAR is off by default"
    ctl("POST", "config", {"par": True, "require_par": True})
    try:
        par_round_trip(form)
    finally:
        ctl("POST", "reset")


def par_round_trip(form):
    conf = call("GET", "/.well-known/openid-configuration").json()
    assert conf["pushed_authorization_request_endpoint"] == BASE + "/oauth/par", conf
    assert conf["require_pushed_authorization_requests"] is True
    pushed = call("POST", "/oauth/par", form=form)
    assert pushed.status == 201, pushed.text
    uri = pushed.json()["request_uri"]
    assert uri.startswith("urn:ietf:params:oauth:request_uri:") and pushed.json()["expires_in"] == 60
    query = urllib.parse.urlencode({"client_id": PUBLIC, "request_uri": uri})
    first = call("GET", "/authorize?" + query)
    assert first.status == 302 and "/appleid/auth/authorize" in first.headers["Location"], first.status
    assert call("GET", "/authorize?" + query).status == 400, "a request_uri works once"
    assert call("GET", "/authorize?" + urllib.parse.urlencode(form)).status == 400, "PAR required"
    assert ctl("GET", "device")["authorize_log"][0] == ["client_id", "request_uri"]


@check
def oidc_discovery_and_jwks():
    conf = call("GET", "/.well-known/openid-configuration").json()
    assert conf["issuer"] == BASE + "/", conf["issuer"]
    assert conf["authorization_endpoint"] == BASE + "/authorize"
    assert conf["token_endpoint"] == BASE + "/oauth/token"
    assert conf["jwks_uri"] == BASE + "/.well-known/jwks.json"
    assert conf["code_challenge_methods_supported"] == ["S256"]
    assert conf["id_token_signing_alg_values_supported"] == ["RS256"]
    keys = call("GET", "/.well-known/jwks.json").json()["keys"]
    assert len(keys) == 1, keys
    k = keys[0]
    assert k["kty"] == "RSA" and k["alg"] == "RS256" and k["use"] == "sig" and k["kid"], k
    assert "d" not in k and "p" not in k, "private parts in the JWKS"
    state = oidc("GET", "")
    assert state["kid"] == k["kid"] and state["issuer"] == BASE + "/"
    assert state["default_redirect_uris"] == [f"http://127.0.0.1:{p}/callback" for p in (53180, 53181, 53182, 53183)]
    assert state["clients"][PUBLIC]["redirect_uris"] == state["default_redirect_uris"]


@check
def oidc_code_flow_with_pkce():
    before = stats()
    f = Flow()
    assert f.authorize.status == 302 and f.apple.status == 200 and f.callback.status == 302
    assert set(f.redirect) == {"code", "state"} and f.redirect["state"] == f.params["state"]
    j = f.tokens()
    SEEN_TOKENS.extend([f.redirect["code"], j["id_token"]])
    assert j["token_type"] == "Bearer" and j["expires_in"] == 3600 and j["scope"] == FULL_SCOPE, j
    assert j["access_token"] and j["refresh_token"] and j["id_token"], j
    header = b64url_json(j["id_token"].split(".")[0])
    assert header["alg"] == "RS256" and header["kid"] == oidc("GET", "")["kid"], header
    assert id_token_problems(j["id_token"], nonce=f.params["nonce"]) == set()
    c = claims_of(j["id_token"])
    assert c["iss"] == BASE + "/" and c["aud"] == PUBLIC and "azp" not in c, c
    assert c["sub"] == "apple|" + DEFAULT_APPLE_ID, c["sub"]
    assert c["nonce"] == f.params["nonce"] and c["exp"] > time.time() + 3600, c
    assert abs(c["auth_time"] - time.time()) < 30 and abs(c["iat"] - time.time()) < 30, c
    i = introspect(j["refresh_token"])
    assert i["active"] and i["sub"] == DEFAULT_APPLE_ID and i["scope"] == FULL_SCOPE, i
    # the refresh grant rotates as before and answers a fresh, valid ID token (no nonce)
    a = refresh(j["refresh_token"])
    assert a.status == 200, a.body
    r = a.json()
    assert r["refresh_token"] != j["refresh_token"] and id_token_problems(r["id_token"]) == set()
    rc = claims_of(r["id_token"])
    assert rc["sub"] == c["sub"] and rc["auth_time"] == c["auth_time"] and "nonce" not in rc, rc
    assert "name" not in rc and "email" not in rc, rc
    # without offline_access: no refresh token; without openid: no ID token
    j2 = Flow(scope="openid email").tokens()
    assert "refresh_token" not in j2 and j2["scope"] == "openid email" and j2["id_token"], j2
    j3 = Flow(scope="offline_access read:items bogus").tokens()
    assert "id_token" not in j3 and j3["refresh_token"] and j3["scope"] == "offline_access read:items", j3
    after = stats()
    assert after["authorizations"] - before["authorizations"] == 3, (before, after)
    assert after["code_grants"] - before["code_grants"] == 3, (before, after)


@check
def oidc_pkce_errors():
    f = Flow()
    other, _ = pkce()
    a = f.exchange(code_verifier=other)  # a well-formed verifier of another challenge
    assert a.status == 400 and a.json()["error"] == "invalid_grant", a.body
    a = f.exchange()  # the code was burnt by the failed attempt
    assert a.status == 400 and a.json()["error"] == "invalid_grant", a.body
    f = Flow()
    a = f.exchange(code_verifier=None)  # public client without a verifier
    assert a.status == 400 and a.json()["error"] == "invalid_request", a.body
    f = Flow()
    a = f.exchange(code_verifier="")
    assert a.status == 400 and a.json()["error"] == "invalid_request", a.body
    f = Flow()
    a = f.exchange(code_verifier="short")
    assert a.status == 400 and a.json()["error"] == "invalid_request", a.body
    # /authorize: the public client must send an S256 challenge; errors go to the app
    for over, why in (({"code_challenge": None, "code_challenge_method": None}, "code_challenge"),
                      ({"code_challenge_method": None}, "S256"),
                      ({"code_challenge_method": "plain"}, "S256")):
        f = Flow(**over)
        loc = f.authorize.headers["Location"]
        q = query_of(loc)
        assert f.authorize.status == 302 and loc.startswith(DEFAULT_CALLBACK + "?"), loc
        assert q["error"] == "invalid_request" and why in q["error_description"], q
        assert q["state"] == f.params["state"] and "code" not in q, q


@check
def oidc_code_single_use_and_bound():
    f = Flow()
    j = f.tokens()
    a = f.exchange()  # the same code again: refused, and its tokens are revoked
    assert a.status == 400 and a.json()["error"] == "invalid_grant", a.body
    i = introspect(j["refresh_token"])
    assert not i["active"] and i["family_revoked"] and i["reason"] == "code_reuse", i
    assert not introspect(j["access_token"])["active"]
    f = Flow()
    a = f.exchange(redirect_uri="http://127.0.0.1:53181/callback")  # another registered URI
    assert a.status == 400 and a.json()["error"] == "invalid_grant", a.body
    f = Flow()
    a = f.exchange(redirect_uri=None)
    assert a.status == 400 and a.json()["error"] == "invalid_grant", a.body
    f = Flow()
    a = f.exchange(client_id=CONF, client_secret=SECRET)  # issued to another client
    assert a.status == 400 and a.json()["error"] == "invalid_grant", a.body
    assert f.exchange().status == 200  # the wrong client did not burn it
    f = Flow()
    a = f.exchange(code="never-issued")
    assert a.status == 400 and a.json()["error"] == "invalid_grant", a.body
    # the confidential client may run the code flow with its secret and without PKCE
    f = Flow(client_id=CONF, code_challenge=None, code_challenge_method=None)
    a = f.exchange(client_id=CONF, client_secret=SECRET, code_verifier=None)
    assert a.status == 200 and a.json()["id_token"], a.body
    assert id_token_problems(a.json()["id_token"], client_id=CONF, nonce=f.params["nonce"]) == set()


def expect_error_page(params, title_part):
    a = fetch("GET", "/authorize?" + urllib.parse.urlencode(params))
    assert a.status == 400 and "Location" not in a.headers, (a.status, dict(a.headers))
    assert a.headers["Content-Type"].startswith("text/html") and title_part in a.body.decode(), a.body
    return a


@check
def oidc_exact_redirect_matching():
    _, challenge = pkce()
    p = authorize_params(challenge)
    for uri in ("http://127.0.0.1:53184/callback",  # unregistered port
                "http://127.0.0.1:53180/callback/",  # trailing slash
                "http://localhost:53180/callback",  # localhost is not 127.0.0.1
                "http://[::1]:53180/callback",
                "http://127.0.0.1:53180/Callback",
                "http://127.0.0.1:53180/callback?x=1",
                "https://127.0.0.1:53180/callback",
                "http://127.0.0.1/callback"):
        expect_error_page(dict(p, redirect_uri=uri), "Callback URL mismatch")
    expect_error_page({k: v for k, v in p.items() if k != "redirect_uri"}, "redirect_uri")
    expect_error_page(dict(p, client_id="nobody"), "Unknown client")
    for port in (53180, 53181, 53182, 53183):
        assert Flow(redirect_uri=f"http://127.0.0.1:{port}/callback").redirect, port
    try:
        set_redirect_uris(["http://127.0.0.1:40001/cb", "http://[::1]:40002/callback"])
        expect_error_page(dict(p, redirect_uri=DEFAULT_CALLBACK), "Callback URL mismatch")
        assert Flow(redirect_uri="http://127.0.0.1:40001/cb").redirect
        assert Flow(redirect_uri="http://[::1]:40002/callback").redirect
        expect_error_page(dict(p, redirect_uri="http://127.0.0.1:40002/cb"), "Callback URL mismatch")
        set_redirect_uris(["http://127.0.0.1:40001/cb"], any_port=True)  # RFC 8252 7.3
        assert Flow(redirect_uri="http://127.0.0.1:61234/cb").redirect
        expect_error_page(dict(p, redirect_uri="http://127.0.0.1:61234/other"), "Callback URL mismatch")
        expect_error_page(dict(p, redirect_uri="http://localhost:61234/cb"), "Callback URL mismatch")
        a = call("POST", "/__test/oidc/redirect_uris", js={"redirect_uris": "http://x"})
        assert a.status == 400, a.body
    finally:
        set_redirect_uris(oidc("GET", "")["default_redirect_uris"])
    # once client and redirect_uri are trusted, errors go to the app with the state
    for over, error in (({"response_type": "token"}, "unsupported_response_type"),
                        ({"prompt": "none"}, "login_required"),
                        ({"connection": "google-oauth2"}, "invalid_request"),
                        ({"max_age": "-1"}, "invalid_request"),
                        ({"response_mode": "form_post"}, "invalid_request")):
        f = Flow(**over)
        assert f.authorize.status == 302, (over, f.authorize.status, f.authorize.body)
        q = query_of(f.authorize.headers["Location"])
        assert q["error"] == error and q["state"] == f.params["state"] and "code" not in q, (over, q)


@check
def oidc_form_post_and_login_pages():
    f = Flow()
    assert f.authorize.headers["Location"].startswith("/appleid/auth/authorize?")
    apple_q = query_of(f.authorize.headers["Location"])
    assert apple_q["response_mode"] == "form_post" and apple_q["redirect_uri"] == BASE + "/login/callback"
    body = f.apple.body.decode()
    assert f.form["method"] == "post" and f.form["action"] == BASE + "/login/callback", f.form
    assert "<script>document.forms[0].submit();</script>" in body and "<noscript><button" in body, body
    assert set(f.fields) >= {"state", "code"} and f.fields["state"] == apple_q["state"], f.fields
    assert f.callback.status == 302 and f.redirect["code"]
    # the Apple state is single use
    again = fetch("POST", "/login/callback", form=f.form["fields"])
    assert again.status == 400 and "Location" not in again.headers, again.status
    assert fetch("GET", f.authorize.headers["Location"]).status == 400
    # no connection: a login page whose form goes back to /authorize with connection=apple
    verifier, challenge = pkce()
    params = authorize_params(challenge, connection=None)
    a = fetch("GET", "/authorize?" + urllib.parse.urlencode(params))
    form = only_form(a)
    assert "<script>" not in a.body.decode() and form["method"] == "get" and form["action"] == "/authorize"
    assert dict(form["fields"]) == dict(params, connection="apple"), form["fields"]


@check
def oidc_name_and_email_on_first_sign_in_only():
    apple_id = "001234." + os.urandom(16).hex() + ".0042"
    oidc("POST", "next_user", {"apple_id": apple_id, "name": "Ada Lovelace", "email": "ada@example.com"})
    f = Flow()
    assert "user" in f.fields and json.loads(f.fields["user"]) == {
        "name": {"firstName": "Ada", "lastName": "Lovelace"}, "email": "ada@example.com"}, f.fields
    c = claims_of(f.tokens()["id_token"])
    assert c["sub"] == "apple|" + apple_id, c
    assert (c["name"], c["given_name"], c["family_name"]) == ("Ada Lovelace", "Ada", "Lovelace"), c
    assert c["email"] == "ada@example.com" and c["email_verified"] is True, c
    f = Flow(login_hint=apple_id)  # the same user again: Apple sends no `user`
    assert "user" not in f.fields, f.fields
    c = claims_of(f.tokens()["id_token"])
    assert c["sub"] == "apple|" + apple_id and not {"name", "given_name", "email"} & set(c), c
    # the user revoked the app at Apple: the next sign-in is a first one again
    oidc("POST", "next_user", {"apple_id": apple_id, "first_sign_in": True})
    c = claims_of(Flow(scope="openid email").tokens()["id_token"])  # no `profile`: no name
    assert c["email"] == "ada@example.com" and "name" not in c, c
    # next_user is used once; then the default user (whose first sign-in may be over)
    oidc("POST", "next_user", {"apple_id": apple_id})
    assert claims_of(Flow().tokens()["id_token"])["sub"] == "apple|" + apple_id
    assert claims_of(Flow().tokens()["id_token"])["sub"] == "apple|" + DEFAULT_APPLE_ID
    # login_hint wins and leaves next_user armed
    oidc("POST", "next_user", {"apple_id": "001.armed"})
    assert claims_of(Flow(login_hint="001.hinted").tokens()["id_token"])["sub"] == "apple|001.hinted"
    assert oidc("GET", "")["next_user"] == "001.armed"
    assert claims_of(Flow().tokens()["id_token"])["sub"] == "apple|001.armed"
    bad = call("POST", "/__test/oidc/next_user", js={"apple_id": "apple|x"})
    assert bad.status == 400, bad.body


@check
def end_session_endpoints_end_the_browser_session():
    assert call("GET", "/.well-known/openid-configuration").json()["end_session_endpoint"] == BASE + "/oidc/logout"
    user = "001.endsession." + os.urandom(4).hex()
    f = Flow(login_hint="apple|" + user)
    id_token = f.tokens()["id_token"]
    assert Flow(cookie=f.session).apple is None, "the session answers before the logout"
    # OIDC: a return address that is not registered is a page, and the session stays
    bad = fetch("GET", "/oidc/logout?" + urllib.parse.urlencode(
        {"client_id": PUBLIC, "post_logout_redirect_uri": "http://127.0.0.1:9/elsewhere", "state": "s"}), cookie=f.session)
    assert bad.status == 400 and "Location" not in bad.headers, bad.status
    a = fetch("GET", "/oidc/logout?" + urllib.parse.urlencode(
        {"client_id": PUBLIC, "id_token_hint": id_token, "post_logout_redirect_uri": DEFAULT_CALLBACK, "state": "s1"}),
        cookie=f.session)
    assert a.status == 302 and a.headers["Location"] == DEFAULT_CALLBACK + "?state=s1", (a.status, a.headers)
    assert any(line.startswith("tsauth_session=;") for line in a.headers.get_all("Set-Cookie") or []), a.headers
    assert oidc("GET", "")["end_sessions"][-1] == {"kind": "oidc", "id_token_hint_sub": "apple|" + user,
                                                  "state": True, "ended": True}
    assert Flow(cookie=f.session).apple is not None, "the login page after the logout"
    # Auth0's /v2/logout: returnTo as given (its query kept), no state of its own
    g = Flow(login_hint="apple|" + user)
    b = fetch("GET", "/v2/logout?" + urllib.parse.urlencode(
        {"client_id": PUBLIC, "returnTo": DEFAULT_CALLBACK + "?state=s2"}), cookie=g.session)
    assert b.status == 302 and b.headers["Location"] == DEFAULT_CALLBACK + "?state=s2", (b.status, b.headers)
    assert oidc("GET", "")["end_sessions"][-1] == {"kind": "auth0", "id_token_hint_sub": None, "state": False,
                                                  "ended": True}
    assert Flow(cookie=g.session).apple is not None


@check
def oidc_browser_session_prompt_and_max_age():
    user = "001.session." + os.urandom(4).hex()
    f = Flow(login_hint="apple|" + user)
    assert f.apple is not None and f.session, "a login at the Apple page sets the session cookie"
    assert f.fields["prefilled_login_hint"] == user, f.fields  # the hint is pre-filled
    c = claims_of(f.tokens()["id_token"])
    assert c["sub"] == "apple|" + user and "acr" not in c, c
    last = oidc("GET", "")["authorizations"][-1]
    assert last == {"prompt": None, "login_hint": "apple|" + user, "max_age": None, "acr_values": None,
                    "login_form": True}, last
    # the session answers without a page, with the login's auth_time
    before = stats()["silent_authorizations"]
    g = Flow(cookie=f.session)
    assert g.apple is None and "code" in g.redirect and g.redirect["state"] == g.params["state"], g.redirect
    assert claims_of(g.tokens()["id_token"])["auth_time"] == c["auth_time"]
    assert oidc("GET", "")["authorizations"][-1]["login_form"] is False
    assert stats()["silent_authorizations"] == before + 1
    # prompt=none: the session answers; without one, login_required to the app with the state
    h = Flow(cookie=f.session, prompt="none")
    assert h.apple is None and "code" in h.redirect, h.redirect
    for over in ({"prompt": "none"}, {"prompt": "none", "login_hint": "001.nobody"}):
        n = Flow(**over)
        assert n.redirect["error"] == "login_required" and n.redirect["state"] == n.params["state"], n.redirect
        assert "code" not in n.redirect
    for prompt in ("none login", "bogus"):
        assert Flow(cookie=f.session, prompt=prompt).redirect["error"] == "invalid_request", prompt
    # prompt=login, select_account, consent: the login page again over a live session
    for prompt in ("login", "select_account", "consent"):
        p = Flow(cookie=f.session, prompt=prompt, login_hint=user)
        assert p.apple is not None and p.session, prompt
        assert oidc("GET", "")["authorizations"][-1]["prompt"] == prompt
    fresh = claims_of(p.tokens()["id_token"])["auth_time"]
    assert abs(fresh - time.time()) < 5, fresh
    # max_age: an older session needs a login (fresh auth_time); a young enough one answers
    oidc("POST", "sessions", {"age": 1000})
    m = Flow(cookie=p.session, max_age="60")
    assert m.apple is not None, "an aged session is not enough for max_age=60"
    assert abs(claims_of(m.tokens()["id_token"])["auth_time"] - time.time()) < 5
    y = Flow(cookie=p.session, max_age="100000")
    assert y.apple is None, "the session is young enough"
    tok = y.tokens()["id_token"]
    assert claims_of(tok)["auth_time"] <= time.time() - 999
    assert id_token_problems(tok, nonce=y.params["nonce"], max_age="100000") == set()
    assert id_token_problems(tok, nonce=y.params["nonce"], max_age="60") == {"auth_time"}
    # another user hinted: a login page; every session ended: the cookie no longer answers
    assert Flow(cookie=p.session, login_hint="001.other").apple is not None
    oidc("DELETE", "sessions")
    assert oidc("GET", "")["sessions"] == []
    assert Flow(cookie=p.session, prompt="none").redirect["error"] == "login_required"
    assert call("POST", "/__test/oidc/sessions", js={"age": -1}).status == 400


@check
def oidc_acr_values_and_acr():
    f = Flow(acr_values="urn:mfa urn:pwd")
    assert claims_of(f.tokens()["id_token"])["acr"] == "urn:mfa"
    try:
        oidc("POST", "acr", {"supported": ["urn:pwd"]})
        g = Flow(acr_values="urn:mfa urn:pwd")
        assert claims_of(g.tokens()["id_token"])["acr"] == "urn:pwd"
        h = Flow(acr_values="urn:mfa")
        assert claims_of(h.tokens()["id_token"])["acr"] == "urn:tokenstore:test:password"
    finally:
        oidc("POST", "acr", {"supported": None})
    # a session of acr urn:pwd answers a request for it, not one for urn:mfa only
    assert Flow(cookie=g.session, acr_values="urn:mfa").apple is not None
    s = Flow(cookie=g.session, acr_values="urn:pwd")
    assert s.apple is None and claims_of(s.tokens()["id_token"])["acr"] == "urn:pwd"
    assert call("POST", "/__test/oidc/acr", js={"supported": "urn:x"}).status == 400


@check
def oidc_audience_gives_azp():
    f = Flow(audience="https://api.example.com/")
    j = f.tokens()
    c = claims_of(j["id_token"])
    assert c["aud"] == [PUBLIC, "https://api.example.com/"] and c["azp"] == PUBLIC, c
    assert id_token_problems(j["id_token"], nonce=f.params["nonce"]) == set()
    c = claims_of(refresh(j["refresh_token"]).json()["id_token"])
    assert c["aud"] == [PUBLIC, "https://api.example.com/"] and c["azp"] == PUBLIC, c


ID_TOKEN_SWITCHES = {  # switch -> (extra /authorize params, what the validator must reject)
    "wrong_aud": ({}, {"aud"}),
    "wrong_iss": ({}, {"iss"}),
    "expired": ({}, {"exp"}),
    "bad_signature": ({}, {"signature"}),
    "unknown_kid": ({}, {"kid"}),
    "missing_kid": ({}, {"kid"}),
    "alg_none": ({}, {"alg"}),
    "alg_hs256": ({}, {"alg"}),
    "wrong_nonce": ({}, {"nonce"}),
    "missing_nonce": ({}, {"nonce"}),
    "missing_sub": ({}, {"sub"}),
    "missing_azp": ({"audience": "https://api.example.com/"}, {"azp"}),
    "old_auth_time": ({"max_age": "3600"}, {"auth_time"}),
    "missing_auth_time": ({"max_age": "3600"}, {"auth_time"}),
    "wrong_acr": ({"acr_values": "urn:tokenstore:test:mfa"}, {"acr"}),
}


@check
def oidc_every_bad_id_token_switch():
    names = set(oidc("GET", "")["id_token_faults"])
    assert names == set(ID_TOKEN_SWITCHES), names ^ set(ID_TOKEN_SWITCHES)
    keys = jwks()
    pem = keys.keys[0].as_pem(private=False)
    for name, (over, expected) in ID_TOKEN_SWITCHES.items():
        oidc("POST", "next_id_token", {"fault": name})
        f = Flow(**over)
        tok = f.tokens()["id_token"]
        got = id_token_problems(tok, nonce=f.params["nonce"], max_age=over.get("max_age"), keys=keys,
                                acr_values=over.get("acr_values"))
        assert got == expected, (name, got, claims_of(tok), b64url_json(tok.split(".")[0]))
        header, claims = b64url_json(tok.split(".")[0]), claims_of(tok)
        if name == "wrong_iss":
            assert claims["iss"] == BASE, claims  # only the trailing slash is missing
        if name == "alg_none":
            assert header["alg"] == "none" and tok.endswith("."), tok
        if name == "alg_hs256":  # keyed with the public key's PEM: the key-confusion token
            head, payload, sig = tok.split(".")
            mac = hmac.new(pem, f"{head}.{payload}".encode(), hashlib.sha256).digest()
            assert header["alg"] == "HS256" and b64url(mac) == sig
        if name == "unknown_kid":
            assert header["kid"] not in {k.kid for k in keys.keys}
        # used once: the next sign-in is good again
        g = Flow(**over)
        assert id_token_problems(g.tokens()["id_token"], nonce=g.params["nonce"], max_age=over.get("max_age"),
                                 keys=keys, acr_values=over.get("acr_values")) == set(), name
    oidc("POST", "next_id_token", {"fault": "wrong_aud", "value": "someone-else"})
    assert claims_of(Flow().tokens()["id_token"])["aud"] == "someone-else"
    oidc("POST", "next_id_token", {"fault": "expired"})
    oidc("DELETE", "next")
    assert oidc("GET", "")["next_id_token"] is None
    assert call("POST", "/__test/oidc/next_id_token", js={"fault": "nope"}).status == 400


@check
def oidc_every_bad_redirect_switch():
    assert set(oidc("GET", "")["redirect_faults"]) == {"wrong_state", "access_denied", "no_redirect",
                                                       "oauth_error", "wrong_iss_param"}
    oidc("POST", "next_redirect", {"fault": "wrong_state"})
    f = Flow()
    assert f.redirect["state"] != f.params["state"] and f.redirect["code"], f.redirect
    assert f.exchange().status == 200  # the code itself is good
    oidc("POST", "next_redirect", {"fault": "access_denied"})
    f = Flow()
    assert f.fields.get("error") == "user_cancelled_authorize" and "code" not in f.fields, f.fields
    assert f.redirect["error"] == "access_denied" and f.redirect["state"] == f.params["state"], f.redirect
    assert f.redirect["error_description"] and "code" not in f.redirect, f.redirect
    oidc("POST", "next_redirect", {"fault": "access_denied", "error_description": "User did not consent."})
    assert Flow().redirect["error_description"] == "User did not consent."
    assert call("POST", "/__test/oidc/next_redirect",
                js={"fault": "access_denied", "error_description": 'say "hi"'}).status == 400
    before = stats()
    oidc("POST", "next_redirect", {"fault": "no_redirect"})
    f = Flow()
    assert f.callback.status == 200 and "Location" not in f.callback.headers and f.redirect is None
    forms = useragent.Forms()  # nothing for a browser to follow
    forms.feed(f.callback.body.decode())
    assert not forms.forms and stats()["authorizations"] == before["authorizations"]
    assert Flow().redirect["state"]  # used once
    oidc("POST", "next_redirect", {"fault": "oauth_error", "error": "unauthorized_client"})
    f = Flow()
    assert f.redirect["error"] == "unauthorized_client" and "code" not in f.redirect, f.redirect
    assert f.redirect["state"] == f.params["state"], f.redirect
    oidc("POST", "next_redirect", {"fault": "wrong_iss_param"})
    f = Flow()
    assert f.redirect["iss"] == "https://attacker.example/" and f.redirect["code"], f.redirect


@check
def provider_profiles_route_their_own_paths():
    base = BASE + "/"
    for name, discovery, token_path in [
            ("okta", "/oauth2/default/.well-known/openid-configuration", "/oauth2/default/v1/token"),
            ("keycloak", "/realms/test/.well-known/openid-configuration", "/realms/test/protocol/openid-connect/token"),
            ("entra", "/common/v2.0/.well-known/openid-configuration", "/common/oauth2/v2.0/token"),
            ("google", "/.well-known/openid-configuration", "/token")]:
        ctl("POST", "config", {"profile": name})
        doc = call("GET", discovery).json()
        assert doc["token_endpoint"] == BASE + token_path, (name, doc)
        assert call("POST", "/oauth/token").status == 404, name  # Auth0's path is not there
        assert ("revocation_endpoint" in doc) == (name in ("keycloak", "google")), (name, doc)
    ctl("POST", "config", {"profile": "entra"})
    assert call("GET", "/common/v2.0/.well-known/openid-configuration").json()["issuer"] == base + "{tenantid}/v2.0"
    assert call("POST", "/__test/config", js={"profile": "nope"}).status == 400
    ctl("POST", "reset")
    assert call("GET", "/.well-known/openid-configuration").json()["issuer"] == base


@check
def oidc_native_exchange_id_token():
    apple_id = "000555." + os.urandom(16).hex() + ".0555"
    code = ctl("POST", "apple/code", {"sub": apple_id, "email": "n@example.com"})["code"]
    a = token({"grant_type": EXCHANGE, "subject_token_type": APPLE, "subject_token": code,
               "client_id": PUBLIC, "scope": FULL_SCOPE,
               "user_profile": json.dumps({"name": {"firstName": "Nat", "lastName": "Ive"}})})
    assert a.status == 200, a.body
    tok = a.json()["id_token"]
    assert id_token_problems(tok) == set()
    c = claims_of(tok)
    assert c["sub"] == "apple|" + apple_id and "nonce" not in c and c["aud"] == PUBLIC, c
    assert c["name"] == "Nat Ive" and c["email"] == "n@example.com", c
    c = claims_of(sign_in(apple_id, FULL_SCOPE)["id_token"])
    assert "name" not in c and "email" not in c, c
    code = ctl("POST", "apple/code", {"sub": apple_id})["code"]
    a = token({"grant_type": EXCHANGE, "subject_token_type": APPLE, "subject_token": code,
               "client_id": PUBLIC, "user_profile": "{not json"})
    assert a.status == 400 and a.json()["error"] == "invalid_request", a.body
    oidc("POST", "next_id_token", {"fault": "bad_signature"})
    assert id_token_problems(sign_in(apple_id, "openid")["id_token"]) == {"signature"}


@check
def oidc_key_rotation_and_reset():
    kid = oidc("GET", "")["kid"]
    old = Flow().tokens()["id_token"]
    keys = call("POST", "/__test/oidc/rotate_key", js={}).json()["keys"]
    new_kid = oidc("GET", "")["kid"]
    assert new_kid != kid and [k["kid"] for k in keys] == [new_kid, kid], keys
    assert id_token_problems(old) == set()  # the old key is still published
    new = Flow().tokens()["id_token"]
    assert b64url_json(new.split(".")[0])["kid"] == new_kid and id_token_problems(new) == set()
    call("POST", "/__test/oidc/rotate_key", js={"keep_old": False})
    assert len(call("GET", "/.well-known/jwks.json").json()["keys"]) == 1
    assert id_token_problems(old) == {"kid"}
    kid = oidc("GET", "")["kid"]
    oidc("POST", "next_id_token", {"fault": "expired"})
    oidc("POST", "next_user", {"apple_id": "001.reset"})
    set_redirect_uris(["http://127.0.0.1:1/x"])
    ctl("POST", "reset")
    st = oidc("GET", "")
    assert st["kid"] == kid, "reset must keep the signing key"
    assert st["next_id_token"] is None and st["next_user"] is None and st["apple_users"] == {}, st
    assert st["clients"][PUBLIC]["redirect_uris"] == st["default_redirect_uris"]


# ---- the scripted user agent ---------------------------------------------------------------


class Listener:
    """The app's loopback receiver: records each request, answers a page without a form."""

    def __init__(self):
        import http.server
        hits = self.hits = []

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                hits.append(self.path)
                body = b"<html><body>You can close this window.</body></html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        self.uri = f"http://127.0.0.1:{self.port}/callback"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# ---- DPoP (RFC 9449, dpop.py) ----------------------------------------------------------


class Key:
    """A P-256 key a client holds, making DPoP proofs as RFC 9449 4 says (r||s signatures)."""

    def __init__(self):
        from cryptography.hazmat.primitives.asymmetric import ec
        self.private = ec.generate_private_key(ec.SECP256R1())
        n = self.private.public_key().public_numbers()
        self.jwk = {"kty": "EC", "crv": "P-256", "x": b64url(n.x.to_bytes(32, "big")),
                    "y": b64url(n.y.to_bytes(32, "big"))}
        canonical = json.dumps({k: self.jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"))
        self.jkt = b64url(hashlib.sha256(canonical.encode()).digest())

    def proof(self, htu=None, htm="POST", nonce=None, iat=None, jti=None, ath=None, typ="dpop+jwt",
              der=False, jwk=None):
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
        header = {"typ": typ, "alg": "ES256", "jwk": jwk or self.jwk}
        claims = {"jti": jti or b64url(os.urandom(16)), "htm": htm, "htu": htu or BASE + "/oauth/token",
                  "iat": int(time.time()) if iat is None else iat}
        if nonce is not None:
            claims["nonce"] = nonce
        if ath is not None:
            claims["ath"] = ath
        signing_input = (b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode()))
        sig = self.private.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        if not der:
            r, s_ = decode_dss_signature(sig)
            sig = r.to_bytes(32, "big") + s_.to_bytes(32, "big")
        return signing_input + "." + b64url(sig)


def dpop_state():
    return ctl("GET", "dpop")


def dpop_token(form, key, **proof):
    """A token request with a proof carrying the server's current nonce (unless given)."""
    proof.setdefault("nonce", dpop_state()["nonce"])
    return token(form, headers={"DPoP": key.proof(**proof)})


def dpop_sign_in(key, sub="001.dpop"):
    code = ctl("POST", "apple/code", {"sub": sub})["code"]
    form = {"grant_type": EXCHANGE, "subject_token_type": APPLE, "subject_token": code,
            "client_id": PUBLIC, "scope": "openid offline_access"}
    a = dpop_token(form, key)
    assert a.status == 200, (a.status, a.body)
    return a


def refresh_form(rt):
    return {"grant_type": "refresh_token", "client_id": PUBLIC, "refresh_token": rt}


@check
def dpop_nonce_dance_binding_and_token_type():
    ctl("POST", "reset")
    key = Key()
    code = ctl("POST", "apple/code", {"sub": "001.dpop"})["code"]
    form = {"grant_type": EXCHANGE, "subject_token_type": APPLE, "subject_token": code,
            "client_id": PUBLIC, "scope": "openid offline_access"}
    # no nonce: 400 use_dpop_nonce with the nonce to use, and the code is not consumed
    a = token(form, headers={"DPoP": key.proof()})
    assert a.status == 400 and a.json()["error"] == "use_dpop_nonce", (a.status, a.body)
    nonce = a.headers["DPoP-Nonce"]
    assert nonce == dpop_state()["nonce"], nonce
    a = token(form, headers={"DPoP": key.proof(nonce=nonce)})
    assert a.status == 200, (a.status, a.body)
    j = a.json()
    assert j["token_type"] == "DPoP" and a.headers["DPoP-Nonce"] == nonce, (j, dict(a.headers))
    for t in (j["access_token"], j["refresh_token"]):
        i = introspect(t)
        assert i["active"] and i["token_type"] == "DPoP" and i["cnf"] == {"jkt": key.jkt}, i
    # the refresh with the same key works and stays bound
    a = dpop_token(refresh_form(j["refresh_token"]), key)
    assert a.status == 200 and a.json()["token_type"] == "DPoP", a.body
    rt = a.json()["refresh_token"]
    assert introspect(rt)["cnf"] == {"jkt": key.jkt}
    # another key (a stolen refresh token elsewhere) and no proof: invalid_grant, family untouched
    before = stats()
    a = dpop_token(refresh_form(rt), Key())
    assert a.status == 400 and a.json()["error"] == "invalid_grant", a.body
    a = refresh(rt)
    assert a.status == 400 and a.json()["error"] == "invalid_grant", a.body
    after = stats()
    assert after["dpop_key_mismatches"] - before["dpop_key_mismatches"] == 2, (before, after)
    i = introspect(rt)
    assert i["active"] and not i["family_revoked"], i
    a = dpop_token(refresh_form(rt), key)
    assert a.status == 200, a.body
    # without a proof a sign-in stays Bearer and unbound (the existing clients)
    j = sign_in()
    assert j["token_type"] == "Bearer" and introspect(j["refresh_token"])["cnf"] is None, j


@check
def dpop_bad_proofs_are_refused():
    ctl("POST", "reset")
    key = Key()
    rt = dpop_sign_in(key).json()["refresh_token"]
    nonce = dpop_state()["nonce"]
    other = Key()
    cases = {
        "typ": key.proof(nonce=nonce, typ="JWT"),
        "der signature": key.proof(nonce=nonce, der=True),
        "stale iat": key.proof(nonce=nonce, iat=int(time.time()) - 600),
        "future iat": key.proof(nonce=nonce, iat=int(time.time()) + 600),
        "htm": key.proof(nonce=nonce, htm="GET"),
        "htu": key.proof(nonce=nonce, htu=BASE + "/oauth/revoke"),
        "htu query": key.proof(nonce=nonce, htu=BASE + "/oauth/token?x=1"),
        "another key's jwk": key.proof(nonce=nonce, jwk=other.jwk),
        "private jwk": key.proof(nonce=nonce, jwk=dict(key.jwk, d="AAAA")),
    }
    for name, proof in cases.items():
        a = token(refresh_form(rt), headers={"DPoP": proof})
        assert a.status == 400 and a.json()["error"] == "invalid_dpop_proof", (name, a.status, a.body)
    # a reused jti is a replay, also when the first use was answered use_dpop_nonce
    jti = b64url(os.urandom(16))
    a = token(refresh_form(rt), headers={"DPoP": key.proof(nonce="stale", jti=jti)})
    assert a.status == 400 and a.json()["error"] == "use_dpop_nonce", a.body
    a = token(refresh_form(rt), headers={"DPoP": key.proof(nonce=nonce, jti=jti)})
    assert a.status == 400 and a.json()["error"] == "invalid_dpop_proof", a.body
    assert "jti" in a.json()["error_description"], a.body
    # none of it consumed the refresh token
    i = introspect(rt)
    assert i["active"], i
    assert dpop_token(refresh_form(rt), key).status == 200


@check
def dpop_nonce_rotation_switches():
    ctl("POST", "reset")
    key = Key()
    rt = dpop_sign_in(key).json()["refresh_token"]
    old = dpop_state()["nonce"]
    new = ctl("POST", "dpop", {"rotate_nonce": True})["nonce"]
    assert new != old
    a = dpop_token(refresh_form(rt), key, nonce=old)
    assert a.status == 400 and a.headers["DPoP-Nonce"] == new, (a.status, a.body)
    # reject_next 2: two use_dpop_nonce in a row, each with a new nonce, then a success
    ctl("POST", "dpop", {"reject_next": 2})
    seen = []
    for _ in range(2):
        a = dpop_token(refresh_form(rt), key)
        assert a.status == 400 and a.json()["error"] == "use_dpop_nonce", a.body
        seen.append(a.headers["DPoP-Nonce"])
    assert len(set(seen)) == 2 and seen[-1] == dpop_state()["nonce"], seen
    a = dpop_token(refresh_form(rt), key, nonce=seen[-1])
    assert a.status == 200, a.body
    assert call("POST", "/__test/dpop", js={"bogus": 1}).status == 400
    assert call("POST", "/__test/dpop", js={"reject_next": -1}).status == 400
    # required: a token request without a proof is refused
    ctl("POST", "dpop", {"required": True})
    code = ctl("POST", "apple/code", {"sub": "001.dpop"})["code"]
    a = token({"grant_type": EXCHANGE, "subject_token_type": APPLE, "subject_token": code,
               "client_id": PUBLIC, "scope": "openid"})
    assert a.status == 400 and a.json()["error"] == "invalid_dpop_proof", a.body
    ctl("POST", "reset")
    assert dpop_state()["required"] is False


@check
def dpop_code_flow_dpop_jkt_and_userinfo():
    ctl("POST", "reset")
    key = Key()
    f = Flow(dpop_jkt=key.jkt)
    a = f.exchange()  # no proof: the code was asked for with dpop_jkt
    assert a.status == 400 and a.json()["error"] == "invalid_grant", a.body
    f = Flow(dpop_jkt=key.jkt)
    form = {"grant_type": "authorization_code", "client_id": PUBLIC, "code": f.redirect["code"],
            "redirect_uri": f.params["redirect_uri"], "code_verifier": f.verifier}
    a = dpop_token(form, Key())  # another key
    assert a.status == 400 and a.json()["error"] == "invalid_grant", a.body
    f = Flow(dpop_jkt=key.jkt)
    form["code"], form["code_verifier"] = f.redirect["code"], f.verifier
    a = dpop_token(form, key)
    assert a.status == 200 and a.json()["token_type"] == "DPoP", a.body
    at = a.json()["access_token"]
    ath = b64url(hashlib.sha256(at.encode()).digest())
    url = BASE + "/userinfo"

    def userinfo(scheme, proof):
        headers = {"Authorization": f"{scheme} {at}"}
        if proof:
            headers["DPoP"] = proof
        return call("GET", "/userinfo", headers=headers)

    assert userinfo("DPoP", key.proof(htu=url, htm="GET", ath=ath)).status == 200
    assert userinfo("Bearer", None).status == 401  # a bound token is not a bearer token
    assert userinfo("DPoP", None).status == 401
    wrong = b64url(hashlib.sha256(b"another token").digest())
    a = userinfo("DPoP", key.proof(htu=url, htm="GET", ath=wrong))
    assert a.status == 401 and a.json()["error"] == "invalid_dpop_proof", a.body
    assert userinfo("DPoP", Key().proof(htu=url, htm="GET", ath=ath)).status == 401
    # resource_nonce: the resource server asks for the server's nonce (RFC 9449 9): 401
    # use_dpop_nonce with DPoP-Nonce, then the proof with it is accepted
    ctl("POST", "dpop", {"resource_nonce": True})
    a = userinfo("DPoP", key.proof(htu=url, htm="GET", ath=ath))
    assert a.status == 401 and a.json()["error"] == "use_dpop_nonce", a.body
    assert 'error="use_dpop_nonce"' in a.headers["WWW-Authenticate"], a.headers
    nonce = a.headers["DPoP-Nonce"]
    assert nonce == dpop_state()["nonce"], nonce
    assert userinfo("DPoP", key.proof(htu=url, htm="GET", ath=ath, nonce=nonce)).status == 200
    ctl("POST", "dpop", {"resource_nonce": False})


def run_useragent(url, env=None, timeout=30):
    log = tempfile.NamedTemporaryFile(prefix="useragent-", suffix=".log", delete=False)
    log.close()
    e = {k: v for k, v in os.environ.items() if not k.startswith("TOKENSTORE_USERAGENT_")}
    e.update(env or {}, TOKENSTORE_USERAGENT_LOG=log.name)
    p = subprocess.run([sys.executable, USERAGENT, url], env=e, capture_output=True, timeout=timeout)
    with open(log.name) as f:
        lines = f.read().splitlines()
    os.unlink(log.name)
    return p.returncode, lines, p.stderr.decode()


@check
def useragent_signs_in_through_the_loopback_callback():
    listener = Listener()
    try:
        set_redirect_uris([listener.uri])
        verifier, challenge = pkce()
        params = authorize_params(challenge, redirect_uri=listener.uri)
        rc, lines, err = run_useragent(BASE + "/authorize?" + urllib.parse.urlencode(params),
                                       env={"http_proxy": "http://192.0.2.1:9"})  # never used
        assert rc == 0, (rc, err)
        assert [ln.split(" ", 1)[0] for ln in lines] == ["GET", "GET", "POST", "GET", "END"], lines
        assert lines[2] == f"POST {BASE}/login/callback 302" and lines[3] == f"GET {listener.uri} 200", lines
        assert lines[4] == f"END 200 {listener.uri}" and "?" not in "".join(lines), lines
        assert len(listener.hits) == 1 and listener.hits[0].startswith("/callback?"), listener.hits
        q = query_of(listener.hits[0])
        assert q["state"] == params["state"], q
        a = token({"grant_type": "authorization_code", "client_id": PUBLIC, "code": q["code"],
                   "redirect_uri": listener.uri, "code_verifier": verifier})
        assert a.status == 200 and id_token_problems(a.json()["id_token"], nonce=params["nonce"]) == set()
        # no connection: it presses the login page's one button, then goes on the same way
        rc, lines, err = run_useragent(BASE + "/authorize?" + urllib.parse.urlencode(
            {k: v for k, v in params.items() if k != "connection"}))
        assert rc == 0 and len(listener.hits) == 2 and lines[-1] == f"END 200 {listener.uri}", (rc, lines, err)
        # detached: returns at once, the callback still comes
        rc, _, err = run_useragent(BASE + "/authorize?" + urllib.parse.urlencode(params),
                                   env={"TOKENSTORE_USERAGENT_DETACH": "1"})
        deadline = time.monotonic() + 10
        while len(listener.hits) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert rc == 0 and len(listener.hits) == 3, (rc, listener.hits, err)
        # no_redirect: it ends on the server's page and the callback is never called
        oidc("POST", "next_redirect", {"fault": "no_redirect"})
        rc, lines, err = run_useragent(BASE + "/authorize?" + urllib.parse.urlencode(params))
        assert rc == 0 and lines[-1] == f"END 200 {BASE}/login/callback" and len(listener.hits) == 3, lines
        # a redirect_uri mismatch: it ends on the error page
        rc, lines, _ = run_useragent(BASE + "/authorize?" + urllib.parse.urlencode(
            dict(params, redirect_uri=DEFAULT_CALLBACK)))
        assert rc == 0 and lines == [f"GET {BASE}/authorize 400", f"END 400 {BASE}/authorize"], lines
    finally:
        listener.close()
        set_redirect_uris(oidc("GET", "")["default_redirect_uris"])


@check
def useragent_keeps_the_session_cookie():
    """TOKENSTORE_USERAGENT_COOKIES: the login's session cookie is kept (0600) and sent again,
    so the next sign-in needs no page, and prompt=login shows it anyway."""
    listener = Listener()
    jar = os.path.join(tempfile.mkdtemp(prefix="ua-cookies-"), "cookies.json")
    try:
        set_redirect_uris([listener.uri])
        env = {"TOKENSTORE_USERAGENT_COOKIES": jar}

        def sign_in_lines(**over):
            _, challenge = pkce()
            params = authorize_params(challenge, redirect_uri=listener.uri, **over)
            rc, lines, err = run_useragent(BASE + "/authorize?" + urllib.parse.urlencode(params), env=env)
            assert rc == 0 and lines[-1] == f"END 200 {listener.uri}", (rc, lines, err)
            return [line for line in lines if "/appleid/" in line]

        assert sign_in_lines(), "the first sign-in goes through the Apple page"
        assert os.stat(jar).st_mode & 0o777 == 0o600
        assert list(json.load(open(jar)).values())[0].keys() == {"tsauth_session"}
        assert sign_in_lines() == [], "the session answers without a page"
        assert sign_in_lines(prompt="none") == []
        assert sign_in_lines(prompt="login"), "prompt=login shows the page again"
        assert len(listener.hits) == 4
        # without a jar, no cookie is kept: every sign-in shows the page
        del env["TOKENSTORE_USERAGENT_COOKIES"]
        assert sign_in_lines()
    finally:
        listener.close()
        set_redirect_uris(oidc("GET", "")["default_redirect_uris"])


@check
def useragent_refuses_non_loopback():
    for url in ("http://example.com/authorize", "http://127.0.0.1.example.com/x",
                "http://evil.example@example.com/", "http://10.0.0.1:53180/callback",
                "http://[::2]:80/", "https://example.com/", "file:///etc/passwd", "not a url"):
        rc, lines, err = run_useragent(url, timeout=10)
        assert rc == 2 and lines[-1] == "END refused" and len(lines) == 2, (url, rc, lines, err)
    for url in ("http://localhost:1/", "http://[::1]:1/", "http://127.0.0.1:1/"):
        rc, lines, _ = run_useragent(url)  # allowed, nothing listens: a transport error
        assert rc == 1 and lines[-1] == "END error", (url, rc, lines)
    # a redirect (or a form action) off loopback is refused before anything is sent there
    ctl("POST", "faults", {"path": "/authorize", "redirect": "http://example.com/steal", "status": 302})
    rc, lines, _ = run_useragent(BASE + "/authorize?client_id=x")
    assert rc == 2 and lines[0] == f"GET {BASE}/authorize 302" and lines[-1] == "END refused", lines
    ctl("POST", "faults", {"path": "/authorize", "status": 200, "content_type": "text/html",
                           "body": '<form method="post" action="http://example.com/x">'
                                   '<input type="hidden" name="a" value="b"></form>'})
    rc, lines, _ = run_useragent(BASE + "/authorize?client_id=x")
    assert rc == 2 and lines[-1] == "END refused" and len(lines) == 3, lines
    rc, _, err = run_useragent("")
    assert rc == 2, (rc, err)
    p = subprocess.run([sys.executable, USERAGENT], capture_output=True)
    assert p.returncode == 1 and b"usage" in p.stderr


# ----------------------------------------------------------------------------------------
# Server process management


def python_bin():
    py = os.environ.get("TOKENSTORE_AUTHSERVER_PYTHON") or os.path.join(
        ROOT, ".build", "authserver-venv", "bin", "python")
    if not os.path.exists(py):
        sys.exit(f"no python at {py}; run: scripts/authserver venv")
    return py


class ServerProcess:
    def __init__(self, tmp, port=0, state_file=None):
        self.log_path = os.path.join(tmp, "server.log")
        args = [python_bin(), SERVER, "--port", str(port), "--exit-with-parent"]
        if state_file:
            args += ["--state-file", state_file]
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log,
                                     stdin=subprocess.DEVNULL)
        line = self.proc.stdout.readline().decode().strip()
        if not line.startswith("PORT "):
            raise RuntimeError(f"server did not start: {line!r}; log: {self.log_path}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 10
        while True:
            try:
                urllib.request.urlopen(self.url + "/__test/health", timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)
        self.proc.stdout.close()
        self.log.close()


def restart_on_same_port(tmp):
    global BASE
    state = os.path.join(tmp, "state.json")
    s1 = ServerProcess(tmp, state_file=state)
    BASE = s1.url
    j = sign_in("001.kate")
    rt = refresh(j["refresh_token"]).json()["refresh_token"]
    kid = oidc("GET", "")["kid"]
    f = Flow()  # a browser sign-in whose code is exchanged after the restart
    s1.stop()
    try:
        urllib.request.urlopen(s1.url + "/__test/health", timeout=1)
        raise AssertionError("server still answers after stop")
    except urllib.error.URLError as e:
        assert isinstance(e.reason, ConnectionRefusedError), e
    assert oct(os.stat(state).st_mode & 0o777) == "0o600"
    s2 = ServerProcess(tmp, port=s1.port, state_file=state)
    try:
        assert s2.port == s1.port
        assert introspect(rt)["active"] and introspect(j["refresh_token"])["reason"] == "rotated"
        assert stats()["refresh_grants"] == 1
        assert refresh(rt).status == 200
        assert oidc("GET", "")["kid"] == kid, "the signing key changed across a restart"
        assert id_token_problems(j["id_token"]) == set()
        assert id_token_problems(f.tokens()["id_token"], nonce=f.params["nonce"]) == set()
    finally:
        s2.stop()


def main():
    global BASE
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", help="check an already running server (skips restart checks)")
    ap.add_argument("-k", dest="only", help="run only the checks whose name contains this")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="authserver-test-")
    server = None
    if args.url:
        BASE = args.url.rstrip("/")
    else:
        server = ServerProcess(tmp)
        BASE = server.url
    passed = failed = 0
    try:
        ctl("POST", "reset")
        for fn in CHECKS:
            if args.only and args.only not in fn.__name__:
                continue
            t = time.monotonic()
            try:
                fn()
                passed += 1
                print(f"ok   {fn.__name__} ({time.monotonic() - t:.2f}s)", flush=True)
            except Exception:
                failed += 1
                print(f"FAIL {fn.__name__}", flush=True)
                traceback.print_exc()
        if server and args.only:
            pass  # a selection: no log and restart checks
        elif server:
            server.stop()
            server = None
            with open(os.path.join(tmp, "server.log")) as f:
                log = f.read()
            leaked = [t for t in SEEN_TOKENS if t in log]
            try:
                assert not leaked, f"{len(leaked)} token values in the server log"
                assert "POST /oauth/token 200" in log and "?" not in log
                passed += 1
                print("ok   log_has_no_tokens", flush=True)
            except AssertionError:
                failed += 1
                print("FAIL log_has_no_tokens", flush=True)
                traceback.print_exc()
            try:
                restart_on_same_port(tmp)
                passed += 1
                print("ok   restart_on_same_port", flush=True)
            except Exception:
                failed += 1
                print("FAIL restart_on_same_port", flush=True)
                traceback.print_exc()
    finally:
        if server:
            server.stop()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
