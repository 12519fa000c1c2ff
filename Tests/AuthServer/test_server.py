#!/usr/bin/env python3
"""Self-check of Tests/AuthServer/server.py against a real started server (stdlib only).

    python3 Tests/AuthServer/test_server.py            # starts its own server(s)
    python3 Tests/AuthServer/test_server.py --url URL  # checks a running one (skips restart)

The server is started with .build/authserver-venv/bin/python (or
$TOKENSTORE_AUTHSERVER_PYTHON); create that venv with `scripts/authserver venv`.
Prints one line a check and a closing 'N passed, N failed'; exits non-zero on a failure.
"""

from __future__ import annotations

import argparse
import base64
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


def call(method, path, form=None, js=None, timeout=10):
    data, headers = None, {}
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


def token(form):
    a = call("POST", "/oauth/token", form=form)
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
    assert claims["sub"] == "001.alice" and claims["aud"] == PUBLIC, claims
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
                                    "refresh_token_ttl": None, "declined_scopes": []}
    assert introspect(j["refresh_token"]) ["kind"] is None
    assert revoke("x").status == 200


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
    finally:
        s2.stop()


def main():
    global BASE
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", help="check an already running server (skips restart checks)")
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
            t = time.monotonic()
            try:
                fn()
                passed += 1
                print(f"ok   {fn.__name__} ({time.monotonic() - t:.2f}s)", flush=True)
            except Exception:
                failed += 1
                print(f"FAIL {fn.__name__}", flush=True)
                traceback.print_exc()
        if server:
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
