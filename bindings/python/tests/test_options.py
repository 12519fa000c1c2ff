"""``Store(app_id, path, access_policy=..., lock_after_idle=...)`` and ``Store.access_policy``
(ts_store_open_with_options, ts_store_access_policy), run by scripts/test-cabi with the system
python3 under `env -i` against the installed prefix:

    python3 test_options.py args STORE         no lock source on the bus: names that are not
                                               policies, lock_after_idle 0, negative, over 365 days
                                               (invalidInput, no file made), a PIN with options; STORE
                                               opens afterFirstUnlock; whenUnlocked is
                                               lockSourceUnavailable, the record left as it was;
                                               userPresence:session:300 opens another store whose
                                               read is refused (no polkit to ask); lock_after_idle
                                               0.3 locks it after 0.8 s idle, unlock() reads again
    python3 test_options.py screensaver STORE  a screensaver stand-in owns org.freedesktop.ScreenSaver
                                               on the session bus: whenUnlocked opens STORE, its
                                               SetActive(true) locks it, SetActive(false) unlocks it;
                                               a plain open then reports whenUnlocked (recorded)
    python3 test_options.py slots TWO NEW      Store.key_slots(): TWO has slots 1 secret-service and 2
                                               recovery (tokenctl slot add recovery), made within 10
                                               minutes; NEW has one; a closed store is storeClosed
"""

import datetime
import os
import subprocess
import sys
import time

from tokenstore import KeySlot, Kind, Store, TokenStoreError

APP = "org.example.cabi"
failures = 0


def check(condition, what):
    global failures
    if not condition:
        failures += 1
        print(f"test_options.py: check failed: {what}", file=sys.stderr)


def expect_error(code, wanted, path, **options):
    """Store(APP, path, **options) raises `code` with `wanted` in its message."""
    try:
        Store(APP, path, **options).close()
    except TokenStoreError as error:
        check(error.code == code, f"{options}: {error.code} instead of {code}: {error.message}")
        check(wanted in error.message, f"{options}: {wanted!r} not in {error.message!r}")
        return
    check(False, f"Store({options}) did not raise {code}")


def expect_read(store, code=None):
    try:
        value = store.get("policy-row", Kind.GENERIC)
        check(code is None and value == b"kept!", f"read {value!r}, expected {code or 'the row'}")
    except TokenStoreError as error:
        check(error.code == code, f"read: {error.code} instead of {code or 'the row'}")


def test_args(path):
    absent = path + ".absent"
    for bad in ["", "sometimes", "whenunlocked", "userPresence:session:0", "userPresence:forever:5"]:
        expect_error("invalidInput", "not a policy name", absent, access_policy=bad)
    for idle in [0, -1, float("nan"), 365 * 86400 + 1]:
        expect_error("invalidInput", "lock_after_idle", absent, lock_after_idle=idle)
    expect_error("invalidInput", "PIN", absent, pin=b"4821", access_policy="afterFirstUnlock")
    try:
        Store(APP, absent, lock_after_idle="5")
        check(False, "a str lock_after_idle was taken")
    except TypeError:
        pass
    check(not os.path.exists(absent), "a refused open made a file")

    with Store(APP, path, access_policy="afterFirstUnlock") as store:
        check(store.access_policy == "afterFirstUnlock", f"policy {store.access_policy}")
        store.set("policy-row", Kind.GENERIC, b"kept!")
    expect_error("lockSourceUnavailable", "lock", path, access_policy="whenUnlocked")
    # userPresence opens (polkit is asked at a read, not at open), here on another store: with no
    # polkit to ask (no system bus under env -i, or the test app's action not installed) its row
    # is refused, never served.
    with Store(APP, path + ".presence.sqlite", access_policy="userPresence:session:300") as gated:
        check(gated.access_policy == "userPresence:session:300", f"policy {gated.access_policy}")
        gated.set("policy-row", Kind.GENERIC, b"kept!")
        try:
            value = gated.get("policy-row", Kind.GENERIC)
            check(False, f"a userPresence read was served with no polkit to ask: {value!r}")
        except TokenStoreError as error:
            check(error.code in ("lockSourceUnavailable", "userPresenceDenied"), f"userPresence read: {error.code}")
    with Store(APP, path) as store:
        check(store.access_policy == "afterFirstUnlock", f"the record changed: {store.access_policy}")

    store = Store(APP, path, lock_after_idle=0.3)
    for _ in range(5):  # a call every 0.1 s: never idle for 0.3 s
        expect_read(store)
        time.sleep(0.1)
    check(not store.is_locked(), "locked while in use")
    time.sleep(0.8)
    check(store.is_locked(), "not locked after 0.8 s idle")
    expect_read(store, "storeLocked")
    store.unlock()
    expect_read(store)
    store.close()
    with Store(APP, path, lock_after_idle=datetime.timedelta(minutes=5)) as store:
        time.sleep(0.5)
        check(not store.is_locked(), "a 5-minute idle lock locked after 0.5 s")
    closed = Store(APP, path)
    closed.close()
    try:
        closed.access_policy
        check(False, "a closed store answered its policy")
    except TokenStoreError as error:
        check(error.code == "storeClosed", f"{error.code} instead of storeClosed")


def screensaver(active):
    subprocess.run(["/usr/bin/gdbus", "call", "--session", "--dest", "org.freedesktop.ScreenSaver", "--object-path",
                    "/org/freedesktop/ScreenSaver", "--method", "org.freedesktop.ScreenSaver.SetActive",
                    "true" if active else "false"], check=True, stdout=subprocess.DEVNULL)


def wait_locked(store, locked):
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        if store.is_locked() == locked:
            return True
        time.sleep(0.01)
    return False


def test_screensaver(path):
    with Store(APP, path, access_policy="whenUnlocked") as store:
        check(store.access_policy == "whenUnlocked", f"policy {store.access_policy}")
        store.set("policy-row", Kind.GENERIC, b"kept!")
        screensaver(True)
        check(wait_locked(store, True), "the screensaver's lock did not lock the store")
        expect_read(store, "storeLocked")
        screensaver(False)
        check(wait_locked(store, False), "the screensaver's unlock did not unlock the store")
        expect_read(store)
    with Store(APP, path) as store:
        check(store.access_policy == "whenUnlocked", f"not recorded: {store.access_policy}")
    with Store(APP, path, access_policy="afterFirstUnlock") as store:
        check(store.access_policy == "whenUnlocked", f"weakened: {store.access_policy}")


def test_slots(two, path):
    now = datetime.datetime.now(datetime.timezone.utc)
    with Store(APP, two) as store:
        slots = store.key_slots()
        check([(slot.id, slot.kind) for slot in slots] == [(1, "secret-service"), (2, "recovery")], f"slots {slots}")
        for slot in slots:
            age = (now - slot.created_at).total_seconds()
            check(slot.created_at.tzinfo is not None and -2 < age < 600, f"slot {slot.id} made {slot.created_at}, now {now}")
            check(isinstance(slot, KeySlot), "a KeySlot")
    try:
        store.key_slots()
        check(False, "a closed store listed its slots")
    except TokenStoreError as error:
        check(error.code == "storeClosed", f"{error.code} instead of storeClosed")
    with Store(APP, path) as store:
        check([(slot.id, slot.kind) for slot in store.key_slots()] == [(1, "secret-service")], "a new store's slot")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "slots":
        test_slots(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "args":
        test_args(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "screensaver":
        test_screensaver(sys.argv[2])
    else:
        print("usage: test_options.py args|screensaver STORE | slots TWO NEW", file=sys.stderr)
        return 2
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
