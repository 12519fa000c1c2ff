/* OpenSSL 3 libcrypto, EVP API only: RSA PKCS#1 v1.5 verification (RS256) of ID tokens, and
 * the P-256 key of DPoP (ES256: key generation, import/export of its scalar, signing).
 * Deprecated (pre-3.0) declarations are hidden so none can be used by accident.
 *
 * libcrypto is loaded at the first RS256 key (dlopen "libcrypto.so.3"), not linked: loading and
 * relocating it at start cost every process ~1.4 MiB of memory and time for the few that verify
 * an ID token (SHA-256, for PKCE, comes from libsodium). Only the types and constants come from
 * the headers; the functions are reached through a `tokenstore_crypto` table. The test target
 * links libcrypto itself (it signs test tokens). */
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1

#include <dlfcn.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>

/* EVP_PKEY_PUBLIC_KEY is a macro expression Swift cannot import: the selection for
 * EVP_PKEY_fromdata of a public key. */
static inline int tokenstore_evp_pkey_public_key_selection(void) {
    return EVP_PKEY_PUBLIC_KEY;
}

/* EVP_PKEY_KEYPAIR, likewise: the selection for EVP_PKEY_fromdata of a private key. */
static inline int tokenstore_evp_pkey_keypair_selection(void) {
    return EVP_PKEY_KEYPAIR;
}

/* The libcrypto functions AuthSession calls (RSAPublicKey). */
struct tokenstore_crypto {
    __typeof__(OSSL_PARAM_BLD_new) *_Nonnull OSSL_PARAM_BLD_new;
    __typeof__(OSSL_PARAM_BLD_free) *_Nonnull OSSL_PARAM_BLD_free;
    __typeof__(OSSL_PARAM_BLD_push_BN) *_Nonnull OSSL_PARAM_BLD_push_BN;
    __typeof__(OSSL_PARAM_BLD_to_param) *_Nonnull OSSL_PARAM_BLD_to_param;
    __typeof__(OSSL_PARAM_free) *_Nonnull OSSL_PARAM_free;
    __typeof__(BN_bin2bn) *_Nonnull BN_bin2bn;
    __typeof__(BN_free) *_Nonnull BN_free;
    __typeof__(ERR_clear_error) *_Nonnull ERR_clear_error;
    __typeof__(EVP_PKEY_CTX_new_from_name) *_Nonnull EVP_PKEY_CTX_new_from_name;
    __typeof__(EVP_PKEY_CTX_free) *_Nonnull EVP_PKEY_CTX_free;
    __typeof__(EVP_PKEY_fromdata_init) *_Nonnull EVP_PKEY_fromdata_init;
    __typeof__(EVP_PKEY_fromdata) *_Nonnull EVP_PKEY_fromdata;
    __typeof__(EVP_PKEY_get_bits) *_Nonnull EVP_PKEY_get_bits;
    __typeof__(EVP_PKEY_free) *_Nonnull EVP_PKEY_free;
    __typeof__(EVP_MD_CTX_new) *_Nonnull EVP_MD_CTX_new;
    __typeof__(EVP_MD_CTX_free) *_Nonnull EVP_MD_CTX_free;
    __typeof__(EVP_DigestVerifyInit_ex) *_Nonnull EVP_DigestVerifyInit_ex;
    __typeof__(EVP_DigestVerify) *_Nonnull EVP_DigestVerify;
    /* DPoP's ES256 key (DPoPKey). */
    __typeof__(OSSL_PARAM_BLD_push_utf8_string) *_Nonnull OSSL_PARAM_BLD_push_utf8_string;
    __typeof__(OSSL_PARAM_BLD_push_octet_string) *_Nonnull OSSL_PARAM_BLD_push_octet_string;
    __typeof__(BN_bn2binpad) *_Nonnull BN_bn2binpad;
    __typeof__(BN_clear_free) *_Nonnull BN_clear_free;
    __typeof__(EVP_PKEY_keygen_init) *_Nonnull EVP_PKEY_keygen_init;
    __typeof__(EVP_PKEY_CTX_set_group_name) *_Nonnull EVP_PKEY_CTX_set_group_name;
    __typeof__(EVP_PKEY_generate) *_Nonnull EVP_PKEY_generate;
    __typeof__(EVP_PKEY_get_bn_param) *_Nonnull EVP_PKEY_get_bn_param;
    __typeof__(EVP_PKEY_get_octet_string_param) *_Nonnull EVP_PKEY_get_octet_string_param;
    __typeof__(EVP_DigestSignInit_ex) *_Nonnull EVP_DigestSignInit_ex;
    __typeof__(EVP_DigestSign) *_Nonnull EVP_DigestSign;
};

/* Loads libcrypto and fills `api`; the library stays loaded for the life of the process.
 * Returns 0, or 1 when libcrypto.so.3 cannot be loaded, or 2 when it lacks a function. */
static inline int tokenstore_crypto_load(struct tokenstore_crypto *_Nonnull api) {
    void *library = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return 1;
#define TOKENSTORE_CRYPTO_SYMBOL(name) \
    if ((*(void **)&api->name = dlsym(library, #name)) == NULL) return 2;
    TOKENSTORE_CRYPTO_SYMBOL(OSSL_PARAM_BLD_new)
    TOKENSTORE_CRYPTO_SYMBOL(OSSL_PARAM_BLD_free)
    TOKENSTORE_CRYPTO_SYMBOL(OSSL_PARAM_BLD_push_BN)
    TOKENSTORE_CRYPTO_SYMBOL(OSSL_PARAM_BLD_to_param)
    TOKENSTORE_CRYPTO_SYMBOL(OSSL_PARAM_free)
    TOKENSTORE_CRYPTO_SYMBOL(BN_bin2bn)
    TOKENSTORE_CRYPTO_SYMBOL(BN_free)
    TOKENSTORE_CRYPTO_SYMBOL(ERR_clear_error)
    TOKENSTORE_CRYPTO_SYMBOL(EVP_PKEY_CTX_new_from_name)
    TOKENSTORE_CRYPTO_SYMBOL(EVP_PKEY_CTX_free)
    TOKENSTORE_CRYPTO_SYMBOL(EVP_PKEY_fromdata_init)
    TOKENSTORE_CRYPTO_SYMBOL(EVP_PKEY_fromdata)
    TOKENSTORE_CRYPTO_SYMBOL(EVP_PKEY_get_bits)
    TOKENSTORE_CRYPTO_SYMBOL(EVP_PKEY_free)
    TOKENSTORE_CRYPTO_SYMBOL(EVP_MD_CTX_new)
    TOKENSTORE_CRYPTO_SYMBOL(EVP_MD_CTX_free)
    TOKENSTORE_CRYPTO_SYMBOL(EVP_DigestVerifyInit_ex)
    TOKENSTORE_CRYPTO_SYMBOL(EVP_DigestVerify)
    TOKENSTORE_CRYPTO_SYMBOL(OSSL_PARAM_BLD_push_utf8_string)
    TOKENSTORE_CRYPTO_SYMBOL(OSSL_PARAM_BLD_push_octet_string)
    TOKENSTORE_CRYPTO_SYMBOL(BN_bn2binpad)
    TOKENSTORE_CRYPTO_SYMBOL(BN_clear_free)
    TOKENSTORE_CRYPTO_SYMBOL(EVP_PKEY_keygen_init)
    TOKENSTORE_CRYPTO_SYMBOL(EVP_PKEY_CTX_set_group_name)
    TOKENSTORE_CRYPTO_SYMBOL(EVP_PKEY_generate)
    TOKENSTORE_CRYPTO_SYMBOL(EVP_PKEY_get_bn_param)
    TOKENSTORE_CRYPTO_SYMBOL(EVP_PKEY_get_octet_string_param)
    TOKENSTORE_CRYPTO_SYMBOL(EVP_DigestSignInit_ex)
    TOKENSTORE_CRYPTO_SYMBOL(EVP_DigestSign)
#undef TOKENSTORE_CRYPTO_SYMBOL
    return 0;
}
