"""``Store(app_id, path, pin=...)`` (ts_store_open_with_pin), run by scripts/test-cabi with the
system python3 under `env -i` against the installed prefix:

    python3 test_pin.py args STORE   the keyring store STORE is made with a row; with no TPM asked:
                                     a str PIN (TypeError), PINs of 0, 3 and 65 bytes (invalidInput);
                                     STORE has no PIN slot (wrongKeyProvider); the row still reads
    python3 test_pin.py pin STORE    STORE has a PIN slot for b"4821" on the swtpm of
                                     $TOKENSTORE_TPM_TCTI, whose owner allows 3 wrong PINs: the right
                                     PIN (bytes, bytearray) opens it, also after lock() and unlock();
                                     wrong PINs are wrongPIN with 2, 1, 0 tries left; then the right
                                     PIN is tpmLockedOut; the keyring still opens it with the row
"""

import sys

from tokenstore import Kind, Store, TokenStoreError

APP = "org.example.cabi"
failures = 0


def check(condition, what):
    global failures
    if not condition:
        failures += 1
        print(f"test_pin.py: check failed: {what}", file=sys.stderr)


def expect_error(code, wanted, path, pin):
    """Store(APP, path, pin=pin) raises `code` with `wanted` in its message and no PIN in it."""
    try:
        Store(APP, path, pin=pin)
    except TokenStoreError as error:
        check(error.code == code, f"{error.code} instead of {code}: {error.message}")
        check(wanted in error.message, f"{wanted!r} not in {error.message!r}")
        check("4821" not in str(error) and "9907" not in str(error), f"a PIN in the message: {error}")
        return
    check(False, f"Store(pin=...) did not raise {code}")


def expect_row(store):
    check(store.get("pin-row", Kind.GENERIC) == b"kept!", "the row reads back")
    store.close()


def test_args(path):
    with Store(APP, path) as store:
        store.set("pin-row", Kind.GENERIC, b"kept!")
    try:
        Store(APP, path, pin="4821")
        check(False, "a str PIN was taken")
    except TypeError:
        pass
    expect_error("invalidInput", "4", path, b"")
    expect_error("invalidInput", "4", path, b"482")
    expect_error("invalidInput", "64", path, bytes(65))
    expect_error("wrongKeyProvider", "no TPM PIN key slot: open it with ts_store_open", path, b"4821")
    expect_row(Store(APP, path))


def test_pin(path):
    store = Store(APP, path, pin=b"4821")
    store.lock()
    try:
        store.get("pin-row", Kind.GENERIC)
        check(False, "a locked store read")
    except TokenStoreError as error:
        check(error.code == "storeLocked", f"{error.code} instead of storeLocked")
    store.unlock()  # the key unsealed again with the PIN the store holds
    expect_row(store)
    expect_error("wrongPIN", "allows 2 more wrong PINs", path, b"9907")
    typed = bytearray(b"4821")
    expect_row(Store(APP, path, pin=typed))
    check(typed == b"4821", "the caller's bytearray is left as it was")
    expect_error("wrongPIN", "allows 1 more wrong PIN ", path, memoryview(b"9907"))
    expect_error("wrongPIN", "now in dictionary-attack lockout", path, b"9907")
    expect_error("tpmLockedOut", "again within", path, b"4821")
    expect_row(Store(APP, path))


if __name__ == "__main__":
    phase, arguments = sys.argv[1], sys.argv[2:]
    {"args": test_args, "pin": test_pin}[phase](*arguments)
    sys.exit(1 if failures else 0)
