/* libcurl (Debian libcurl4-openssl-dev): the HTTP transport of AuthSession.
 * curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: these typed
 * wrappers pass each kind of option value through. */
#include <curl/curl.h>

static inline CURLcode tokenstore_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tokenstore_curl_setopt_offset(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

/* A string option: libcurl copies the string (every string option since 7.17, except
 * CURLOPT_POSTFIELDS, which takes a pointer instead: see the next one). */
static inline CURLcode tokenstore_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

/* A pointer option (userdata, CURLOPT_POSTFIELDS, CURLOPT_HTTPHEADER): not copied. */
static inline CURLcode tokenstore_curl_setopt_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}

/* CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION. */
static inline CURLcode tokenstore_curl_setopt_write(CURL *handle, CURLoption option, curl_write_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

static inline CURLcode tokenstore_curl_setopt_xferinfo(CURL *handle, curl_xferinfo_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, callback);
}

static inline CURLcode tokenstore_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

/* CURL_GLOBAL_DEFAULT as a long (the macro is an int expression). */
static inline long tokenstore_curl_global_default(void) {
    return CURL_GLOBAL_DEFAULT;
}
