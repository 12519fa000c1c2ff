"""The ctypes declarations of libtokenstore.so.1 (include/tokenstore.h). Internal."""

import ctypes
import ctypes.util
import os
import sysconfig
import threading

TS_OK = 0
TS_NOT_FOUND = 1
TS_ERROR = -1

_SONAME = "libtokenstore.so.1"
_lock = threading.Lock()
_library = None


def _candidates():
    explicit = os.environ.get("TOKENSTORE_LIBRARY")
    if explicit:
        yield explicit
        return
    # Beside this package, where scripts/install and the Debian package put the library: from
    # PREFIX/lib/python3*/dist-packages/tokenstore, first PREFIX/lib/<multiarch> (`make install`
    # under /usr and /usr/local, the package under /usr), then PREFIX/lib (a private prefix).
    # The multiarch name is this python's own (sysconfig MULTIARCH, e.g. x86_64-linux-gnu): the
    # library must be of the same architecture as the process anyway.
    here = os.path.dirname(os.path.abspath(__file__))
    libdir = os.path.normpath(os.path.join(here, "..", "..", ".."))
    multiarch = sysconfig.get_config_var("MULTIARCH")
    if multiarch:
        yield os.path.join(libdir, multiarch, _SONAME)
    yield os.path.join(libdir, _SONAME)
    yield _SONAME  # the loader's search path (ldconfig, LD_LIBRARY_PATH): a pip-installed binding
    found = ctypes.util.find_library("tokenstore")
    if found:
        yield found


class Change(ctypes.Structure):
    """ts_change."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("kind", ctypes.c_int),
        ("service", ctypes.c_char_p),
        ("account", ctypes.c_char_p),
        ("user_id", ctypes.c_char_p),
        ("from_state", ctypes.c_int),
        ("to_state", ctypes.c_int),
    ]


# void (*ts_change_fn)(const ts_change *change, void *user_data)
CHANGE = ctypes.CFUNCTYPE(None, ctypes.POINTER(Change), ctypes.c_void_p)

# int (*ts_open_url_fn)(const char *url, void *user_data)
OPEN_URL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


# void (*ts_user_code_fn)(const char *user_code, const char *verification_uri,
#                         const char *verification_uri_complete, int expires_in, void *user_data)
USER_CODE = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p)


class SignInOptions(ctypes.Structure):
    """ts_sign_in_options."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("ports", ctypes.POINTER(ctypes.c_uint16)),
        ("port_count", ctypes.c_size_t),
        ("redirect_path", ctypes.c_char_p),
        ("connection", ctypes.c_char_p),
        ("scopes", ctypes.c_char_p),
        ("audience", ctypes.c_char_p),
        ("timeout_seconds", ctypes.c_int),
        ("open_url", OPEN_URL),
        ("user_data", ctypes.c_void_p),
        ("dpop", ctypes.c_int),
        ("prompt", ctypes.c_char_p),
        ("login_hint", ctypes.c_char_p),
        ("acr_values", ctypes.c_char_p),
        ("max_age_set", ctypes.c_int),
        ("max_age_seconds", ctypes.c_int),
    ]


class LogoutOptions(ctypes.Structure):
    """ts_logout_options."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("ports", ctypes.POINTER(ctypes.c_uint16)),
        ("port_count", ctypes.c_size_t),
        ("redirect_path", ctypes.c_char_p),
        ("timeout_seconds", ctypes.c_int),
        ("open_url", OPEN_URL),
        ("user_data", ctypes.c_void_p),
    ]


class StoreOptions(ctypes.Structure):
    """ts_store_options."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("access_policy", ctypes.c_char_p),
        ("lock_after_idle_ms", ctypes.c_int64),
    ]


class KeySlot(ctypes.Structure):
    """ts_key_slot."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("id", ctypes.c_int64),
        ("kind", ctypes.c_char_p),
        ("created_at", ctypes.c_int64),
    ]


def _declare(lib):
    c_char_p, c_void_p, c_int = ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int
    handle_out = ctypes.POINTER(c_void_p)
    bytes_out = ctypes.POINTER(ctypes.POINTER(ctypes.c_uint8))
    size_out = ctypes.POINTER(ctypes.c_size_t)
    err = ctypes.POINTER(c_void_p)
    signatures = {
        "ts_version": (c_char_p, []),
        "ts_store_open": (c_int, [c_char_p, c_char_p, handle_out, err]),
        "ts_store_open_with_pin": (c_int, [c_char_p, c_char_p, ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t, handle_out, err]),
        "ts_store_options_init": (None, [ctypes.POINTER(StoreOptions)]),
        "ts_store_open_with_options": (c_int, [c_char_p, c_char_p, ctypes.POINTER(StoreOptions), handle_out, err]),
        "ts_store_access_policy": (c_int, [c_void_p, ctypes.POINTER(c_void_p), err]),
        "ts_store_key_slots": (c_int, [c_void_p, ctypes.POINTER(ctypes.POINTER(ctypes.POINTER(KeySlot))), err]),
        "ts_key_slots_free": (None, [ctypes.POINTER(ctypes.POINTER(KeySlot))]),
        "ts_store_close": (None, [c_void_p]),
        "ts_item_set": (c_int, [c_void_p, c_char_p, c_char_p, c_int, ctypes.c_char_p, ctypes.c_size_t, err]),
        "ts_item_get": (c_int, [c_void_p, c_char_p, c_char_p, c_int, bytes_out, size_out, err]),
        "ts_item_get_cancellable": (c_int, [c_void_p, c_char_p, c_char_p, c_int, c_void_p, bytes_out, size_out, err]),
        "ts_item_delete": (c_int, [c_void_p, c_char_p, c_char_p, c_int, err]),
        "ts_bytes_free": (None, [ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t]),
        "ts_credential_state": (c_int, [c_void_p, c_char_p, ctypes.POINTER(c_int), err]),
        "ts_store_protection": (c_int, [c_void_p, ctypes.POINTER(c_int), ctypes.POINTER(c_void_p), err]),
        "ts_store_lock": (c_int, [c_void_p, c_int, err]),
        "ts_store_unlock": (c_int, [c_void_p, c_int, err]),
        "ts_store_is_locked": (c_int, [c_void_p, ctypes.POINTER(c_int), err]),
        "ts_harden_process": (c_int, [err]),
        "ts_session_new": (c_int, [c_void_p, c_char_p, c_char_p, handle_out, err]),
        "ts_session_new_issuer": (c_int, [c_void_p, c_char_p, c_char_p, handle_out, err]),
        "ts_session_free": (None, [c_void_p]),
        "ts_session_access_token": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p, c_int, bytes_out, size_out,
                                            ctypes.POINTER(ctypes.c_int64), err]),
        "ts_session_logout": (c_int, [c_void_p, c_char_p, ctypes.POINTER(c_int), err]),
        "ts_session_resume": (c_int, [c_void_p, ctypes.POINTER(c_int), err]),
        "ts_session_is_dpop_bound": (c_int, [c_void_p, c_char_p, ctypes.POINTER(c_int), err]),
        "ts_session_dpop_proof": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p, ctypes.POINTER(c_void_p), err]),
        "ts_session_record_dpop_nonce": (c_int, [c_void_p, c_char_p, c_char_p, err]),
        "ts_sign_in_options_init": (None, [ctypes.POINTER(SignInOptions)]),
        "ts_session_sign_in_browser": (c_int, [c_void_p, c_char_p, ctypes.POINTER(SignInOptions), handle_out, err]),
        "ts_session_sign_in_device": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p, c_int, USER_CODE, c_void_p,
                                              handle_out, err]),
        "ts_cancel_new": (c_int, [handle_out, err]),
        "ts_cancel_trigger": (None, [c_void_p]),
        "ts_cancel_free": (None, [c_void_p]),
        "ts_session_access_token_cancellable": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p, c_int, c_void_p, bytes_out,
                                                        size_out, ctypes.POINTER(ctypes.c_int64), err]),
        "ts_session_logout_cancellable": (c_int, [c_void_p, c_char_p, c_void_p, ctypes.POINTER(c_int), err]),
        "ts_session_resume_cancellable": (c_int, [c_void_p, c_void_p, ctypes.POINTER(c_int), err]),
        "ts_session_sign_in_browser_cancellable": (c_int, [c_void_p, c_char_p, ctypes.POINTER(SignInOptions), c_void_p,
                                                           handle_out, err]),
        "ts_logout_options_init": (None, [ctypes.POINTER(LogoutOptions)]),
        "ts_session_logout_browser": (c_int, [c_void_p, c_char_p, ctypes.POINTER(LogoutOptions), c_void_p,
                                              ctypes.POINTER(c_int), ctypes.POINTER(c_int), ctypes.POINTER(c_void_p), err]),
        "ts_store_watch": (c_int, [c_void_p, CHANGE, c_void_p, handle_out, err]),
        "ts_watch_free": (None, [c_void_p]),
        "ts_store_accounts": (c_int, [c_void_p, ctypes.POINTER(ctypes.POINTER(c_char_p)), err]),
        "ts_store_account_status": (c_int, [c_void_p, c_char_p, ctypes.POINTER(c_void_p), ctypes.POINTER(c_int), err]),
        "ts_strings_free": (None, [ctypes.POINTER(c_char_p)]),
        "ts_string_free": (None, [c_void_p]),
        "ts_error_code": (c_char_p, [c_void_p]),
        "ts_error_message": (c_char_p, [c_void_p]),
        "ts_error_free": (None, [c_void_p]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    return lib


def library():
    """The loaded library (once per process); OSError when it cannot be found."""
    global _library
    with _lock:
        if _library is None:
            errors = []
            for candidate in _candidates():
                if os.sep in candidate and not os.path.exists(candidate):
                    continue
                try:
                    _library = _declare(ctypes.CDLL(candidate))
                    break
                except OSError as error:
                    errors.append(str(error))
            else:
                raise OSError("libtokenstore.so.1 not found (set TOKENSTORE_LIBRARY): " + "; ".join(errors))
        return _library
