"""TokenStore for Python: sealed token storage in the Secret Service, over libtokenstore.so.1.

    import tokenstore

    with tokenstore.Store("org.example.notes") as store:
        store.set("alice", tokenstore.Kind.GENERIC, b"secret")
        secret = store.get("alice", tokenstore.Kind.GENERIC)      # bytes, or None

    with tokenstore.Store("org.example.notes") as store, store.session(DOMAIN, CLIENT_ID) as session:
        user_id = session.sign_in_browser("alice")                  # opens the browser, waits
        # or, without a browser: session.sign_in_device("alice", lambda code, uri, *_: print(uri, code))
        token = session.access_token("alice", scopes=["read:notes"])
        session.logout("alice")                                     # or end_browser_session=True

Every call blocks (keyring and network calls have their own time-outs) and releases the GIL,
so run it off an event loop with ``await asyncio.to_thread(store.get, ...)``. Failures raise
:class:`TokenStoreError` carrying the library's ``code`` (e.g. ``"keyringLocked"``); its
message never holds a secret. Secrets are ``bytes``; the library's copy is wiped when read,
but a Python ``bytes`` object cannot be wiped: keep secrets short-lived, and call
:func:`harden_process` at start-up so that copies like these (and libcurl's and OpenSSL's)
stay out of crash dumps too.

A store or session may be closed while other threads use it: a call already running
finishes, later ones raise :class:`TokenStoreError` with code ``"storeClosed"``, and closing
twice is harmless.
"""

import collections
import ctypes
import datetime
import enum

from . import _native

__all__ = ["Store", "KeySlot", "Session", "Cancel", "Change", "AccessToken", "TokenStoreError", "Kind", "State", "Protection",
           "LogoutOutcome", "BrowserSession", "BrowserLogoutOutcome", "version", "harden_process"]


class TokenStoreError(Exception):
    """A failed call: ``code`` is the library's error code, ``message`` a description (what went
    wrong, its cause and a hint, without the code); ``str(error)`` is ``"code: message"``."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class _Named(enum.IntEnum):
    """The C enum's value (it compares equal to that int, ``State.REVOKED == 1``), printed by its
    name: ``print(session.logout("alice"))`` shows ``REVOKED``, not ``0``."""

    def __str__(self):
        return self.name

    def __format__(self, spec):
        return format(self.name, spec) if not spec or spec[-1] in "s<>^" or spec[-1].isdigit() else int.__format__(self, spec)


class Kind(_Named):
    """What an item holds (ts_kind; tokenctl's --kind)."""
    REFRESH_TOKEN = 1
    APPLE_USER_ID = 2
    ACCESS_TOKEN = 3
    GENERIC = 4
    ID_TOKEN = 5
    PROFILE = 6


class State(_Named):
    """A user's credential state (ts_state)."""
    AUTHORIZED = 0
    REVOKED = 1
    NOT_FOUND = 2


class Protection(_Named):
    """How well a store's data key is protected (ts_protection), best first; values are appended, never renumbered."""
    HARDWARE = 0
    KEYRING = 1
    PORTAL = 2
    PASSPHRASE = 3
    SOFTWARE_TPM = 4


class LogoutOutcome(_Named):
    """What a logout did (ts_logout_outcome)."""
    REVOKED = 0
    NOT_FOUND = 1
    PENDING = 2
    FAILED = 3
    NOT_REVOCABLE = 4


class BrowserSession(_Named):
    """What a logout did to the user's browser session at the provider (ts_browser_session)."""
    NOT_ASKED = 0
    ENDED = 1
    NOT_ENDED = 2
    FAILED = 3


class BrowserLogoutOutcome:
    """What ``Session.logout(account, end_browser_session=True)`` did: ``logout`` (a
    :class:`LogoutOutcome`), ``browser_session`` (a :class:`BrowserSession`) and, when that is
    ``FAILED``, ``browser_error``: a :class:`TokenStoreError` saying why (``browserUnavailable``,
    ``loopbackUnavailable``, ``timedOut``, ``cancelled``, …), else None. Never raised: the logout stands."""

    __slots__ = ("logout", "browser_session", "browser_error")

    def __init__(self, logout, browser_session, browser_error=None):
        self.logout = logout
        self.browser_session = browser_session
        self.browser_error = browser_error

    def __repr__(self):
        error = f", {self.browser_error.code}" if self.browser_error else ""
        return f"BrowserLogoutOutcome({self.logout}, browser session {self.browser_session}{error})"


class AccessToken:
    """An access token: ``token`` (bytes) and ``expires_at`` (Unix seconds, or None)."""

    __slots__ = ("token", "expires_at")

    def __init__(self, token, expires_at):
        self.token = token
        self.expires_at = expires_at

    def __repr__(self):
        return f"AccessToken(<{len(self.token)} bytes>, expires_at={self.expires_at})"


def version():
    """The library's version, e.g. ``"0.3.0"`` (the VERSION file it was built from)."""
    return _native.library().ts_version().decode()


def harden_process():
    """Keeps this process's memory out of crash dumps and away from other processes of the
    user: no core dump, no core file (also for programs it starts), no ptrace attach
    (``ts_harden_process``: ``PR_SET_DUMPABLE`` 0, ``RLIMIT_CORE`` 0). The library's own
    copies of secrets are kept out of dumps anyway; this covers libcurl's and OpenSSL's
    buffers and the ``bytes`` objects Python holds. Call it once, early; it lasts for the life
    of the process. Raises :class:`TokenStoreError` (``ioError``) when a system call fails."""
    lib = _native.library()
    _call(lib.ts_harden_process)


def __getattr__(name):  # __version__ without loading the library at import time
    if name == "__version__":
        return version()
    raise AttributeError(name)


def _text(value, what, optional=False):
    """UTF-8 bytes for a C string argument; embedded NUL refused (C would cut the string)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str")
    if "\0" in value:
        raise TokenStoreError("invalidInput", f"The {what} contains a NUL character.")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        raise TokenStoreError("invalidInput", f"The {what} is not valid UTF-8.") from None


def _idle_milliseconds(seconds):
    """``lock_after_idle`` (seconds, or a timedelta; None: never) as ts_store_options' milliseconds."""
    if seconds is None:
        return 0
    if hasattr(seconds, "total_seconds"):
        seconds = seconds.total_seconds()
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError("lock_after_idle must be a number of seconds (or a timedelta)")
    if not seconds > 0 or seconds * 1000 > 2**62:
        raise TokenStoreError("invalidInput", "lock_after_idle is not a positive number of seconds.")
    return max(1, round(seconds * 1000))


def _call(function, *arguments):
    """Calls a ts_* function with a trailing ts_error**; raises TokenStoreError on TS_ERROR."""
    lib = _native.library()
    error = ctypes.c_void_p()
    status = function(*arguments, ctypes.byref(error))
    if status == _native.TS_ERROR:
        if not error:
            raise TokenStoreError("internalError", "The call failed without an error.")
        try:
            code = lib.ts_error_code(error).decode()
            message = lib.ts_error_message(error).decode()
        finally:
            lib.ts_error_free(error)
        raise TokenStoreError(code, message)
    return status


def _browser_options(options, ports, redirect_path, timeout, open_url):
    """Fills what the options of every browser flow share (ts_sign_in_options, ts_logout_options):
    the loopback ports, the redirect path, the time-out and the app's URL opener. Returns the list
    that gets the opener's exceptions (re-raised by the caller) and the objects the struct points
    to, which must outlive the call."""
    keep = []
    if ports is not None:
        ports = list(ports)
        if not ports or not all(isinstance(port, int) and not isinstance(port, bool) and 0 <= port <= 65535
                                for port in ports):
            raise TokenStoreError("invalidInput", "The ports must be a non-empty list of 0 to 65535.")
        port_array = (ctypes.c_uint16 * len(ports))(*ports)
        keep.append(port_array)
        options.ports = ctypes.cast(port_array, ctypes.POINTER(ctypes.c_uint16))
        options.port_count = len(ports)
    options.redirect_path = _text(redirect_path, "redirect path", optional=True)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= 2**31 - 1:
        raise TokenStoreError("invalidInput", "The time-out must be a positive number of seconds.")
    options.timeout_seconds = timeout
    raised = []
    if open_url is not None:
        def trampoline(url, _user_data):
            try:
                return 1 if open_url(url.decode()) is False else 0
            except BaseException as error:  # noqa: BLE001  (must not unwind through C)
                raised.append(error)
                return 1
        opener = _native.OPEN_URL(trampoline)
        keep.append(opener)
        options.open_url = opener
    return raised, keep


def _take_bytes(pointer, length):
    """Copies a library buffer into bytes, then wipes and frees it."""
    lib = _native.library()
    try:
        return ctypes.string_at(pointer, length.value) if length.value else b""
    finally:
        lib.ts_bytes_free(pointer, length)


class Change:
    """A change to a store (``ts_change``), made by this process or another: ``kind`` is one of
    ``"accountAdded"``, ``"accountRemoved"``, ``"credentialStateChanged"``, ``"tokensRenewed"``,
    ``"keyRotated"``, ``"storeLocked"``, ``"storeUnlocked"`` (this store object locked or unlocked,
    for any reason; more may come); ``account``, ``user_id``, ``old_state`` and ``new_state``
    are set where the kind has them. Identifiers only, never a token."""

    KINDS = ("accountAdded", "accountRemoved", "credentialStateChanged", "tokensRenewed", "keyRotated", "storeLocked",
             "storeUnlocked")
    __slots__ = ("kind", "account", "user_id", "old_state", "new_state")

    def __init__(self, kind, account=None, user_id=None, old_state=None, new_state=None):
        self.kind, self.account, self.user_id, self.old_state, self.new_state = kind, account, user_id, old_state, new_state

    def __repr__(self):
        return f"Change({self.kind})"


class Watch:
    """A subscription of :meth:`Store.watch`; :meth:`close` ends it (no call after it returns)."""

    def __init__(self, store, callback):
        def trampoline(pointer, _user_data):
            change = pointer.contents
            kind = Change.KINDS[change.kind] if 0 <= change.kind < len(Change.KINDS) else None
            if kind is None:
                return  # a kind this binding does not know
            text = lambda value: value.decode() if value is not None else None  # noqa: E731
            states = (State(change.from_state), State(change.to_state)) if kind == "credentialStateChanged" else (None, None)
            try:
                callback(Change(kind, text(change.account), text(change.user_id), *states))
            except BaseException:  # noqa: BLE001  (must not unwind through C)
                import traceback
                traceback.print_exc()
        self._function = _native.CHANGE(trampoline)  # kept alive as long as the watch
        handle = ctypes.c_void_p()
        _call(_native.library().ts_store_watch, store._live(), self._function, None, ctypes.byref(handle))
        self._handle = handle

    def close(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            _native.library().ts_watch_free(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


class Cancel:
    """A cancel handle (``ts_cancel``) for the long calls: pass it as ``cancel=`` to
    :meth:`Session.sign_in_browser`, :meth:`Session.access_token`, :meth:`Session.logout`,
    :meth:`Session.resume` and :meth:`Store.get`; :meth:`cancel` (from any thread) ends them
    within milliseconds. A
    cancelled sign-in raises ``cancelled`` and stores nothing; a cancelled logout returns
    ``LogoutOutcome.PENDING`` (logged out here, the revocation queued). A handle stays
    cancelled: calls given it later raise ``cancelled`` at once."""

    def __init__(self):
        handle = ctypes.c_void_p()
        _call(_native.library().ts_cancel_new, ctypes.byref(handle))
        self._handle = handle

    def cancel(self):
        """Cancels the calls running with this handle, and every later one."""
        if self._handle:
            _native.library().ts_cancel_trigger(self._handle)

    def close(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            _native.library().ts_cancel_free(handle)

    def __del__(self):
        self.close()


def _cancel_handle(cancel):
    if cancel is None:
        return None
    if not isinstance(cancel, Cancel) or not cancel._handle:
        raise TokenStoreError("invalidInput", "cancel must be an open tokenstore.Cancel.")
    return cancel._handle


KeySlot = collections.namedtuple("KeySlot", ["id", "kind", "created_at"])
KeySlot.__doc__ = """One key slot of a store (:meth:`Store.key_slots`): one way to its data key, never its secret."""


class Store:
    """An open store: ``Store(app_id, path=None, pin=None, access_policy=None, lock_after_idle=None)``;
    ``path`` None is the default location.

    ``access_policy`` (``ts_store_open_with_options``): when the store's secrets may be read, by
    name: ``"afterFirstUnlock"`` (whenever it is open), ``"whenUnlocked"`` (only while the desktop
    session is unlocked: its lock, from logind or a screensaver on the session bus, wipes the key and
    every call raises ``storeLocked`` until it unlocks; with neither, ``lockSourceUnavailable``),
    ``"userPresence"``, ``"userPresence:session:SECONDS"``, ``"userPresence:appLifecycle:SECONDS"``
    (a read of a refresh token or a generic item first asks polkit for the user's presence:
    ``userPresenceDenied`` when declined, ``lockSourceUnavailable`` with no polkit). None: the one the store
    records (``"afterFirstUnlock"`` for a new store). The store records it under its MAC: a stronger
    policy than recorded is recorded, a weaker one does not lower it (:attr:`access_policy` says
    which is in force). A name that is not a policy's raises ``invalidInput`` before anything is
    opened. ``lock_after_idle`` (seconds, int, float or ``datetime.timedelta``; None: never): the
    store locks itself (as :meth:`lock`) after that long without a read or write.

    ``pin`` (bytes-like, 4 to 64 bytes, e.g. ``b"4821"``): open the existing store with its TPM + PIN
    key slot (``ts_store_open_with_pin``; the slot is added with ``tokenctl slot add tpm-pin``). The
    TPM limits wrong PINs: ``wrongPIN`` (the message says how many more it allows), then
    ``tpmLockedOut`` even for the right PIN until it recovers. The library's copy of the PIN is in
    locked memory, kept while the store is open (``unlock()`` uses it) and wiped when it closes;
    pass a ``bytearray`` and clear it afterwards to wipe yours (``bytes`` cannot be wiped)."""

    def __init__(self, app_id, path=None, pin=None, access_policy=None, lock_after_idle=None):
        lib = _native.library()
        handle = ctypes.c_void_p()
        with_options = access_policy is not None or lock_after_idle is not None
        if with_options and pin is not None:
            raise TokenStoreError("invalidInput", "A store opened with a PIN takes no access_policy or lock_after_idle.")
        if with_options:
            options = _native.StoreOptions()
            lib.ts_store_options_init(ctypes.byref(options))
            options.access_policy = _text(access_policy, "access policy", optional=True)
            options.lock_after_idle_ms = _idle_milliseconds(lock_after_idle)
            _call(lib.ts_store_open_with_options, _text(path, "path", optional=True), _text(app_id, "app id"),
                  ctypes.byref(options), ctypes.byref(handle))
        elif pin is None:
            _call(lib.ts_store_open, _text(path, "path", optional=True), _text(app_id, "app id"), ctypes.byref(handle))
        else:
            if isinstance(pin, str) or not isinstance(pin, (bytes, bytearray, memoryview)):
                raise TypeError("pin must be bytes-like (encode text first)")
            view = memoryview(pin).cast("B")
            copy = (ctypes.c_uint8 * len(view)).from_buffer_copy(view)  # no Python bytes copy made
            try:
                _call(lib.ts_store_open_with_pin, _text(path, "path", optional=True), _text(app_id, "app id"),
                      copy, len(view), ctypes.byref(handle))
            finally:
                ctypes.memset(copy, 0, ctypes.sizeof(copy))
        self._handle = handle

    def _live(self):
        if self._handle is None:
            raise TokenStoreError("storeClosed", "The store was closed.")
        return self._handle

    def set(self, account, kind, secret, service=None):
        """Stores ``secret`` (bytes-like, at most 1 MiB) under (service, account, kind)."""
        if isinstance(secret, str) or not isinstance(secret, (bytes, bytearray, memoryview)):
            raise TypeError("secret must be bytes-like (encode text first)")
        data = bytes(secret)
        lib = _native.library()
        _call(lib.ts_item_set, self._live(), _text(service, "service", optional=True), _text(account, "account"),
              int(Kind(kind)), data, len(data))

    def get(self, account, kind, service=None, cancel=None):
        """The secret as bytes, or None when there is no such item. With ``cancel`` (a
        :class:`Cancel`), cancelling it while polkit asks the user (an item the store's access
        policy gates on the user's presence) closes polkit's dialog and raises ``cancelled``."""
        lib = _native.library()
        pointer = ctypes.POINTER(ctypes.c_uint8)()
        length = ctypes.c_size_t()
        status = _call(lib.ts_item_get_cancellable, self._live(), _text(service, "service", optional=True),
                       _text(account, "account"), int(Kind(kind)), _cancel_handle(cancel), ctypes.byref(pointer),
                       ctypes.byref(length))
        if status == _native.TS_NOT_FOUND:
            return None
        return _take_bytes(pointer, length)

    def delete(self, account, kind, service=None):
        """Deletes the item; deleting an absent item is fine."""
        lib = _native.library()
        _call(lib.ts_item_delete, self._live(), _text(service, "service", optional=True), _text(account, "account"),
              int(Kind(kind)))

    def credential_state(self, user_id):
        """The :class:`State` of ``user_id`` (the Apple user id of a sign-in)."""
        lib = _native.library()
        state = ctypes.c_int()
        _call(lib.ts_credential_state, self._live(), _text(user_id, "user id"), ctypes.byref(state))
        return State(state.value)

    def protection(self):
        """``(Protection, reason)``: the store's protection tier and why a higher tier is not in use
        ("" for ``HARDWARE``). A TPM store is ``SOFTWARE_TPM`` when its TPM is a software one (swtpm,
        a simulator, a virtual machine's TPM). Below that the TPM ($TOKENSTORE_TPM_TCTI) is asked."""
        lib = _native.library()
        tier = ctypes.c_int()
        reason = ctypes.c_void_p()
        _call(lib.ts_store_protection, self._live(), ctypes.byref(tier), ctypes.byref(reason))
        try:
            text = ctypes.string_at(reason).decode() if reason else ""
        finally:
            lib.ts_string_free(reason)
        return Protection(tier.value), text

    def lock(self, all_processes=False):
        """Locks the store: its data key is wiped from this process's memory and every call raises
        ``storeLocked`` until :meth:`unlock`. ``all_processes``: every process that has the store
        open drops its key at its next call (as ``tokenctl lock``)."""
        _call(_native.library().ts_store_lock, self._live(), 1 if all_processes else 0)

    def unlock(self, all_processes=False):
        """Unlocks the store: the data key is fetched again from its key provider. A store locked
        for every process stays locked (``storeLocked``) unless ``all_processes``."""
        _call(_native.library().ts_store_unlock, self._live(), 1 if all_processes else 0)

    @property
    def access_policy(self):
        """The name of the access policy in force (the recorded one, or a stronger one asked at
        open), e.g. ``"afterFirstUnlock"`` or ``"whenUnlocked"`` (``ts_store_access_policy``)."""
        lib = _native.library()
        name = ctypes.c_void_p()
        _call(lib.ts_store_access_policy, self._live(), ctypes.byref(name))
        try:
            return ctypes.string_at(name).decode()
        finally:
            lib.ts_string_free(name)

    def is_locked(self):
        """Whether the store is locked here (its data key wiped: every call raises ``storeLocked``).
        True from the start for a store opened while a lock for every process is recorded
        (``tokenctl lock``); a lock set or cleared by another process later is taken up at this
        store's next call (or by its :meth:`watch`)."""
        locked = ctypes.c_int()
        _call(_native.library().ts_store_is_locked, self._live(), ctypes.byref(locked))
        return locked.value != 0

    def key_slots(self):
        """The store's key slots, by id (as ``tokenctl slot list``): a list of :class:`KeySlot`
        ``(id, kind, created_at)``, ``kind`` the recorded provider name (``"secret-service"``,
        ``"portal"``, ``"passphrase"``, ``"tpm"``, ``"tpm-pin"``, ``"recovery"``, or an app's own),
        ``created_at`` an aware UTC ``datetime``. Never a secret."""
        lib = _native.library()
        array = ctypes.POINTER(ctypes.POINTER(_native.KeySlot))()
        _call(lib.ts_store_key_slots, self._live(), ctypes.byref(array))
        try:
            slots, index = [], 0
            while array[index]:
                slot = array[index].contents
                created = datetime.datetime.fromtimestamp(slot.created_at, datetime.timezone.utc)
                slots.append(KeySlot(slot.id, slot.kind.decode(), created))
                index += 1
            return slots
        finally:
            lib.ts_key_slots_free(array)

    def accounts(self):
        """The accounts (service "auth0") the store holds entries for, sorted."""
        lib = _native.library()
        array = ctypes.POINTER(ctypes.c_char_p)()
        _call(lib.ts_store_accounts, self._live(), ctypes.byref(array))
        try:
            names, index = [], 0
            while array[index] is not None:
                names.append(array[index].decode())
                index += 1
            return names
        finally:
            lib.ts_strings_free(array)

    def account_status(self, account):
        """``(signed_in, user_id)`` of ``account``: whether a refresh token is stored (and no logout
        has begun), and its Apple user id or None."""
        lib = _native.library()
        user_id = ctypes.c_void_p()
        signed_in = ctypes.c_int()
        _call(lib.ts_store_account_status, self._live(), _text(account, "account"), ctypes.byref(user_id),
              ctypes.byref(signed_in))
        try:
            return signed_in.value == 1, ctypes.string_at(user_id).decode() if user_id else None
        finally:
            lib.ts_string_free(user_id)

    def watch(self, callback):
        """Calls ``callback(change)`` with each :class:`Change` made to the store from now on, by
        this process or any other, on the library's watcher thread, in commit order; returns a
        :class:`Watch` to close. The watch keeps the store open until it is closed."""
        return Watch(self, callback)

    def session(self, domain=None, client_id=None, issuer=None):
        """A :class:`Session` over this store talking to ``domain`` (Auth0) or ``issuer`` (any
        OpenID Connect provider, by discovery) as ``client_id``."""
        return Session(self, domain, client_id, issuer=issuer)

    def close(self):
        """Closes the store (sessions made from it keep it open until they close). Safe while
        other threads use it (their later calls raise ``storeClosed``); closing again does nothing."""
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            _native.library().ts_store_close(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


class Session:
    """A session over a store; see :meth:`Store.session`."""

    def __init__(self, store, domain=None, client_id=None, issuer=None):
        lib = _native.library()
        handle = ctypes.c_void_p()
        if (domain is None) == (issuer is None):
            raise TokenStoreError("invalidInput", "Give either domain (Auth0) or issuer, not both.")
        if issuer is not None:
            _call(lib.ts_session_new_issuer, store._live(), _text(issuer, "issuer"), _text(client_id, "client id"),
                  ctypes.byref(handle))
        else:
            _call(lib.ts_session_new, store._live(), _text(domain, "domain"), _text(client_id, "client id"),
                  ctypes.byref(handle))
        self._handle = handle

    def _live(self):
        if self._handle is None:
            raise TokenStoreError("storeClosed", "The session was closed.")
        return self._handle

    def access_token(self, account, audience=None, scopes=(), min_ttl=60, cancel=None):
        """An :class:`AccessToken` valid for at least ``min_ttl`` seconds (cached or renewed);
        ``cancel``: a :class:`Cancel` that can end the wait."""
        if isinstance(scopes, str):
            raise TypeError("scopes must be a list of strings")
        scope_text = " ".join(scopes)
        if any(" " in scope for scope in scopes):
            raise TokenStoreError("invalidInput", "A scope contains a space.")
        if not isinstance(min_ttl, int) or not 0 <= min_ttl <= 2**31 - 1:
            raise TokenStoreError("invalidInput", "The minimum TTL must be 0 to 2147483647 seconds.")
        lib = _native.library()
        pointer = ctypes.POINTER(ctypes.c_uint8)()
        length = ctypes.c_size_t()
        expires_at = ctypes.c_int64()
        _call(lib.ts_session_access_token_cancellable, self._live(), _text(account, "account"),
              _text(audience, "audience", optional=True), _text(scope_text, "scopes"), int(min_ttl),
              _cancel_handle(cancel), ctypes.byref(pointer), ctypes.byref(length), ctypes.byref(expires_at))
        token = _take_bytes(pointer, length)
        return AccessToken(token, expires_at.value or None)

    def sign_in_browser(self, account, *, ports=None, connection="apple", scopes=None, audience=None, timeout=300,
                        open_url=None, redirect_path=None, dpop=False, cancel=None, prompt=None, login_hint=None,
                        max_age=None, acr_values=None):
        """Signs ``account`` in through the user's browser (loopback redirect, PKCE); blocks until
        the browser's redirect came back and the tokens are stored, at most ``timeout`` seconds
        (plus the token exchange). Returns the Apple user id, or None for a user who did not
        sign in with Apple.

        ``ports``: loopback redirect ports tried in order (default 53180-53183; 0 takes any free
        port); the redirect URIs are ``http://127.0.0.1:PORT/callback`` (``redirect_path``).
        ``connection``: the Auth0 connection, None for the tenant's login page. ``scopes``: a
        list (default openid, profile, email; openid and offline_access are always added).
        ``open_url``: a callable taking the one-time start URL (a str,
        ``http://127.0.0.1:PORT/start/<id>``, which redirects once, for this user only, to the
        authorization URL; do not log it) that starts a browser and returns promptly; it runs on the
        thread that called this method, and returning False or raising means no browser could
        be opened (``browserUnavailable``, the exception as ``__cause__``). None: the system
        browser ($BROWSER, GIO, xdg-open). ``dpop``: bind the session to the store's DPoP key
        (RFC 9449; the server must take DPoP): its tokens are then DPoP tokens (:meth:`is_dpop_bound`).
        ``cancel``: a :class:`Cancel` whose :meth:`Cancel.cancel` ends the sign-in at once
        (``cancelled``; the listener closed, nothing stored).
        ``prompt``: "login" (ask for credentials even over a live browser session), "select_account",
        "consent" or "none" (no page: ``interactionRequired`` when the server must show one).
        ``login_hint``: who is expected to sign in (an email address), which the server may
        pre-fill; an identifier, sent only in the authorization request, never in an error.
        ``max_age``: seconds (0 or more) since the user last authenticated; the ID token's
        ``auth_time`` is checked against it (``idTokenInvalid``). ``acr_values``: a list of
        authentication context classes; the ID token's ``acr`` must be one of them.
        """
        lib = _native.library()
        options = _native.SignInOptions()
        lib.ts_sign_in_options_init(ctypes.byref(options))
        raised, keep = _browser_options(options, ports, redirect_path, timeout, open_url)
        options.connection = _text(connection if connection is not None else "", "connection")
        if scopes is not None:
            if isinstance(scopes, str) or any(" " in scope for scope in scopes):
                raise TokenStoreError("invalidInput", "The scopes must be a list of strings without spaces.")
            options.scopes = _text(" ".join(scopes), "scopes")
        options.audience = _text(audience, "audience", optional=True)
        options.dpop = 1 if dpop else 0
        if prompt is not None and prompt not in ("login", "select_account", "consent", "none"):
            raise TokenStoreError("invalidInput", "The prompt must be login, select_account, consent or none.")
        options.prompt = _text(prompt, "prompt", optional=True)
        options.login_hint = _text(login_hint, "login hint", optional=True)
        if acr_values is not None:
            if isinstance(acr_values, str) or not acr_values or any(not value or " " in value for value in acr_values):
                raise TokenStoreError("invalidInput", "The acr values must be a non-empty list of strings without spaces.")
            options.acr_values = _text(" ".join(acr_values), "acr values")
        if max_age is not None:
            if isinstance(max_age, bool) or not isinstance(max_age, int) or not 0 <= max_age <= 2**31 - 1:
                raise TokenStoreError("invalidInput", "The max_age must be a non-negative number of seconds.")
            options.max_age_set = 1
            options.max_age_seconds = max_age
        user_id = ctypes.c_void_p()
        try:
            _call(lib.ts_session_sign_in_browser_cancellable, self._live(), _text(account, "account"),
                  ctypes.byref(options), _cancel_handle(cancel), ctypes.byref(user_id))
        except TokenStoreError as error:
            if raised:
                raise error from raised[0]
            raise
        if not user_id:
            return None
        try:
            return ctypes.string_at(user_id).decode()
        finally:
            lib.ts_string_free(user_id)

    def sign_in_device(self, account, on_user_code, *, scopes=None, audience=None, dpop=False):
        """Signs ``account`` in on a machine without a browser (the device authorization grant,
        RFC 8628): ``on_user_code(user_code, verification_uri, verification_uri_complete,
        expires_in)`` is called once, on the thread that called this method, as soon as the
        server gave the code (``verification_uri_complete`` may be None); show it and return.
        The user code is not a secret. Then this method blocks, polling, until the user approved
        on another device (returns the Apple user id, or None), declined (``authorizationFailed``)
        or the code expired (``timedOut``). A server without the grant: ``unsupportedByServer``.
        An exception raised by ``on_user_code`` does not stop the wait; it is the ``__cause__``
        of the error the sign-in ends with, or raised after a successful one.
        """
        lib = _native.library()
        if not callable(on_user_code):
            raise TokenStoreError("invalidInput", "on_user_code must be callable.")
        scope_text = None
        if scopes is not None:
            if isinstance(scopes, str) or any(" " in scope for scope in scopes):
                raise TokenStoreError("invalidInput", "The scopes must be a list of strings without spaces.")
            scope_text = " ".join(scopes)
        raised = []

        def trampoline(user_code, uri, complete, expires_in, _user_data):
            try:
                on_user_code(user_code.decode(), uri.decode(), complete.decode() if complete else None, expires_in)
            except BaseException as error:  # noqa: BLE001  (must not unwind through C)
                raised.append(error)

        callback = _native.USER_CODE(trampoline)
        user_id = ctypes.c_void_p()
        try:
            _call(lib.ts_session_sign_in_device, self._live(), _text(account, "account"),
                  _text(scope_text, "scopes", optional=True), _text(audience, "audience", optional=True),
                  1 if dpop else 0, callback, None, ctypes.byref(user_id))
        except TokenStoreError as error:
            if raised:
                raise error from raised[0]
            raise
        try:
            if raised:
                raise raised[0]
            return ctypes.string_at(user_id).decode() if user_id else None
        finally:
            if user_id:
                lib.ts_string_free(user_id)

    def logout(self, account, cancel=None, *, end_browser_session=False, ports=None, redirect_path=None, timeout=120,
               open_url=None):
        """Logs ``account`` out here and at the server: a :class:`LogoutOutcome` (``PENDING`` when
        ``cancel`` ended the wait for the server).

        ``end_browser_session=True`` (ts_session_logout_browser) then also ends the user's
        browser session at the provider, so that the next sign-in asks who signs in: the browser
        (``open_url`` or the system one, given the one-time ``http://127.0.0.1:PORT/start/<id>``,
        never the ID token) opens the provider's end-session endpoint and comes back to a
        loopback listener at ``http://127.0.0.1:PORT/callback`` (``ports``, ``redirect_path`` as
        for :meth:`sign_in_browser`; register it as a post-logout redirect URI), waiting at most
        ``timeout`` seconds. Returns a :class:`BrowserLogoutOutcome` then: ``browser_session``
        ``ENDED``, ``NOT_ENDED`` (the provider has no end-session endpoint) or ``FAILED`` (with
        ``browser_error``); the logout itself stands in every case.
        """
        lib = _native.library()
        outcome = ctypes.c_int()
        if not end_browser_session:
            _call(lib.ts_session_logout_cancellable, self._live(), _text(account, "account"), _cancel_handle(cancel),
                  ctypes.byref(outcome))
            return LogoutOutcome(outcome.value)
        options = _native.LogoutOptions()
        lib.ts_logout_options_init(ctypes.byref(options))
        raised, keep = _browser_options(options, ports, redirect_path, timeout, open_url)
        browser = ctypes.c_int()
        browser_error = ctypes.c_void_p()
        _call(lib.ts_session_logout_browser, self._live(), _text(account, "account"), ctypes.byref(options),
              _cancel_handle(cancel), ctypes.byref(outcome), ctypes.byref(browser), ctypes.byref(browser_error))
        error = None
        if browser_error:
            try:
                error = TokenStoreError(lib.ts_error_code(browser_error).decode(),
                                        lib.ts_error_message(browser_error).decode())
            finally:
                lib.ts_error_free(browser_error)
            if raised:
                error.__cause__ = raised[0]
        return BrowserLogoutOutcome(LogoutOutcome(outcome.value), BrowserSession(browser.value), error)

    def resume(self, cancel=None):
        """Retries the queued revocations; returns how many stay pending."""
        lib = _native.library()
        pending = ctypes.c_int()
        _call(lib.ts_session_resume_cancellable, self._live(), _cancel_handle(cancel), ctypes.byref(pending))
        return pending.value

    def is_dpop_bound(self, account):
        """Whether ``account``'s session is DPoP-bound (RFC 9449): its access tokens are then
        sent as ``Authorization: DPoP <token>`` with a proof from :meth:`dpop_proof`."""
        lib = _native.library()
        bound = ctypes.c_int()
        _call(lib.ts_session_is_dpop_bound, self._live(), _text(account, "account"), ctypes.byref(bound))
        return bound.value == 1

    def dpop_proof(self, account, method, url):
        """A DPoP proof (a JWT, ``str``) for ``method`` on ``url`` with ``account``'s current
        access token (``ath``), signed by the store's DPoP key; for a DPoP-bound session."""
        lib = _native.library()
        proof = ctypes.c_void_p()
        _call(lib.ts_session_dpop_proof, self._live(), _text(account, "account"), _text(method, "method"),
              _text(url, "url"), ctypes.byref(proof))
        try:
            return ctypes.string_at(proof).decode()
        finally:
            lib.ts_string_free(proof)

    def record_dpop_nonce(self, url, nonce):
        """Keeps ``nonce``, the ``DPoP-Nonce`` header of an answer from the API at ``url`` (RFC 9449
        9: a 401 ``use_dpop_nonce``, or any answer bringing a new one), for the proofs
        :meth:`dpop_proof` makes to that origin from now on (shared with the app's other
        processes through the store). Retry the refused request with a new proof."""
        lib = _native.library()
        _call(lib.ts_session_record_dpop_nonce, self._live(), _text(url, "url"), _text(nonce, "nonce"))

    def close(self):
        """Releases the session. Safe while other threads use it (their later calls raise
        ``storeClosed``); closing again does nothing."""
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            _native.library().ts_session_free(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()
