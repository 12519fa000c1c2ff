// Generated from TokenStore-1.gir by scripts/gir-rust-sys with Gir.toml: do not edit.
#![allow(non_camel_case_types, non_upper_case_globals, dead_code, unused_imports, clippy::all)]

use std::os::raw::{c_char, c_int, c_long, c_short, c_uchar, c_uint, c_ulong, c_ushort, c_void};

pub type gboolean = c_int;
pub type GType = usize;
pub type GQuark = u32;
pub const GFALSE: gboolean = 0;
pub const GTRUE: gboolean = 1;

pub type GAsyncReadyCallback = Option<unsafe extern "C" fn(*mut GObject, *mut GAsyncResult, *mut c_void)>;

#[repr(C)]
pub struct GAsyncResult {
    _data: [u8; 0],
    _marker: std::marker::PhantomData<(*mut u8, std::marker::PhantomPinned)>,
}  // Gio-2.0: opaque

#[repr(C)]
pub struct GBytes {
    _data: [u8; 0],
    _marker: std::marker::PhantomData<(*mut u8, std::marker::PhantomPinned)>,
}  // GLib-2.0: opaque

pub type GCallback = Option<unsafe extern "C" fn()>;

#[repr(C)]
pub struct GCancellable {
    _data: [u8; 0],
    _marker: std::marker::PhantomData<(*mut u8, std::marker::PhantomPinned)>,
}  // Gio-2.0: opaque

#[repr(C)]
pub struct GClosure {
    _data: [u8; 0],
    _marker: std::marker::PhantomData<(*mut u8, std::marker::PhantomPinned)>,
}  // GObject-2.0: opaque

pub type GClosureNotify = Option<unsafe extern "C" fn(*mut c_void, *mut GClosure)>;

pub type GConnectFlags = c_uint;
pub const G_CONNECT_DEFAULT: GConnectFlags = 0;
pub const G_CONNECT_AFTER: GConnectFlags = 1;
pub const G_CONNECT_SWAPPED: GConnectFlags = 2;

pub type GDestroyNotify = Option<unsafe extern "C" fn(*mut c_void)>;

#[repr(C)]
pub struct GError {
    pub domain: GQuark,
    pub code: c_int,
    pub message: *mut c_char,
}

pub type GIOErrorEnum = c_int;
pub const G_IO_ERROR_FAILED: GIOErrorEnum = 0;
pub const G_IO_ERROR_NOT_FOUND: GIOErrorEnum = 1;
pub const G_IO_ERROR_EXISTS: GIOErrorEnum = 2;
pub const G_IO_ERROR_IS_DIRECTORY: GIOErrorEnum = 3;
pub const G_IO_ERROR_NOT_DIRECTORY: GIOErrorEnum = 4;
pub const G_IO_ERROR_NOT_EMPTY: GIOErrorEnum = 5;
pub const G_IO_ERROR_NOT_REGULAR_FILE: GIOErrorEnum = 6;
pub const G_IO_ERROR_NOT_SYMBOLIC_LINK: GIOErrorEnum = 7;
pub const G_IO_ERROR_NOT_MOUNTABLE_FILE: GIOErrorEnum = 8;
pub const G_IO_ERROR_FILENAME_TOO_LONG: GIOErrorEnum = 9;
pub const G_IO_ERROR_INVALID_FILENAME: GIOErrorEnum = 10;
pub const G_IO_ERROR_TOO_MANY_LINKS: GIOErrorEnum = 11;
pub const G_IO_ERROR_NO_SPACE: GIOErrorEnum = 12;
pub const G_IO_ERROR_INVALID_ARGUMENT: GIOErrorEnum = 13;
pub const G_IO_ERROR_PERMISSION_DENIED: GIOErrorEnum = 14;
pub const G_IO_ERROR_NOT_SUPPORTED: GIOErrorEnum = 15;
pub const G_IO_ERROR_NOT_MOUNTED: GIOErrorEnum = 16;
pub const G_IO_ERROR_ALREADY_MOUNTED: GIOErrorEnum = 17;
pub const G_IO_ERROR_CLOSED: GIOErrorEnum = 18;
pub const G_IO_ERROR_CANCELLED: GIOErrorEnum = 19;
pub const G_IO_ERROR_PENDING: GIOErrorEnum = 20;
pub const G_IO_ERROR_READ_ONLY: GIOErrorEnum = 21;
pub const G_IO_ERROR_CANT_CREATE_BACKUP: GIOErrorEnum = 22;
pub const G_IO_ERROR_WRONG_ETAG: GIOErrorEnum = 23;
pub const G_IO_ERROR_TIMED_OUT: GIOErrorEnum = 24;
pub const G_IO_ERROR_WOULD_RECURSE: GIOErrorEnum = 25;
pub const G_IO_ERROR_BUSY: GIOErrorEnum = 26;
pub const G_IO_ERROR_WOULD_BLOCK: GIOErrorEnum = 27;
pub const G_IO_ERROR_HOST_NOT_FOUND: GIOErrorEnum = 28;
pub const G_IO_ERROR_WOULD_MERGE: GIOErrorEnum = 29;
pub const G_IO_ERROR_FAILED_HANDLED: GIOErrorEnum = 30;
pub const G_IO_ERROR_TOO_MANY_OPEN_FILES: GIOErrorEnum = 31;
pub const G_IO_ERROR_NOT_INITIALIZED: GIOErrorEnum = 32;
pub const G_IO_ERROR_ADDRESS_IN_USE: GIOErrorEnum = 33;
pub const G_IO_ERROR_PARTIAL_INPUT: GIOErrorEnum = 34;
pub const G_IO_ERROR_INVALID_DATA: GIOErrorEnum = 35;
pub const G_IO_ERROR_DBUS_ERROR: GIOErrorEnum = 36;
pub const G_IO_ERROR_HOST_UNREACHABLE: GIOErrorEnum = 37;
pub const G_IO_ERROR_NETWORK_UNREACHABLE: GIOErrorEnum = 38;
pub const G_IO_ERROR_CONNECTION_REFUSED: GIOErrorEnum = 39;
pub const G_IO_ERROR_PROXY_FAILED: GIOErrorEnum = 40;
pub const G_IO_ERROR_PROXY_AUTH_FAILED: GIOErrorEnum = 41;
pub const G_IO_ERROR_PROXY_NEED_AUTH: GIOErrorEnum = 42;
pub const G_IO_ERROR_PROXY_NOT_ALLOWED: GIOErrorEnum = 43;
pub const G_IO_ERROR_BROKEN_PIPE: GIOErrorEnum = 44;
pub const G_IO_ERROR_CONNECTION_CLOSED: GIOErrorEnum = 44;
pub const G_IO_ERROR_NOT_CONNECTED: GIOErrorEnum = 45;
pub const G_IO_ERROR_MESSAGE_TOO_LARGE: GIOErrorEnum = 46;
pub const G_IO_ERROR_NO_SUCH_DEVICE: GIOErrorEnum = 47;

#[repr(C)]
pub struct GMainContext {
    _data: [u8; 0],
    _marker: std::marker::PhantomData<(*mut u8, std::marker::PhantomPinned)>,
}  // GLib-2.0: opaque

#[repr(C)]
pub struct GMainLoop {
    _data: [u8; 0],
    _marker: std::marker::PhantomData<(*mut u8, std::marker::PhantomPinned)>,
}  // GLib-2.0: opaque

#[repr(C)]
pub struct GObject {
    _data: [u8; 0],
    _marker: std::marker::PhantomData<(*mut u8, std::marker::PhantomPinned)>,
}  // GObject-2.0: opaque

#[repr(C)]
pub struct GPtrArray {
    pub pdata: *mut *mut c_void,
    pub len: c_uint,
}

pub type GSourceFunc = Option<unsafe extern "C" fn(*mut c_void) -> gboolean>;

#[repr(C)]
pub struct TsAccessToken {
    _data: [u8; 0],
    _marker: std::marker::PhantomData<(*mut u8, std::marker::PhantomPinned)>,
}  // TokenStore-1: opaque

#[repr(C)]
pub struct TsAccount {
    _data: [u8; 0],
    _marker: std::marker::PhantomData<(*mut u8, std::marker::PhantomPinned)>,
}  // TokenStore-1: opaque

pub type TsBrowserSessionOutcome = c_int;
pub const TS_BROWSER_SESSION_OUTCOME_NOT_ASKED: TsBrowserSessionOutcome = 0;
pub const TS_BROWSER_SESSION_OUTCOME_ENDED: TsBrowserSessionOutcome = 1;
pub const TS_BROWSER_SESSION_OUTCOME_NOT_ENDED: TsBrowserSessionOutcome = 2;
pub const TS_BROWSER_SESSION_OUTCOME_FAILED: TsBrowserSessionOutcome = 3;

pub type TsCredentialState = c_int;
pub const TS_CREDENTIAL_STATE_AUTHORIZED: TsCredentialState = 0;
pub const TS_CREDENTIAL_STATE_REVOKED: TsCredentialState = 1;
pub const TS_CREDENTIAL_STATE_NOT_FOUND: TsCredentialState = 2;

pub type TsError = c_int;
pub const TS_ERROR_FAILED: TsError = 0;
pub const TS_ERROR_SECRET_SERVICE_UNAVAILABLE: TsError = 1;
pub const TS_ERROR_KEYRING_LOCKED: TsError = 2;
pub const TS_ERROR_DATA_KEY_MISSING: TsError = 3;
pub const TS_ERROR_DATA_KEY_CORRUPT: TsError = 4;
pub const TS_ERROR_INTEGRITY_CHECK_FAILED: TsError = 5;
pub const TS_ERROR_DATABASE_CORRUPT: TsError = 6;
pub const TS_ERROR_DATABASE_BUSY: TsError = 7;
pub const TS_ERROR_SCHEMA_TOO_NEW: TsError = 8;
pub const TS_ERROR_MIGRATION_FAILED: TsError = 9;
pub const TS_ERROR_UNSAFE_FILE_LAYOUT: TsError = 10;
pub const TS_ERROR_INVALID_INPUT: TsError = 11;
pub const TS_ERROR_IO_ERROR: TsError = 12;
pub const TS_ERROR_STORE_CLOSED: TsError = 13;
pub const TS_ERROR_TIMED_OUT: TsError = 14;
pub const TS_ERROR_WRONG_PASSPHRASE: TsError = 15;
pub const TS_ERROR_SCHEMA_TAMPERED: TsError = 16;
pub const TS_ERROR_DISK_FULL: TsError = 17;
pub const TS_ERROR_STORE_ROLLED_BACK: TsError = 18;
pub const TS_ERROR_NOT_A_STORE: TsError = 19;
pub const TS_ERROR_MIGRATION_REQUIRED: TsError = 20;
pub const TS_ERROR_WRONG_KEY_PROVIDER: TsError = 21;
pub const TS_ERROR_TPM_UNAVAILABLE: TsError = 22;
pub const TS_ERROR_TPM_MISMATCH: TsError = 23;
pub const TS_ERROR_INTERACTION_REQUIRED: TsError = 24;
pub const TS_ERROR_SERVER_DECLINED_SCOPES: TsError = 25;
pub const TS_ERROR_MINIMUM_TTL_TOO_LARGE: TsError = 26;
pub const TS_ERROR_NOT_CONNECTED_TO_INTERNET: TsError = 27;
pub const TS_ERROR_RATE_LIMITED: TsError = 28;
pub const TS_ERROR_SERVER_ERROR: TsError = 29;
pub const TS_ERROR_INVALID_CLIENT: TsError = 30;
pub const TS_ERROR_INVALID_REQUEST: TsError = 31;
pub const TS_ERROR_UNSUPPORTED_TOKEN_TYPE: TsError = 32;
pub const TS_ERROR_INVALID_GRANT: TsError = 33;
pub const TS_ERROR_UNEXPECTED_RESPONSE: TsError = 34;
pub const TS_ERROR_TLS_FAILURE: TsError = 35;
pub const TS_ERROR_INSECURE_CONFIGURATION: TsError = 36;
pub const TS_ERROR_STORAGE: TsError = 37;
pub const TS_ERROR_AUTHORIZATION_FAILED: TsError = 38;
pub const TS_ERROR_STATE_MISMATCH: TsError = 39;
pub const TS_ERROR_ID_TOKEN_INVALID: TsError = 40;
pub const TS_ERROR_LOOPBACK_UNAVAILABLE: TsError = 41;
pub const TS_ERROR_BROWSER_UNAVAILABLE: TsError = 42;
pub const TS_ERROR_USER_CHANGED: TsError = 43;
pub const TS_ERROR_NOT_REVOCABLE: TsError = 44;
pub const TS_ERROR_AUTHORIZATION_MISCONFIGURED: TsError = 45;
pub const TS_ERROR_ISSUER_MISMATCH: TsError = 46;
pub const TS_ERROR_DPOP_KEY_LOST: TsError = 47;
pub const TS_ERROR_UNSUPPORTED_BY_SERVER: TsError = 48;
pub const TS_ERROR_STEP_UP_REQUIRED: TsError = 49;
pub const TS_ERROR_ACCESS_TOKEN_REJECTED: TsError = 50;
pub const TS_ERROR_STORE_LOCKED: TsError = 51;
pub const TS_ERROR_USER_PRESENCE_DENIED: TsError = 52;
pub const TS_ERROR_LOCK_SOURCE_UNAVAILABLE: TsError = 53;
pub const TS_ERROR_WRONG_PIN: TsError = 54;
pub const TS_ERROR_TPM_LOCKED_OUT: TsError = 55;

pub type TsItemKind = c_int;
pub const TS_ITEM_KIND_REFRESH_TOKEN: TsItemKind = 1;
pub const TS_ITEM_KIND_APPLE_USER_ID: TsItemKind = 2;
pub const TS_ITEM_KIND_ACCESS_TOKEN: TsItemKind = 3;
pub const TS_ITEM_KIND_GENERIC: TsItemKind = 4;
pub const TS_ITEM_KIND_ID_TOKEN: TsItemKind = 5;
pub const TS_ITEM_KIND_PROFILE: TsItemKind = 6;

pub type TsLogoutOutcome = c_int;
pub const TS_LOGOUT_OUTCOME_REVOKED: TsLogoutOutcome = 0;
pub const TS_LOGOUT_OUTCOME_NOT_FOUND: TsLogoutOutcome = 1;
pub const TS_LOGOUT_OUTCOME_PENDING: TsLogoutOutcome = 2;
pub const TS_LOGOUT_OUTCOME_FAILED: TsLogoutOutcome = 3;
pub const TS_LOGOUT_OUTCOME_NOT_REVOCABLE: TsLogoutOutcome = 4;

pub type TsProtection = c_int;
pub const TS_PROTECTION_LEVEL_HARDWARE: TsProtection = 0;
pub const TS_PROTECTION_LEVEL_KEYRING: TsProtection = 1;
pub const TS_PROTECTION_LEVEL_PORTAL: TsProtection = 2;
pub const TS_PROTECTION_LEVEL_PASSPHRASE: TsProtection = 3;
pub const TS_PROTECTION_LEVEL_SOFTWARE_TPM: TsProtection = 4;

#[repr(C)]
pub struct TsSession {
    _data: [u8; 0],
    _marker: std::marker::PhantomData<(*mut u8, std::marker::PhantomPinned)>,
}  // TokenStore-1: opaque

pub type TsSignInPrompt = c_int;
pub const TS_SIGN_IN_PROMPT_DEFAULT: TsSignInPrompt = 0;
pub const TS_SIGN_IN_PROMPT_LOGIN: TsSignInPrompt = 1;
pub const TS_SIGN_IN_PROMPT_SELECT_ACCOUNT: TsSignInPrompt = 2;
pub const TS_SIGN_IN_PROMPT_CONSENT: TsSignInPrompt = 3;
pub const TS_SIGN_IN_PROMPT_NONE: TsSignInPrompt = 4;

#[repr(C)]
pub struct TsStore {
    _data: [u8; 0],
    _marker: std::marker::PhantomData<(*mut u8, std::marker::PhantomPinned)>,
}  // TokenStore-1: opaque

#[link(name = "tokenstore-gobject-1")]
extern "C" {
    pub fn ts_access_token_get_expires_at(self_: *mut TsAccessToken) -> i64;
    pub fn ts_access_token_get_token(self_: *mut TsAccessToken) -> *const c_char;
    pub fn ts_access_token_get_type() -> GType;
    pub fn ts_account_get_name(self_: *mut TsAccount) -> *const c_char;
    pub fn ts_account_get_signed_in(self_: *mut TsAccount) -> gboolean;
    pub fn ts_account_get_state(self_: *mut TsAccount) -> TsCredentialState;
    pub fn ts_account_get_type() -> GType;
    pub fn ts_account_get_user_id(self_: *mut TsAccount) -> *const c_char;
    pub fn ts_browser_session_outcome_get_type() -> GType;
    pub fn ts_credential_state_get_type() -> GType;
    pub fn ts_error_get_type() -> GType;
    pub fn ts_error_quark() -> GQuark;
    pub fn ts_item_kind_get_type() -> GType;
    pub fn ts_logout_outcome_get_type() -> GType;
    pub fn ts_protection_get_type() -> GType;
    pub fn ts_session_get_access_token_async(self_: *mut TsSession, account: *const c_char, audience: *const c_char, scopes: *const *const c_char, min_ttl_seconds: c_uint, cancellable: *mut GCancellable, callback: GAsyncReadyCallback, user_data: *mut c_void);
    pub fn ts_session_get_access_token_finish(self_: *mut TsSession, result: *mut GAsyncResult, error: *mut *mut GError) -> *mut TsAccessToken;
    pub fn ts_session_get_access_token_sync(self_: *mut TsSession, account: *const c_char, audience: *const c_char, scopes: *const *const c_char, min_ttl_seconds: c_uint, cancellable: *mut GCancellable, error: *mut *mut GError) -> *mut TsAccessToken;
    pub fn ts_session_get_store(self_: *mut TsSession) -> *mut TsStore;
    pub fn ts_session_get_type() -> GType;
    pub fn ts_session_logout_async(self_: *mut TsSession, account: *const c_char, cancellable: *mut GCancellable, callback: GAsyncReadyCallback, user_data: *mut c_void);
    pub fn ts_session_logout_browser_async(self_: *mut TsSession, account: *const c_char, cancellable: *mut GCancellable, callback: GAsyncReadyCallback, user_data: *mut c_void);
    pub fn ts_session_logout_browser_finish(self_: *mut TsSession, result: *mut GAsyncResult, browser_session: *mut TsBrowserSessionOutcome, browser_error_code: *mut *mut c_char, error: *mut *mut GError) -> TsLogoutOutcome;
    pub fn ts_session_logout_finish(self_: *mut TsSession, result: *mut GAsyncResult, error: *mut *mut GError) -> TsLogoutOutcome;
    pub fn ts_session_logout_sync(self_: *mut TsSession, account: *const c_char, cancellable: *mut GCancellable, error: *mut *mut GError) -> TsLogoutOutcome;
    pub fn ts_session_new_for_domain(store: *mut TsStore, domain: *const c_char, client_id: *const c_char, error: *mut *mut GError) -> *mut TsSession;
    pub fn ts_session_new_for_issuer(store: *mut TsStore, issuer: *const c_char, client_id: *const c_char, error: *mut *mut GError) -> *mut TsSession;
    pub fn ts_session_resume_async(self_: *mut TsSession, cancellable: *mut GCancellable, callback: GAsyncReadyCallback, user_data: *mut c_void);
    pub fn ts_session_resume_finish(self_: *mut TsSession, result: *mut GAsyncResult, still_pending: *mut c_uint, error: *mut *mut GError) -> gboolean;
    pub fn ts_session_resume_sync(self_: *mut TsSession, still_pending: *mut c_uint, cancellable: *mut GCancellable, error: *mut *mut GError) -> gboolean;
    pub fn ts_session_set_redirect_ports(self_: *mut TsSession, ports: *const u16, n_ports: usize);
    pub fn ts_session_sign_in_async(self_: *mut TsSession, account: *const c_char, scopes: *const *const c_char, cancellable: *mut GCancellable, callback: GAsyncReadyCallback, user_data: *mut c_void);
    pub fn ts_session_sign_in_finish(self_: *mut TsSession, result: *mut GAsyncResult, error: *mut *mut GError) -> *mut c_char;
    pub fn ts_session_sign_in_sync(self_: *mut TsSession, account: *const c_char, scopes: *const *const c_char, cancellable: *mut GCancellable, error: *mut *mut GError) -> *mut c_char;
    pub fn ts_sign_in_prompt_get_type() -> GType;
    pub fn ts_store_delete_async(self_: *mut TsStore, account: *const c_char, kind: TsItemKind, cancellable: *mut GCancellable, callback: GAsyncReadyCallback, user_data: *mut c_void);
    pub fn ts_store_delete_finish(self_: *mut TsStore, result: *mut GAsyncResult, error: *mut *mut GError) -> gboolean;
    pub fn ts_store_delete_sync(self_: *mut TsStore, account: *const c_char, kind: TsItemKind, cancellable: *mut GCancellable, error: *mut *mut GError) -> gboolean;
    pub fn ts_store_get_app_id(self_: *mut TsStore) -> *const c_char;
    pub fn ts_store_get_async(self_: *mut TsStore, account: *const c_char, kind: TsItemKind, cancellable: *mut GCancellable, callback: GAsyncReadyCallback, user_data: *mut c_void);
    pub fn ts_store_get_credential_state_async(self_: *mut TsStore, user_id: *const c_char, cancellable: *mut GCancellable, callback: GAsyncReadyCallback, user_data: *mut c_void);
    pub fn ts_store_get_credential_state_finish(self_: *mut TsStore, result: *mut GAsyncResult, error: *mut *mut GError) -> TsCredentialState;
    pub fn ts_store_get_credential_state_sync(self_: *mut TsStore, user_id: *const c_char, cancellable: *mut GCancellable, error: *mut *mut GError) -> TsCredentialState;
    pub fn ts_store_get_finish(self_: *mut TsStore, result: *mut GAsyncResult, error: *mut *mut GError) -> *mut GBytes;
    pub fn ts_store_get_locked(self_: *mut TsStore) -> gboolean;
    pub fn ts_store_get_path(self_: *mut TsStore) -> *const c_char;
    pub fn ts_store_get_protection(self_: *mut TsStore) -> TsProtection;
    pub fn ts_store_get_sync(self_: *mut TsStore, account: *const c_char, kind: TsItemKind, cancellable: *mut GCancellable, error: *mut *mut GError) -> *mut GBytes;
    pub fn ts_store_get_type() -> GType;
    pub fn ts_store_list_accounts_async(self_: *mut TsStore, cancellable: *mut GCancellable, callback: GAsyncReadyCallback, user_data: *mut c_void);
    pub fn ts_store_list_accounts_finish(self_: *mut TsStore, result: *mut GAsyncResult, error: *mut *mut GError) -> *mut GPtrArray;
    pub fn ts_store_list_accounts_sync(self_: *mut TsStore, cancellable: *mut GCancellable, error: *mut *mut GError) -> *mut GPtrArray;
    pub fn ts_store_lock_async(self_: *mut TsStore, all_processes: gboolean, cancellable: *mut GCancellable, callback: GAsyncReadyCallback, user_data: *mut c_void);
    pub fn ts_store_lock_finish(self_: *mut TsStore, result: *mut GAsyncResult, error: *mut *mut GError) -> gboolean;
    pub fn ts_store_lock_sync(self_: *mut TsStore, all_processes: gboolean, cancellable: *mut GCancellable, error: *mut *mut GError) -> gboolean;
    pub fn ts_store_new_async(app_id: *const c_char, path: *const c_char, cancellable: *mut GCancellable, callback: GAsyncReadyCallback, user_data: *mut c_void);
    pub fn ts_store_new_finish(result: *mut GAsyncResult, error: *mut *mut GError) -> *mut TsStore;
    pub fn ts_store_new_sync(app_id: *const c_char, path: *const c_char, cancellable: *mut GCancellable, error: *mut *mut GError) -> *mut TsStore;
    pub fn ts_store_new_with_pin_async(app_id: *const c_char, path: *const c_char, pin: *mut GBytes, cancellable: *mut GCancellable, callback: GAsyncReadyCallback, user_data: *mut c_void);
    pub fn ts_store_new_with_pin_sync(app_id: *const c_char, path: *const c_char, pin: *mut GBytes, cancellable: *mut GCancellable, error: *mut *mut GError) -> *mut TsStore;
    pub fn ts_store_set_async(self_: *mut TsStore, account: *const c_char, kind: TsItemKind, secret: *mut GBytes, cancellable: *mut GCancellable, callback: GAsyncReadyCallback, user_data: *mut c_void);
    pub fn ts_store_set_finish(self_: *mut TsStore, result: *mut GAsyncResult, error: *mut *mut GError) -> gboolean;
    pub fn ts_store_set_sync(self_: *mut TsStore, account: *const c_char, kind: TsItemKind, secret: *mut GBytes, cancellable: *mut GCancellable, error: *mut *mut GError) -> gboolean;
    pub fn ts_store_unlock_async(self_: *mut TsStore, all_processes: gboolean, cancellable: *mut GCancellable, callback: GAsyncReadyCallback, user_data: *mut c_void);
    pub fn ts_store_unlock_finish(self_: *mut TsStore, result: *mut GAsyncResult, error: *mut *mut GError) -> gboolean;
    pub fn ts_store_unlock_sync(self_: *mut TsStore, all_processes: gboolean, cancellable: *mut GCancellable, error: *mut *mut GError) -> gboolean;
}

#[link(name = "glib-2.0")]
extern "C" {
    pub fn g_bytes_get_data(bytes: *mut GBytes, size: *mut usize) -> *mut c_void;
    pub fn g_bytes_new(data: *mut c_void, size: usize) -> *mut GBytes;
    pub fn g_bytes_unref(bytes: *mut GBytes);
    pub fn g_error_free(error: *mut GError);
    pub fn g_free(mem: *mut c_void);
    pub fn g_idle_add_full(priority: c_int, function: GSourceFunc, data: *mut c_void, notify: GDestroyNotify) -> c_uint;
    pub fn g_main_loop_new(context: *mut GMainContext, is_running: gboolean) -> *mut GMainLoop;
    pub fn g_main_loop_quit(loop_: *mut GMainLoop);
    pub fn g_main_loop_run(loop_: *mut GMainLoop);
    pub fn g_main_loop_unref(loop_: *mut GMainLoop);
    pub fn g_ptr_array_unref(array: *mut GPtrArray);
    pub fn g_source_remove(tag: c_uint) -> gboolean;
    pub fn g_timeout_add_full(priority: c_int, interval: c_uint, function: GSourceFunc, data: *mut c_void, notify: GDestroyNotify) -> c_uint;
}

#[link(name = "gobject-2.0")]
extern "C" {
    pub fn g_object_ref(object: *mut c_void) -> *mut c_void;
    pub fn g_object_unref(object: *mut c_void);
    pub fn g_signal_connect_data(instance: *mut c_void, detailed_signal: *const c_char, c_handler: GCallback, data: *mut c_void, destroy_data: GClosureNotify, connect_flags: GConnectFlags) -> c_ulong;
    pub fn g_signal_handler_disconnect(instance: *mut c_void, handler_id: c_ulong);
}

#[link(name = "gio-2.0")]
extern "C" {
    pub fn g_cancellable_cancel(cancellable: *mut GCancellable);
    pub fn g_cancellable_new() -> *mut GCancellable;
    pub fn g_io_error_quark() -> GQuark;
}
