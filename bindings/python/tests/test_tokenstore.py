"""The Python binding end to end, run by scripts/test-cabi with the system python3 under
`env -i` against the installed prefix (PYTHONPATH = PREFIX/lib/python3/dist-packages, so the
package finds PREFIX/lib/libtokenstore.so.1 itself).

    python3 test_tokenstore.py items STORE                 open, set/get/delete, bad input, tamper
    python3 test_tokenstore.py session STORE URL USER      state, access token, logout, resume
    python3 test_tokenstore.py locked STORE                the keyring is locked: keyringLocked
"""

import asyncio
import sqlite3
import sys
import time

import tokenstore
from tokenstore import Kind, LogoutOutcome, State, Store, TokenStoreError

APP = "org.example.cabi.python"
failures = 0


def check(condition, what):
    global failures
    if not condition:
        failures += 1
        print(f"test_tokenstore.py: check failed: {what}", file=sys.stderr)


def expect_error(code, function, *arguments, **keywords):
    try:
        function(*arguments, **keywords)
    except TokenStoreError as error:
        check(error.code == code, f"{function.__name__}: {error.code} instead of {code}")
        check(error.message and "tamper-me" not in error.message, "message present, no secret")
        return
    check(False, f"{function.__name__} did not raise {code}")


def tamper(path):
    """Flips one bit in the middle of the refresh-token row's sealed blob."""
    with sqlite3.connect(path) as db:
        (lookup, sealed), = db.execute("SELECT lookup, sealed FROM items WHERE kind = 1").fetchall()
        sealed = bytearray(sealed)
        sealed[len(sealed) // 2] ^= 0x01
        db.execute("UPDATE items SET sealed = ? WHERE lookup = ?", (bytes(sealed), lookup))


def test_items(path):
    check(tokenstore.__version__ == tokenstore.version() and tokenstore.version().count(".") == 2, "version")
    with Store(APP, path) as store:
        secret = b"rt-\x00\xff1"
        store.set("alice", Kind.GENERIC, secret)
        check(store.get("alice", Kind.GENERIC) == secret, "round trip of binary bytes")
        store.set("alice", Kind.GENERIC, bytearray(b"v2"), service="auth0")
        check(store.get("alice", Kind.GENERIC) == b"v2", "replace; default service is auth0")
        store.set("alice", Kind.GENERIC, b"other", service="other-service")
        check(store.get("alice", Kind.GENERIC, service="other-service") == b"other", "another service")
        store.delete("alice", Kind.GENERIC)
        store.delete("alice", Kind.GENERIC)
        check(store.get("alice", Kind.GENERIC) is None, "not found is None")
        store.set("carol", Kind.ACCESS_TOKEN, b"at")

        expect_error("invalidInput", store.set, "empty", Kind.ACCESS_TOKEN, b"")   # empty secret
        expect_error("invalidInput", store.set, "a\0b", Kind.GENERIC, b"x")        # embedded NUL
        expect_error("invalidInput", store.get, "\udcff", Kind.GENERIC)            # not UTF-8
        expect_error("invalidInput", store.set, "bob", Kind.GENERIC, b"x" * ((1 << 20) + 1))
        expect_error("invalidInput", store.credential_state, "")
        try:
            store.set("bob", Kind.GENERIC, "text")
            check(False, "a str secret is refused")
        except TypeError:
            pass
        check(store.get("bob", Kind.GENERIC) is None, "nothing stored by refused calls")
        check(store.credential_state("000999.nobody.apple") == State.NOT_FOUND, "state of a stranger")

        # From an event loop, off its thread (ctypes releases the GIL).
        async def concurrently():
            return await asyncio.gather(*(asyncio.to_thread(store.get, "carol", Kind.ACCESS_TOKEN) for _ in range(8)))
        check(asyncio.run(concurrently()) == [b"at"] * 8, "eight threads at once")

        store.set("victim", Kind.REFRESH_TOKEN, b"tamper-me")
        store.set("bystander", Kind.GENERIC, b"intact")
    expect_error("storeClosed", store.get, "bystander", Kind.GENERIC)
    expect_error("invalidInput", Store, "not an app id", path)

    tamper(path)
    with Store(APP, path) as store:
        expect_error("integrityCheckFailed", store.get, "victim", Kind.REFRESH_TOKEN)
        check(store.get("bystander", Kind.GENERIC) == b"intact", "the other rows still read")


def test_session(path, url, user):
    with Store(APP, path) as store:
        check(store.credential_state(user) == State.AUTHORIZED, "authorized after login")
        expect_error("insecureConfiguration", store.session, "ftp://127.0.0.1/", "tokenstore-test")
        with store.session(url, "tokenstore-test") as session:
            token = session.access_token("alice", scopes=["openid"])
            check(len(token.token) > 0 and token.expires_at > time.time() + 60, "access token and expiry")
            check("bytes>" in repr(token), "repr shows no token")
            expect_error("interactionRequired", session.access_token, "nobody")
            expect_error("invalidInput", session.access_token, "alice", min_ttl=-1)
            check(session.logout("alice") == LogoutOutcome.REVOKED, "logout revoked")
            check(session.logout("alice") == LogoutOutcome.NOT_FOUND, "second logout not found")
            check(session.resume() == 0, "nothing pending")
        check(store.credential_state(user) == State.REVOKED, "revoked after logout")
        check(store.get("alice", Kind.REFRESH_TOKEN) is None, "refresh token gone")


def test_locked(path):
    expect_error("keyringLocked", Store, APP, path)


if __name__ == "__main__":
    phase, arguments = sys.argv[1], sys.argv[2:]
    {"items": test_items, "session": test_session, "locked": test_locked}[phase](*arguments)
    sys.exit(1 if failures else 0)
