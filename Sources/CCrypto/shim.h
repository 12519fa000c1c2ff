/* OpenSSL 3 libcrypto, EVP API only: SHA-256 and RSA PKCS#1 v1.5 verification (RS256).
 * Deprecated (pre-3.0) declarations are hidden so none can be used by accident. */
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1

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
