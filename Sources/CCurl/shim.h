/* libcurl (Debian libcurl4-openssl-dev for the header, libcurl4 at run time): the HTTP
 * transport of AuthSession.
 *
 * libcurl is loaded at the first transfer (dlopen "libcurl.so.4"), not linked: with its
 * dependencies (OpenSSL, nghttp2, libssh2, LDAP, Kerberos, GnuTLS for librtmp, …) it is about
 * 30 shared libraries, and every process that links it loads and relocates them all at start,
 * also for commands that never use the network. Only the types and constants come from
 * curl.h; the functions are reached through a `tokenstore_curl` table. */
#include <curl/curl.h>
#include <dlfcn.h>
#include <stddef.h>

/* The libcurl functions AuthSession calls. curl_easy_setopt and curl_easy_getinfo are
 * variadic, which Swift cannot call: they stay untyped here and are called through the typed
 * wrappers below, which pass each kind of option value through. */
struct tokenstore_curl {
    __typeof__(curl_global_init) *_Nonnull global_init;
    __typeof__(curl_easy_init) *_Nonnull easy_init;
    __typeof__(curl_easy_cleanup) *_Nonnull easy_cleanup;
    __typeof__(curl_easy_strerror) *_Nonnull easy_strerror;
    __typeof__(curl_free) *_Nonnull free;
    __typeof__(curl_slist_append) *_Nonnull slist_append;
    __typeof__(curl_slist_free_all) *_Nonnull slist_free_all;
    __typeof__(curl_url) *_Nonnull url;
    __typeof__(curl_url_cleanup) *_Nonnull url_cleanup;
    __typeof__(curl_url_get) *_Nonnull url_get;
    __typeof__(curl_url_set) *_Nonnull url_set;
    __typeof__(curl_multi_init) *_Nonnull multi_init;
    __typeof__(curl_multi_cleanup) *_Nonnull multi_cleanup;
    __typeof__(curl_multi_add_handle) *_Nonnull multi_add_handle;
    __typeof__(curl_multi_remove_handle) *_Nonnull multi_remove_handle;
    __typeof__(curl_multi_perform) *_Nonnull multi_perform;
    __typeof__(curl_multi_poll) *_Nonnull multi_poll;
    __typeof__(curl_multi_wakeup) *_Nonnull multi_wakeup;
    __typeof__(curl_multi_info_read) *_Nonnull multi_info_read;
    void *_Nonnull easy_setopt;
    void *_Nonnull easy_getinfo;
};

/* Loads libcurl and fills `api`; the library stays loaded for the life of the process.
 * Returns 0, or 1 when libcurl.so.4 cannot be loaded, or 2 when it lacks a function (older
 * than 7.68: no curl_multi_poll). Does not call curl_global_init. */
static inline int tokenstore_curl_load(struct tokenstore_curl *_Nonnull api) {
    void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return 1;
#define TOKENSTORE_CURL_SYMBOL(field, name) \
    if ((*(void **)&api->field = dlsym(library, name)) == NULL) return 2;
    TOKENSTORE_CURL_SYMBOL(global_init, "curl_global_init")
    TOKENSTORE_CURL_SYMBOL(easy_init, "curl_easy_init")
    TOKENSTORE_CURL_SYMBOL(easy_cleanup, "curl_easy_cleanup")
    TOKENSTORE_CURL_SYMBOL(easy_strerror, "curl_easy_strerror")
    TOKENSTORE_CURL_SYMBOL(free, "curl_free")
    TOKENSTORE_CURL_SYMBOL(slist_append, "curl_slist_append")
    TOKENSTORE_CURL_SYMBOL(slist_free_all, "curl_slist_free_all")
    TOKENSTORE_CURL_SYMBOL(url, "curl_url")
    TOKENSTORE_CURL_SYMBOL(url_cleanup, "curl_url_cleanup")
    TOKENSTORE_CURL_SYMBOL(url_get, "curl_url_get")
    TOKENSTORE_CURL_SYMBOL(url_set, "curl_url_set")
    TOKENSTORE_CURL_SYMBOL(multi_init, "curl_multi_init")
    TOKENSTORE_CURL_SYMBOL(multi_cleanup, "curl_multi_cleanup")
    TOKENSTORE_CURL_SYMBOL(multi_add_handle, "curl_multi_add_handle")
    TOKENSTORE_CURL_SYMBOL(multi_remove_handle, "curl_multi_remove_handle")
    TOKENSTORE_CURL_SYMBOL(multi_perform, "curl_multi_perform")
    TOKENSTORE_CURL_SYMBOL(multi_poll, "curl_multi_poll")
    TOKENSTORE_CURL_SYMBOL(multi_wakeup, "curl_multi_wakeup")
    TOKENSTORE_CURL_SYMBOL(multi_info_read, "curl_multi_info_read")
    TOKENSTORE_CURL_SYMBOL(easy_setopt, "curl_easy_setopt")
    TOKENSTORE_CURL_SYMBOL(easy_getinfo, "curl_easy_getinfo")
#undef TOKENSTORE_CURL_SYMBOL
    return 0;
}

typedef CURLcode (*tokenstore_curl_setopt_fn)(CURL *, CURLoption, ...);
typedef CURLcode (*tokenstore_curl_getinfo_fn)(CURL *, CURLINFO, ...);

static inline CURLcode tokenstore_curl_setopt_long(
    const struct tokenstore_curl *_Nonnull api, CURL *handle, CURLoption option, long value) {
    return ((tokenstore_curl_setopt_fn)api->easy_setopt)(handle, option, value);
}

static inline CURLcode tokenstore_curl_setopt_offset(
    const struct tokenstore_curl *_Nonnull api, CURL *handle, CURLoption option, curl_off_t value) {
    return ((tokenstore_curl_setopt_fn)api->easy_setopt)(handle, option, value);
}

/* A string option: libcurl copies the string (every string option since 7.17, except
 * CURLOPT_POSTFIELDS, which takes a pointer instead: see the next one). */
static inline CURLcode tokenstore_curl_setopt_string(
    const struct tokenstore_curl *_Nonnull api, CURL *handle, CURLoption option, const char *value) {
    return ((tokenstore_curl_setopt_fn)api->easy_setopt)(handle, option, value);
}

/* A pointer option (userdata, CURLOPT_POSTFIELDS, CURLOPT_HTTPHEADER): not copied. */
static inline CURLcode tokenstore_curl_setopt_pointer(
    const struct tokenstore_curl *_Nonnull api, CURL *handle, CURLoption option, const void *value) {
    return ((tokenstore_curl_setopt_fn)api->easy_setopt)(handle, option, value);
}

/* CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION. */
static inline CURLcode tokenstore_curl_setopt_write(
    const struct tokenstore_curl *_Nonnull api, CURL *handle, CURLoption option, curl_write_callback callback) {
    return ((tokenstore_curl_setopt_fn)api->easy_setopt)(handle, option, callback);
}

static inline CURLcode tokenstore_curl_setopt_xferinfo(
    const struct tokenstore_curl *_Nonnull api, CURL *handle, curl_xferinfo_callback callback) {
    return ((tokenstore_curl_setopt_fn)api->easy_setopt)(handle, CURLOPT_XFERINFOFUNCTION, callback);
}

static inline CURLcode tokenstore_curl_getinfo_long(
    const struct tokenstore_curl *_Nonnull api, CURL *handle, CURLINFO info, long *value) {
    return ((tokenstore_curl_getinfo_fn)api->easy_getinfo)(handle, info, value);
}

/* CURL_GLOBAL_DEFAULT as a long (the macro is an int expression). */
static inline long tokenstore_curl_global_default(void) {
    return CURL_GLOBAL_DEFAULT;
}
