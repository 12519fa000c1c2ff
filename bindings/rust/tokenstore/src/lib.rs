//! TokenStore for Rust: libtokenstore-gobject-1 (the GObject API of `TokenStore-1.gir`) in the
//! shape gtk-rs gives a GObject library: reference-counted wrappers, `async fn`s for the
//! `_async`/`_finish` pairs (run on the GLib main context), closures for signals and a
//! `Cancellable` that ends a call at once.
//!
//! The FFI declarations are in `tokenstore-sys`, generated from the `.gir` (scripts/gir-rust-sys,
//! what gtk-rs's `gir` does in its sys mode). This crate is the small safe layer `gir` would
//! generate over them, written by hand: Debian 12 packages neither `gir` nor the glib crates of a
//! matching version, and nothing here may come from a crate registry. It depends on nothing but
//! std and the -sys crate.
//!
//! ```no_run
//! use tokenstore::{ItemKind, Store};
//! tokenstore::main_loop_run(async {
//!     let store = Store::new("org.example.Notes", None, None).await?;
//!     store.set("alice", ItemKind::Generic, b"s3cret", None).await?;
//!     let secret = store.get("alice", ItemKind::Generic, None).await?;
//!     assert_eq!(secret.as_deref(), Some(&b"s3cret"[..]));
//!     Ok::<(), tokenstore::Error>(())
//! }).unwrap();
//! ```

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::fmt;
use std::future::Future;
use std::os::raw::{c_char, c_int, c_uint, c_ulong, c_void};
use std::pin::Pin;
use std::ptr;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

pub use tokenstore_sys as ffi;

// ---------------------------------------------------------------------------------------------
// Errors

/// A failed call: a `TsError` of the `ts-error-quark` domain (`code()`, the library's code string
/// in `message()`), or `G_IO_ERROR_CANCELLED` for a cancelled call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    domain: u32,
    code: i32,
    message: String,
}

impl Error {
    /// Takes ownership of a `GError` and frees it.
    unsafe fn from_glib_full(error: *mut ffi::GError) -> Error {
        let message = if (*error).message.is_null() {
            String::new()
        } else {
            CStr::from_ptr((*error).message).to_string_lossy().into_owned()
        };
        let result = Error { domain: (*error).domain, code: (*error).code, message };
        ffi::g_error_free(error);
        result
    }

    /// The call was cancelled through its `Cancellable`.
    pub fn is_cancelled(&self) -> bool {
        self.domain == unsafe { ffi::g_io_error_quark() } && self.code == ffi::G_IO_ERROR_CANCELLED
    }

    /// The `TsError` code (`ffi::TS_ERROR_*`), or `None` for another domain's error.
    pub fn code(&self) -> Option<ffi::TsError> {
        if self.domain == unsafe { ffi::ts_error_quark() } {
            Some(self.code)
        } else {
            None
        }
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// The result of a `_finish` or a `throws` call: the value, or the GError it set.
unsafe fn checked<T>(value: T, error: *mut ffi::GError) -> Result<T, Error> {
    if error.is_null() {
        Ok(value)
    } else {
        Err(Error::from_glib_full(error))
    }
}

fn cstring(text: &str) -> CString {
    CString::new(text).expect("a string for the C API holds no NUL byte")
}

/// A NULL-terminated `const char *const *` for the lifetime of the value.
struct StrV {
    _strings: Vec<CString>,
    pointers: Vec<*const c_char>,
}

impl StrV {
    fn new(items: &[&str]) -> StrV {
        let strings: Vec<CString> = items.iter().map(|item| cstring(item)).collect();
        let mut pointers: Vec<*const c_char> = strings.iter().map(|s| s.as_ptr()).collect();
        pointers.push(ptr::null());
        StrV { _strings: strings, pointers }
    }

    /// NULL for an empty list (the library's default), else the vector.
    fn as_ptr_or_null(&self) -> *const *const c_char {
        if self.pointers.len() == 1 {
            ptr::null()
        } else {
            self.pointers.as_ptr()
        }
    }
}

unsafe fn borrowed_str(text: *const c_char) -> Option<String> {
    if text.is_null() {
        None
    } else {
        Some(CStr::from_ptr(text).to_string_lossy().into_owned())
    }
}

// ---------------------------------------------------------------------------------------------
// Reference-counted GObject wrappers

macro_rules! gobject_wrapper {
    ($(#[$meta:meta])* $name:ident, $ffi:ty) => {
        $(#[$meta])*
        pub struct $name(ptr::NonNull<$ffi>);

        impl $name {
            /// Takes a reference the caller owns (`transfer full`).
            unsafe fn from_glib_full(pointer: *mut $ffi) -> $name {
                $name(ptr::NonNull::new(pointer).expect(concat!(stringify!($name), ": a NULL object")))
            }

            /// Adds a reference to an object the caller does not own (`transfer none`).
            unsafe fn from_glib_none(pointer: *mut $ffi) -> $name {
                ffi::g_object_ref(pointer as *mut c_void);
                $name::from_glib_full(pointer)
            }

            /// The C object, for calls this crate does not wrap.
            pub fn as_ptr(&self) -> *mut $ffi {
                self.0.as_ptr()
            }
        }

        impl Clone for $name {
            fn clone(&self) -> $name {
                unsafe { $name::from_glib_none(self.as_ptr()) }
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                unsafe { ffi::g_object_unref(self.as_ptr() as *mut c_void) }
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(formatter, "{}({:p})", stringify!($name), self.as_ptr())
            }
        }
    };
}

gobject_wrapper!(
    /// A `GCancellable`: `cancel()` from the main context ends the calls it was given.
    Cancellable, ffi::GCancellable);
gobject_wrapper!(
    /// A `TsStore`: the store file of one app, its items and accounts, and its change signals.
    Store, ffi::TsStore);
gobject_wrapper!(
    /// A `TsSession`: a store's session with one authorization server.
    Session, ffi::TsSession);
gobject_wrapper!(
    /// A `TsAccount`: one account of a store.
    Account, ffi::TsAccount);
gobject_wrapper!(
    /// A `TsAccessToken`: an access token and its expiry.
    AccessToken, ffi::TsAccessToken);

impl Cancellable {
    pub fn new() -> Cancellable {
        unsafe { Cancellable::from_glib_full(ffi::g_cancellable_new()) }
    }

    pub fn cancel(&self) {
        unsafe { ffi::g_cancellable_cancel(self.as_ptr()) }
    }
}

impl Default for Cancellable {
    fn default() -> Cancellable {
        Cancellable::new()
    }
}

fn cancellable_ptr(cancellable: Option<&Cancellable>) -> *mut ffi::GCancellable {
    cancellable.map_or(ptr::null_mut(), |c| c.as_ptr())
}

// ---------------------------------------------------------------------------------------------
// Enumerations

macro_rules! gir_enum {
    ($(#[$meta:meta])* $name:ident : $ffi:ty { $($variant:ident = $value:path),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $name {
            $($variant,)+
            /// A value a later version of the library adds.
            Unknown($ffi),
        }

        impl $name {
            pub fn from_glib(value: $ffi) -> $name {
                match value {
                    $($value => $name::$variant,)+
                    other => $name::Unknown(other),
                }
            }

            pub fn into_glib(self) -> $ffi {
                match self {
                    $($name::$variant => $value,)+
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}

gir_enum!(
    /// What a store item holds (`TsItemKind`).
    ItemKind: ffi::TsItemKind {
        RefreshToken = ffi::TS_ITEM_KIND_REFRESH_TOKEN,
        AppleUserId = ffi::TS_ITEM_KIND_APPLE_USER_ID,
        AccessToken = ffi::TS_ITEM_KIND_ACCESS_TOKEN,
        Generic = ffi::TS_ITEM_KIND_GENERIC,
        IdToken = ffi::TS_ITEM_KIND_ID_TOKEN,
        Profile = ffi::TS_ITEM_KIND_PROFILE,
    }
);
gir_enum!(
    /// A user's credential state (`TsCredentialState`).
    CredentialState: ffi::TsCredentialState {
        Authorized = ffi::TS_CREDENTIAL_STATE_AUTHORIZED,
        Revoked = ffi::TS_CREDENTIAL_STATE_REVOKED,
        NotFound = ffi::TS_CREDENTIAL_STATE_NOT_FOUND,
    }
);
gir_enum!(
    /// How a logout ended (`TsLogoutOutcome`).
    LogoutOutcome: ffi::TsLogoutOutcome {
        Revoked = ffi::TS_LOGOUT_OUTCOME_REVOKED,
        NotFound = ffi::TS_LOGOUT_OUTCOME_NOT_FOUND,
        Pending = ffi::TS_LOGOUT_OUTCOME_PENDING,
        Failed = ffi::TS_LOGOUT_OUTCOME_FAILED,
        NotRevocable = ffi::TS_LOGOUT_OUTCOME_NOT_REVOCABLE,
    }
);
gir_enum!(
    /// Where a store's data key lives (`TsProtection`).
    Protection: ffi::TsProtection {
        Hardware = ffi::TS_PROTECTION_LEVEL_HARDWARE,
        Keyring = ffi::TS_PROTECTION_LEVEL_KEYRING,
        Portal = ffi::TS_PROTECTION_LEVEL_PORTAL,
        Passphrase = ffi::TS_PROTECTION_LEVEL_PASSPHRASE,
        SoftwareTpm = ffi::TS_PROTECTION_LEVEL_SOFTWARE_TPM,
    }
);

// ---------------------------------------------------------------------------------------------
// The main context: an executor for the async calls, time-outs, a main loop

thread_local! {
    static TASKS: RefCell<HashMap<u64, Pin<Box<dyn Future<Output = ()>>>>> = RefCell::new(HashMap::new());
    static NEXT_TASK: Cell<u64> = Cell::new(1);
}

/// Wakes a task by scheduling its poll on the default main context (`g_idle_add_full` may be
/// called from any thread; the poll runs on the thread that runs the context).
struct TaskWaker {
    id: u64,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        schedule(self.id);
    }
}

fn schedule(id: u64) {
    unsafe extern "C" fn poll_task(data: *mut c_void) -> ffi::gboolean {
        poll(data as usize as u64);
        ffi::GFALSE
    }
    unsafe {
        ffi::g_idle_add_full(0, Some(poll_task), id as usize as *mut c_void, None);
    }
}

fn poll(id: u64) {
    let task = TASKS.with(|tasks| tasks.borrow_mut().remove(&id));
    if let Some(mut future) = task {
        let waker = Waker::from(Arc::new(TaskWaker { id }));
        let mut context = Context::from_waker(&waker);
        if future.as_mut().poll(&mut context).is_pending() {
            TASKS.with(|tasks| tasks.borrow_mut().insert(id, future));
        }
    }
}

/// Runs `future` on the default main context (as gtk-rs's `MainContext::spawn_local`): it must
/// be called on the thread that runs that context.
pub fn spawn_local<F: Future<Output = ()> + 'static>(future: F) {
    let id = NEXT_TASK.with(|next| {
        let id = next.get();
        next.set(id + 1);
        id
    });
    TASKS.with(|tasks| tasks.borrow_mut().insert(id, Box::pin(future)));
    schedule(id);
}

/// A `GMainLoop` on the default main context.
pub struct MainLoop(ptr::NonNull<ffi::GMainLoop>);

impl MainLoop {
    pub fn new() -> MainLoop {
        MainLoop(ptr::NonNull::new(unsafe { ffi::g_main_loop_new(ptr::null_mut(), ffi::GFALSE) }).expect("g_main_loop_new"))
    }

    pub fn run(&self) {
        unsafe { ffi::g_main_loop_run(self.0.as_ptr()) }
    }

    pub fn quit(&self) {
        unsafe { ffi::g_main_loop_quit(self.0.as_ptr()) }
    }
}

impl Default for MainLoop {
    fn default() -> MainLoop {
        MainLoop::new()
    }
}

impl Drop for MainLoop {
    fn drop(&mut self) {
        unsafe { ffi::g_main_loop_unref(self.0.as_ptr()) }
    }
}

/// Runs a main loop until `future` completes, and returns its output: the `main` of an app
/// that has no GTK application to run its loop.
pub fn main_loop_run<T: 'static, F: Future<Output = T> + 'static>(future: F) -> T {
    let main_loop = Rc::new(MainLoop::new());
    let output = Rc::new(RefCell::new(None));
    let (quit, slot) = (main_loop.clone(), output.clone());
    spawn_local(async move {
        let value = future.await;
        *slot.borrow_mut() = Some(value);
        quit.quit();
    });
    main_loop.run();
    let value = output.borrow_mut().take();
    value.expect("the main loop ended before the future")
}

/// A `g_timeout_add_full` source, removed when `Drop`ped... or when `function` returns false.
pub struct SourceId(c_uint, Rc<Cell<bool>>);

impl SourceId {
    /// Removes the source (nothing if it has ended).
    pub fn remove(self) {
        if !self.1.get() {
            self.1.set(true);
            unsafe { ffi::g_source_remove(self.0) };
        }
    }
}

/// Calls `function` every `interval_ms` on the default main context until it returns false.
pub fn timeout_add_local<F: FnMut() -> bool + 'static>(interval_ms: u32, function: F) -> SourceId {
    struct Timeout {
        function: Box<dyn FnMut() -> bool>,
        ended: Rc<Cell<bool>>,
    }
    unsafe extern "C" fn call(data: *mut c_void) -> ffi::gboolean {
        let timeout = &mut *(data as *mut Timeout);
        if (timeout.function)() {
            ffi::GTRUE
        } else {
            timeout.ended.set(true);
            ffi::GFALSE
        }
    }
    unsafe extern "C" fn destroy(data: *mut c_void) {
        let timeout = Box::from_raw(data as *mut Timeout);
        timeout.ended.set(true);
    }
    let ended = Rc::new(Cell::new(false));
    let data = Box::into_raw(Box::new(Timeout { function: Box::new(function), ended: ended.clone() }));
    let id = unsafe { ffi::g_timeout_add_full(0, interval_ms, Some(call), data as *mut c_void, Some(destroy)) };
    SourceId(id, ended)
}

/// A future that completes once, from a GLib callback on the main context.
struct Oneshot<T> {
    shared: Rc<RefCell<(Option<T>, Option<Waker>)>>,
}

impl<T> Oneshot<T> {
    fn new() -> (Oneshot<T>, impl FnOnce(T)) {
        let shared: Rc<RefCell<(Option<T>, Option<Waker>)>> = Rc::new(RefCell::new((None, None)));
        let sender = shared.clone();
        let complete = move |value: T| {
            let waker = {
                let mut state = sender.borrow_mut();
                state.0 = Some(value);
                state.1.take()
            };
            if let Some(waker) = waker {
                waker.wake();
            }
        };
        (Oneshot { shared }, complete)
    }
}

impl<T> Future for Oneshot<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<T> {
        let mut state = self.shared.borrow_mut();
        match state.0.take() {
            Some(value) => Poll::Ready(value),
            None => {
                state.1 = Some(context.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Completes after `milliseconds` on the main context.
pub fn sleep(milliseconds: u32) -> impl Future<Output = ()> {
    let (future, complete) = Oneshot::new();
    let mut complete = Some(complete);
    timeout_add_local(milliseconds, move || {
        if let Some(complete) = complete.take() {
            complete(());
        }
        false
    });
    future
}

type Finish = Box<dyn FnOnce(*mut ffi::GObject, *mut ffi::GAsyncResult)>;

/// An `_async`/`_finish` pair as a future: `start` makes the `_async` call with the callback and
/// its data; `finish` runs in the callback, on the main context, with the call's result.
fn gio_future<T: 'static>(
    start: impl FnOnce(ffi::GAsyncReadyCallback, *mut c_void),
    finish: impl FnOnce(*mut ffi::GObject, *mut ffi::GAsyncResult) -> T + 'static,
) -> impl Future<Output = T> {
    unsafe extern "C" fn ready(source: *mut ffi::GObject, result: *mut ffi::GAsyncResult, data: *mut c_void) {
        let finish = Box::from_raw(data as *mut Finish);
        finish(source, result);
    }
    let (future, complete) = Oneshot::new();
    let finish: Finish = Box::new(move |source, result| complete(finish(source, result)));
    start(Some(ready), Box::into_raw(Box::new(finish)) as *mut c_void);
    future
}

// ---------------------------------------------------------------------------------------------
// Signals

/// A connected signal handler; `disconnect` it, or it lasts as long as the object.
#[derive(Debug)]
pub struct SignalHandlerId(c_ulong);

unsafe fn connect<F>(instance: *mut c_void, signal: &str, trampoline: unsafe extern "C" fn(), function: F) -> SignalHandlerId {
    unsafe extern "C" fn destroy<F>(data: *mut c_void, _closure: *mut ffi::GClosure) {
        drop(Box::from_raw(data as *mut F));
    }
    let name = cstring(signal);
    let data = Box::into_raw(Box::new(function)) as *mut c_void;
    let id = ffi::g_signal_connect_data(instance, name.as_ptr(), Some(trampoline), data, Some(destroy::<F>), 0);
    SignalHandlerId(id)
}

fn disconnect(instance: *mut c_void, handler: SignalHandlerId) {
    unsafe { ffi::g_signal_handler_disconnect(instance, handler.0) }
}

// ---------------------------------------------------------------------------------------------
// Store

impl Store {
    /// Opens (or creates) the store of `app_id`; `path` None for the default place
    /// (`$XDG_DATA_HOME/<app_id>/tokens.sqlite`).
    pub async fn new(app_id: &str, path: Option<&str>, cancellable: Option<&Cancellable>) -> Result<Store, Error> {
        let (app_id, path) = (cstring(app_id), path.map(cstring));
        gio_future(
            |callback, data| unsafe {
                ffi::ts_store_new_async(app_id.as_ptr(), path.as_ref().map_or(ptr::null(), |p| p.as_ptr()),
                                        cancellable_ptr(cancellable), callback, data)
            },
            |_, result| unsafe {
                let mut error = ptr::null_mut();
                let store = ffi::ts_store_new_finish(result, &mut error);
                checked(store, error).map(|store| Store::from_glib_full(store))
            },
        )
        .await
    }

    /// Opens an existing store with its TPM + PIN key slot (`pin`: 4 to 64 bytes). A wrong PIN is
    /// `TS_ERROR_WRONG_PIN` (the message says how many more the TPM allows), a TPM in lockout
    /// `TS_ERROR_TPM_LOCKED_OUT`; no failure changes the store.
    pub async fn new_with_pin(app_id: &str, path: Option<&str>, pin: &[u8], cancellable: Option<&Cancellable>) -> Result<Store, Error> {
        let (app_id, path) = (cstring(app_id), path.map(cstring));
        let pin = unsafe { ffi::g_bytes_new(pin.as_ptr() as *mut c_void, pin.len()) };
        let result = gio_future(
            |callback, data| unsafe {
                ffi::ts_store_new_with_pin_async(app_id.as_ptr(), path.as_ref().map_or(ptr::null(), |p| p.as_ptr()), pin,
                                                 cancellable_ptr(cancellable), callback, data)
            },
            |_, result| unsafe {
                let mut error = ptr::null_mut();
                let store = ffi::ts_store_new_finish(result, &mut error);
                checked(store, error).map(|store| Store::from_glib_full(store))
            },
        )
        .await;
        unsafe { ffi::g_bytes_unref(pin) };
        result
    }

    pub fn app_id(&self) -> String {
        unsafe { borrowed_str(ffi::ts_store_get_app_id(self.as_ptr())).unwrap_or_default() }
    }

    pub fn protection(&self) -> Protection {
        Protection::from_glib(unsafe { ffi::ts_store_get_protection(self.as_ptr()) })
    }

    /// Whether the store is locked here (the `locked` property).
    pub fn is_locked(&self) -> bool {
        unsafe { ffi::ts_store_get_locked(self.as_ptr()) != ffi::GFALSE }
    }

    /// Locks the store (its data key wiped; reads fail with `TS_ERROR_STORE_LOCKED`), for every
    /// process that has it open when `all_processes` (as `tokenctl lock`).
    pub async fn lock(&self, all_processes: bool, cancellable: Option<&Cancellable>) -> Result<(), Error> {
        let this = self.as_ptr();
        gio_future(
            |callback, data| unsafe { ffi::ts_store_lock_async(this, all_processes as ffi::gboolean, cancellable_ptr(cancellable), callback, data) },
            move |_, result| unsafe {
                let mut error = ptr::null_mut();
                let done = ffi::ts_store_lock_finish(this, result, &mut error);
                checked(done, error).map(|_| ())
            },
        )
        .await
    }

    /// Unlocks the store (the key fetched again from its provider); `all_processes` also ends a
    /// lock for every process (as `tokenctl unlock`).
    pub async fn unlock(&self, all_processes: bool, cancellable: Option<&Cancellable>) -> Result<(), Error> {
        let this = self.as_ptr();
        gio_future(
            |callback, data| unsafe { ffi::ts_store_unlock_async(this, all_processes as ffi::gboolean, cancellable_ptr(cancellable), callback, data) },
            move |_, result| unsafe {
                let mut error = ptr::null_mut();
                let done = ffi::ts_store_unlock_finish(this, result, &mut error);
                checked(done, error).map(|_| ())
            },
        )
        .await
    }

    /// Stores `secret` as the `kind` item of `account`.
    pub async fn set(&self, account: &str, kind: ItemKind, secret: &[u8], cancellable: Option<&Cancellable>) -> Result<(), Error> {
        let account = cstring(account);
        let bytes = unsafe { ffi::g_bytes_new(secret.as_ptr() as *mut c_void, secret.len()) };
        let this = self.as_ptr();
        let result = gio_future(
            |callback, data| unsafe {
                ffi::ts_store_set_async(this, account.as_ptr(), kind.into_glib(), bytes, cancellable_ptr(cancellable), callback, data)
            },
            move |_, result| unsafe {
                let mut error = ptr::null_mut();
                let done = ffi::ts_store_set_finish(this, result, &mut error);
                checked(done, error).map(|_| ())
            },
        )
        .await;
        unsafe { ffi::g_bytes_unref(bytes) };
        result
    }

    /// The `kind` item of `account`, or None when there is none.
    pub async fn get(&self, account: &str, kind: ItemKind, cancellable: Option<&Cancellable>) -> Result<Option<Vec<u8>>, Error> {
        let account = cstring(account);
        let this = self.as_ptr();
        gio_future(
            |callback, data| unsafe {
                ffi::ts_store_get_async(this, account.as_ptr(), kind.into_glib(), cancellable_ptr(cancellable), callback, data)
            },
            move |_, result| unsafe {
                let mut error = ptr::null_mut();
                let bytes = ffi::ts_store_get_finish(this, result, &mut error);
                checked(bytes, error).map(|bytes| {
                    if bytes.is_null() {
                        return None;
                    }
                    let mut size = 0usize;
                    let data = ffi::g_bytes_get_data(bytes, &mut size) as *const u8;
                    let secret = if size == 0 { Vec::new() } else { std::slice::from_raw_parts(data, size).to_vec() };
                    ffi::g_bytes_unref(bytes);
                    Some(secret)
                })
            },
        )
        .await
    }

    /// The store's accounts.
    pub async fn list_accounts(&self, cancellable: Option<&Cancellable>) -> Result<Vec<Account>, Error> {
        let this = self.as_ptr();
        gio_future(
            |callback, data| unsafe { ffi::ts_store_list_accounts_async(this, cancellable_ptr(cancellable), callback, data) },
            move |_, result| unsafe {
                let mut error = ptr::null_mut();
                let array = ffi::ts_store_list_accounts_finish(this, result, &mut error);
                checked(array, error).map(|array| {
                    let items = (0..(*array).len as usize)
                        .map(|index| Account::from_glib_none(*(*array).pdata.add(index) as *mut ffi::TsAccount))
                        .collect();
                    ffi::g_ptr_array_unref(array);
                    items
                })
            },
        )
        .await
    }

    /// `account-removed`: an account's tokens were deleted, by this process or another.
    pub fn connect_account_removed<F: Fn(&Store, &Account) + 'static>(&self, function: F) -> SignalHandlerId {
        self.connect_account_signal("account-removed", function)
    }

    /// `account-added`: an account was signed in, by this process or another.
    pub fn connect_account_added<F: Fn(&Store, &Account) + 'static>(&self, function: F) -> SignalHandlerId {
        self.connect_account_signal("account-added", function)
    }

    /// `tokens-renewed`: a renewal stored new tokens for an account, in this process or another.
    pub fn connect_tokens_renewed<F: Fn(&Store, &Account) + 'static>(&self, function: F) -> SignalHandlerId {
        self.connect_account_signal("tokens-renewed", function)
    }

    /// A signal whose one argument is a `TsAccount`.
    fn connect_account_signal<F: Fn(&Store, &Account) + 'static>(&self, signal: &str, function: F) -> SignalHandlerId {
        unsafe extern "C" fn trampoline<F: Fn(&Store, &Account) + 'static>(this: *mut ffi::TsStore, account: *mut ffi::TsAccount, data: *mut c_void) {
            let function = &*(data as *const F);
            function(&Store::from_glib_none(this), &Account::from_glib_none(account));
        }
        unsafe {
            let trampoline: unsafe extern "C" fn(*mut ffi::TsStore, *mut ffi::TsAccount, *mut c_void) = trampoline::<F>;
            connect(self.as_ptr() as *mut c_void, signal, std::mem::transmute(trampoline), function)
        }
    }

    /// `credential-state-changed`: a user id's state changed (`from`, `to`).
    pub fn connect_credential_state_changed<F: Fn(&Store, &str, CredentialState, CredentialState) + 'static>(&self, function: F) -> SignalHandlerId {
        unsafe extern "C" fn trampoline<F: Fn(&Store, &str, CredentialState, CredentialState) + 'static>(
            this: *mut ffi::TsStore, user_id: *const c_char, from: c_int, to: c_int, data: *mut c_void,
        ) {
            let function = &*(data as *const F);
            let user_id = borrowed_str(user_id).unwrap_or_default();
            function(&Store::from_glib_none(this), &user_id, CredentialState::from_glib(from), CredentialState::from_glib(to));
        }
        unsafe {
            let trampoline: unsafe extern "C" fn(*mut ffi::TsStore, *const c_char, c_int, c_int, *mut c_void) = trampoline::<F>;
            connect(self.as_ptr() as *mut c_void, "credential-state-changed", std::mem::transmute(trampoline), function)
        }
    }

    pub fn disconnect(&self, handler: SignalHandlerId) {
        disconnect(self.as_ptr() as *mut c_void, handler)
    }
}

// ---------------------------------------------------------------------------------------------
// Session

impl Session {
    /// A session with an Auth0 tenant (`https://TENANT.auth0.com`, or a loopback test server).
    pub fn new_for_domain(store: &Store, domain: &str, client_id: &str) -> Result<Session, Error> {
        let (domain, client_id) = (cstring(domain), cstring(client_id));
        unsafe {
            let mut error = ptr::null_mut();
            let session = ffi::ts_session_new_for_domain(store.as_ptr(), domain.as_ptr(), client_id.as_ptr(), &mut error);
            checked(session, error).map(|session| Session::from_glib_full(session))
        }
    }

    /// A session with any OpenID Connect provider, found by discovery from `issuer`.
    pub fn new_for_issuer(store: &Store, issuer: &str, client_id: &str) -> Result<Session, Error> {
        let (issuer, client_id) = (cstring(issuer), cstring(client_id));
        unsafe {
            let mut error = ptr::null_mut();
            let session = ffi::ts_session_new_for_issuer(store.as_ptr(), issuer.as_ptr(), client_id.as_ptr(), &mut error);
            checked(session, error).map(|session| Session::from_glib_full(session))
        }
    }

    /// The loopback ports the browser sign-in listens on (0: any free port).
    pub fn set_redirect_ports(&self, ports: &[u16]) {
        unsafe { ffi::ts_session_set_redirect_ports(self.as_ptr(), ports.as_ptr(), ports.len()) }
    }

    /// Browser sign-in (RFC 8252 + PKCE) for `account`; the Apple user id. `scopes` empty for
    /// the default ones.
    pub async fn sign_in(&self, account: &str, scopes: &[&str], cancellable: Option<&Cancellable>) -> Result<String, Error> {
        let (account, scopes) = (cstring(account), StrV::new(scopes));
        let this = self.as_ptr();
        gio_future(
            |callback, data| unsafe {
                ffi::ts_session_sign_in_async(this, account.as_ptr(), scopes.as_ptr_or_null(), cancellable_ptr(cancellable), callback, data)
            },
            move |_, result| unsafe {
                let mut error = ptr::null_mut();
                let user_id = ffi::ts_session_sign_in_finish(this, result, &mut error);
                checked(user_id, error).map(|user_id| {
                    let text = borrowed_str(user_id).unwrap_or_default();
                    ffi::g_free(user_id as *mut c_void);
                    text
                })
            },
        )
        .await
    }

    /// An access token valid for `min_ttl_seconds` more, renewed (single flight) when needed.
    pub async fn access_token(&self, account: &str, audience: Option<&str>, scopes: &[&str], min_ttl_seconds: u32,
                              cancellable: Option<&Cancellable>) -> Result<AccessToken, Error> {
        let (account, audience, scopes) = (cstring(account), audience.map(cstring), StrV::new(scopes));
        let this = self.as_ptr();
        gio_future(
            |callback, data| unsafe {
                ffi::ts_session_get_access_token_async(this, account.as_ptr(), audience.as_ref().map_or(ptr::null(), |a| a.as_ptr()),
                                                       scopes.as_ptr_or_null(), min_ttl_seconds, cancellable_ptr(cancellable), callback, data)
            },
            move |_, result| unsafe {
                let mut error = ptr::null_mut();
                let token = ffi::ts_session_get_access_token_finish(this, result, &mut error);
                checked(token, error).map(|token| AccessToken::from_glib_full(token))
            },
        )
        .await
    }

    /// Logs `account` out: revokes its refresh token, deletes its tokens, records the user id
    /// revoked (a revocation that cannot reach the server is queued: `Pending`).
    pub async fn logout(&self, account: &str, cancellable: Option<&Cancellable>) -> Result<LogoutOutcome, Error> {
        let account = cstring(account);
        let this = self.as_ptr();
        gio_future(
            |callback, data| unsafe { ffi::ts_session_logout_async(this, account.as_ptr(), cancellable_ptr(cancellable), callback, data) },
            move |_, result| unsafe {
                let mut error = ptr::null_mut();
                let outcome = ffi::ts_session_logout_finish(this, result, &mut error);
                checked(outcome, error).map(LogoutOutcome::from_glib)
            },
        )
        .await
    }
}

// ---------------------------------------------------------------------------------------------
// Account, AccessToken

impl Account {
    pub fn name(&self) -> String {
        unsafe { borrowed_str(ffi::ts_account_get_name(self.as_ptr())).unwrap_or_default() }
    }

    pub fn user_id(&self) -> Option<String> {
        unsafe { borrowed_str(ffi::ts_account_get_user_id(self.as_ptr())) }
    }

    pub fn is_signed_in(&self) -> bool {
        unsafe { ffi::ts_account_get_signed_in(self.as_ptr()) != ffi::GFALSE }
    }

    pub fn state(&self) -> CredentialState {
        CredentialState::from_glib(unsafe { ffi::ts_account_get_state(self.as_ptr()) })
    }

    /// `notify::signed-in`.
    pub fn connect_signed_in_notify<F: Fn(&Account) + 'static>(&self, function: F) -> SignalHandlerId {
        unsafe extern "C" fn trampoline<F: Fn(&Account) + 'static>(this: *mut ffi::TsAccount, _pspec: *mut c_void, data: *mut c_void) {
            let function = &*(data as *const F);
            function(&Account::from_glib_none(this));
        }
        unsafe {
            let trampoline: unsafe extern "C" fn(*mut ffi::TsAccount, *mut c_void, *mut c_void) = trampoline::<F>;
            connect(self.as_ptr() as *mut c_void, "notify::signed-in", std::mem::transmute(trampoline), function)
        }
    }
}

impl AccessToken {
    pub fn token(&self) -> String {
        unsafe { borrowed_str(ffi::ts_access_token_get_token(self.as_ptr())).unwrap_or_default() }
    }

    /// Seconds since the Unix epoch.
    pub fn expires_at(&self) -> i64 {
        unsafe { ffi::ts_access_token_get_expires_at(self.as_ptr()) }
    }
}
