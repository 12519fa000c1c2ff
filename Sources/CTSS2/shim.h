// tpm2-tss (ESYS, the TCTI loader, the marshalling library) for TPMKeyProvider, with the
// object templates it uses written in C: TPM2B_PUBLIC is a tree of unions Swift imports badly.
//
// tpm2-tss is loaded at the first TPM call (dlopen of libtss2-esys.so.0 and its siblings), not
// linked: libtss2-esys brings libcrypto and libtss2-sys, which every process linking TokenStore
// would otherwise load at start (as libcurl and libcrypto are loaded only when first needed).
// The functions are reached through the `tokenstore_tss2` table; the types and constants are
// declared in tss2_declarations.h (checked against tpm2-tss's headers by scripts/check-tss2-shim),
// so that a build needs no tpm2-tss headers.
#include <dlfcn.h>
#include <string.h>
#include "tss2_declarations.h"

/* The tpm2-tss functions TPMSession calls. */
struct tokenstore_tss2 {
    tokenstore_tctildr_initialize_fn *_Nonnull tctildr_initialize;
    tokenstore_tctildr_finalize_fn *_Nonnull tctildr_finalize;
    tokenstore_esys_initialize_fn *_Nonnull esys_initialize;
    tokenstore_esys_finalize_fn *_Nonnull esys_finalize;
    tokenstore_esys_startup_fn *_Nonnull esys_startup;
    tokenstore_esys_create_primary_fn *_Nonnull esys_create_primary;
    tokenstore_esys_create_fn *_Nonnull esys_create;
    tokenstore_esys_load_fn *_Nonnull esys_load;
    tokenstore_esys_unseal_fn *_Nonnull esys_unseal;
    tokenstore_esys_sign_fn *_Nonnull esys_sign;
    tokenstore_esys_flush_context_fn *_Nonnull esys_flush_context;
    tokenstore_esys_get_capability_fn *_Nonnull esys_get_capability;
    tokenstore_esys_start_auth_session_fn *_Nonnull esys_start_auth_session;
    tokenstore_esys_trsess_set_attributes_fn *_Nonnull esys_trsess_set_attributes;
    tokenstore_esys_context_save_fn *_Nonnull esys_context_save;
    tokenstore_esys_context_load_fn *_Nonnull esys_context_load;
    tokenstore_esys_tr_get_name_fn *_Nonnull esys_tr_get_name;
    tokenstore_esys_free_fn *_Nonnull esys_free;
    tokenstore_mu_public_marshal_fn *_Nonnull mu_public_marshal;
    tokenstore_mu_public_unmarshal_fn *_Nonnull mu_public_unmarshal;
    tokenstore_mu_private_marshal_fn *_Nonnull mu_private_marshal;
    tokenstore_mu_private_unmarshal_fn *_Nonnull mu_private_unmarshal;
    tokenstore_rc_decode_fn *_Nonnull rc_decode;
    /* Added last, so that the fields before keep their offsets. */
    tokenstore_esys_tr_set_auth_fn *_Nonnull esys_tr_set_auth;
    tokenstore_esys_tr_from_tpm_public_fn *_Nonnull esys_tr_from_tpm_public;
    tokenstore_esys_tr_close_fn *_Nonnull esys_tr_close;
};

/* Loads tpm2-tss and fills `api`; the libraries stay loaded for the life of the process.
 * Returns 0, or 1 when a library cannot be loaded (its name in `*missing`), 2 when one lacks a function. */
static inline int tokenstore_tss2_load(struct tokenstore_tss2 *_Nonnull api, const char *_Nullable *_Nonnull missing) {
    static const char *const names[4] = { "libtss2-tctildr.so.0", "libtss2-esys.so.0", "libtss2-mu.so.0", "libtss2-rc.so.0" };
    void *libraries[4];
    for (int i = 0; i < 4; i++) {
        libraries[i] = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (libraries[i] == NULL) { *missing = names[i]; return 1; }
    }
#define TOKENSTORE_TSS2_SYMBOL(library, field, name) \
    if ((*(void **)&api->field = dlsym(libraries[library], name)) == NULL) { *missing = name; return 2; }
    TOKENSTORE_TSS2_SYMBOL(0, tctildr_initialize, "Tss2_TctiLdr_Initialize")
    TOKENSTORE_TSS2_SYMBOL(0, tctildr_finalize, "Tss2_TctiLdr_Finalize")
    TOKENSTORE_TSS2_SYMBOL(1, esys_initialize, "Esys_Initialize")
    TOKENSTORE_TSS2_SYMBOL(1, esys_finalize, "Esys_Finalize")
    TOKENSTORE_TSS2_SYMBOL(1, esys_startup, "Esys_Startup")
    TOKENSTORE_TSS2_SYMBOL(1, esys_create_primary, "Esys_CreatePrimary")
    TOKENSTORE_TSS2_SYMBOL(1, esys_create, "Esys_Create")
    TOKENSTORE_TSS2_SYMBOL(1, esys_load, "Esys_Load")
    TOKENSTORE_TSS2_SYMBOL(1, esys_unseal, "Esys_Unseal")
    TOKENSTORE_TSS2_SYMBOL(1, esys_sign, "Esys_Sign")
    TOKENSTORE_TSS2_SYMBOL(1, esys_flush_context, "Esys_FlushContext")
    TOKENSTORE_TSS2_SYMBOL(1, esys_get_capability, "Esys_GetCapability")
    TOKENSTORE_TSS2_SYMBOL(1, esys_start_auth_session, "Esys_StartAuthSession")
    TOKENSTORE_TSS2_SYMBOL(1, esys_trsess_set_attributes, "Esys_TRSess_SetAttributes")
    TOKENSTORE_TSS2_SYMBOL(1, esys_context_save, "Esys_ContextSave")
    TOKENSTORE_TSS2_SYMBOL(1, esys_context_load, "Esys_ContextLoad")
    TOKENSTORE_TSS2_SYMBOL(1, esys_tr_get_name, "Esys_TR_GetName")
    TOKENSTORE_TSS2_SYMBOL(1, esys_free, "Esys_Free")
    TOKENSTORE_TSS2_SYMBOL(2, mu_public_marshal, "Tss2_MU_TPM2B_PUBLIC_Marshal")
    TOKENSTORE_TSS2_SYMBOL(2, mu_public_unmarshal, "Tss2_MU_TPM2B_PUBLIC_Unmarshal")
    TOKENSTORE_TSS2_SYMBOL(2, mu_private_marshal, "Tss2_MU_TPM2B_PRIVATE_Marshal")
    TOKENSTORE_TSS2_SYMBOL(2, mu_private_unmarshal, "Tss2_MU_TPM2B_PRIVATE_Unmarshal")
    TOKENSTORE_TSS2_SYMBOL(3, rc_decode, "Tss2_RC_Decode")
    TOKENSTORE_TSS2_SYMBOL(1, esys_tr_set_auth, "Esys_TR_SetAuth")
    TOKENSTORE_TSS2_SYMBOL(1, esys_tr_from_tpm_public, "Esys_TR_FromTPMPublic")
    TOKENSTORE_TSS2_SYMBOL(1, esys_tr_close, "Esys_TR_Close")
#undef TOKENSTORE_TSS2_SYMBOL
    return 0;
}

/// The storage primary key TokenStore seals under, in the owner hierarchy: an ECC P-256
/// restricted decryption key with AES-128-CFB (the TCG's "SRK" template, no unique data).
/// The same template on the same TPM makes the same key every time (TPM2_CreatePrimary
/// derives it from the owner hierarchy's seed), so nothing is made persistent. It is also the
/// template systemd (systemd-tpm2-setup, >= 253) and tpm2-tools provision persistently at
/// TOKENSTORE_TPM_SRK_HANDLE: such a persistent key is this very key (same Name), which an open
/// uses instead of deriving it again (TPMSession.withLoaded).
static inline void tokenstore_tpm_primary_template(TPM2B_PUBLIC *out) {
    memset(out, 0, sizeof *out);
    out->publicArea.type = TPM2_ALG_ECC;
    out->publicArea.nameAlg = TPM2_ALG_SHA256;
    out->publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT
        | TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA
        | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
    out->publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
    out->publicArea.parameters.eccDetail.symmetric.keyBits.aes = 128;
    out->publicArea.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
    out->publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    out->publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    out->publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
}

/// A sealed data object (keyedhash, no scheme): fixed to this TPM and its parent, usable
/// with an empty password, no PCR policy (a firmware update would otherwise lock users out).
static inline void tokenstore_tpm_sealed_template(TPM2B_PUBLIC *out) {
    memset(out, 0, sizeof *out);
    out->publicArea.type = TPM2_ALG_KEYEDHASH;
    out->publicArea.nameAlg = TPM2_ALG_SHA256;
    out->publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT
        | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA;
    out->publicArea.parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_NULL;
}

/// A sealed data object for a PIN key slot: as the sealed template, but its authValue (set at
/// creation: tokenstore_tpm_sensitive_auth) is needed to unseal it, and it is subject to the TPM's
/// dictionary-attack protection (no noDA): each wrong authValue counts towards the TPM's lockout.
static inline void tokenstore_tpm_sealed_pin_template(TPM2B_PUBLIC *out) {
    tokenstore_tpm_sealed_template(out);
    out->publicArea.objectAttributes &= ~TPMA_OBJECT_NODA;
}

/// A DPoP signing key (TPMSigningKey): ECC P-256, unrestricted, sign only, scheme ECDSA with
/// SHA-256; made inside the TPM (sensitiveDataOrigin) and fixed to it and its parent, usable with
/// an empty password, not subject to dictionary-attack lockout, no PCR policy.
static inline void tokenstore_tpm_signing_template(TPM2B_PUBLIC *out) {
    memset(out, 0, sizeof *out);
    out->publicArea.type = TPM2_ALG_ECC;
    out->publicArea.nameAlg = TPM2_ALG_SHA256;
    out->publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT
        | TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA
        | TPMA_OBJECT_SIGN_ENCRYPT;
    out->publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
    out->publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_ECDSA;
    out->publicArea.parameters.eccDetail.scheme.details.ecdsa.hashAlg = TPM2_ALG_SHA256;
    out->publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    out->publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
}

/// Copies a big-endian ECC parameter into `out` (32 bytes), left-padded with zeros. 0 on success.
static inline int tokenstore_tpm_ecc_parameter32(const TPM2B_ECC_PARAMETER *in, uint8_t *out) {
    if (in->size > 32) return -1;
    memset(out, 0, 32);
    memcpy(out + (32 - in->size), in->buffer, in->size);
    return 0;
}

/// The public point (x, y: 32 bytes each) of a public area made from the signing template, after
/// checking it is that: ECC P-256, sign-only, ECDSA SHA-256, fixedTPM and fixedParent. 0 on success.
static inline int tokenstore_tpm_signing_point(const TPM2B_PUBLIC *in, uint8_t *x, uint8_t *y) {
    const TPMT_PUBLIC *area = &in->publicArea;
    TPMA_OBJECT needed = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SIGN_ENCRYPT;
    if (area->type != TPM2_ALG_ECC || area->parameters.eccDetail.curveID != TPM2_ECC_NIST_P256) return -1;
    if ((area->objectAttributes & needed) != needed) return -1;
    if (area->objectAttributes & (TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT)) return -1;
    if (area->parameters.eccDetail.scheme.scheme != TPM2_ALG_ECDSA
        || area->parameters.eccDetail.scheme.details.ecdsa.hashAlg != TPM2_ALG_SHA256) return -1;
    if (tokenstore_tpm_ecc_parameter32(&area->unique.ecc.x, x) != 0) return -1;
    return tokenstore_tpm_ecc_parameter32(&area->unique.ecc.y, y);
}

/// TPM2_Sign's inputs for a SHA-256 digest: the digest, the ECDSA SHA-256 scheme, and a null
/// validation ticket (the key is unrestricted: the TPM need not have hashed the message itself).
static inline void tokenstore_tpm_sign_inputs(const uint8_t *digest32, TPM2B_DIGEST *digest,
                                              TPMT_SIG_SCHEME *scheme, TPMT_TK_HASHCHECK *validation) {
    memset(digest, 0, sizeof *digest);
    digest->size = 32;
    memcpy(digest->buffer, digest32, 32);
    memset(scheme, 0, sizeof *scheme);
    scheme->scheme = TPM2_ALG_ECDSA;
    scheme->details.ecdsa.hashAlg = TPM2_ALG_SHA256;
    memset(validation, 0, sizeof *validation);
    validation->tag = TPM2_ST_HASHCHECK;
    validation->hierarchy = TPM2_RH_NULL;
}

/// r‖s (64 bytes, each left-padded to 32) of an ECDSA signature. 0 on success.
static inline int tokenstore_tpm_ecdsa_rs(const TPMT_SIGNATURE *in, uint8_t *out64) {
    if (in->sigAlg != TPM2_ALG_ECDSA) return -1;
    if (tokenstore_tpm_ecc_parameter32(&in->signature.ecdsa.signatureR, out64) != 0) return -1;
    return tokenstore_tpm_ecc_parameter32(&in->signature.ecdsa.signatureS, out64 + 32);
}

/// The sensitive part of a sealed object: `data` (at most 128 bytes), empty auth. 0 on success.
static inline int tokenstore_tpm_sensitive(TPM2B_SENSITIVE_CREATE *out, const uint8_t *data, size_t count) {
    memset(out, 0, sizeof *out);
    if (count > sizeof out->sensitive.data.buffer) return -1;
    out->sensitive.data.size = (UINT16)count;
    memcpy(out->sensitive.data.buffer, data, count);
    return 0;
}

/// The sensitive part of a sealed object with the authValue `auth` (at most 32 bytes, the nameAlg's
/// digest size): `data` as tokenstore_tpm_sensitive. 0 on success.
static inline int tokenstore_tpm_sensitive_auth(TPM2B_SENSITIVE_CREATE *out, const uint8_t *data, size_t count,
                                                const uint8_t *auth, size_t auth_count) {
    if (tokenstore_tpm_sensitive(out, data, count) != 0 || auth_count > 32) return -1;
    out->sensitive.userAuth.size = (UINT16)auth_count;
    memcpy(out->sensitive.userAuth.buffer, auth, auth_count);
    return 0;
}

/// `auth` (at most 32 bytes) as a TPM2B_AUTH for Esys_TR_SetAuth. 0 on success.
static inline int tokenstore_tpm_auth(TPM2B_AUTH *out, const uint8_t *auth, size_t auth_count) {
    memset(out, 0, sizeof *out);
    if (auth_count > 32) return -1;
    out->size = (UINT16)auth_count;
    memcpy(out->buffer, auth, auth_count);
    return 0;
}

/// The dictionary-attack state (TPM2_PT_LOCKOUT_COUNTER, TPM2_PT_MAX_AUTH_FAIL,
/// TPM2_PT_LOCKOUT_INTERVAL, TPM2_PT_LOCKOUT_RECOVERY: four variable properties in a row) into
/// `out` (0 where the TPM did not answer one), with one TPM2_GetCapability. Returns its TSS2_RC.
static inline TSS2_RC tokenstore_tpm_read_lockout(const struct tokenstore_tss2 *_Nonnull api, ESYS_CONTEXT *_Nonnull esys, uint32_t out[4]) {
    TPMI_YES_NO more = 0;
    TPMS_CAPABILITY_DATA *data = NULL;
    memset(out, 0, 4 * sizeof(uint32_t));
    TSS2_RC rc = api->esys_get_capability(esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                          TPM2_CAP_TPM_PROPERTIES, TPM2_PT_LOCKOUT_COUNTER, 4, &more, &data);
    if (rc != TSS2_RC_SUCCESS) return rc;
    if (data != NULL && data->capability == TPM2_CAP_TPM_PROPERTIES) {
        const TPML_TAGGED_TPM_PROPERTY *list = &data->data.tpmProperties;
        for (UINT32 i = 0; i < list->count && i < TPM2_MAX_TPM_PROPERTIES; i++) {
            UINT32 index = list->tpmProperty[i].property - TPM2_PT_LOCKOUT_COUNTER;
            if (index < 4) out[index] = list->tpmProperty[i].value;
        }
    }
    api->esys_free(data);
    return TSS2_RC_SUCCESS;
}

/// Wipes a sensitive structure before it is freed or goes out of scope.
static inline void tokenstore_tpm_wipe(void *p, size_t n) {
    volatile unsigned char *q = (volatile unsigned char *)p;
    while (n--) *q++ = 0;
}

/// TPM2_PT_MANUFACTURER and TPM2_PT_VENDOR_STRING_1..4 (five fixed properties in a row) into
/// `out` (0 where the TPM did not answer one), with one TPM2_GetCapability. Returns its TSS2_RC.
static inline TSS2_RC tokenstore_tpm_read_vendor(const struct tokenstore_tss2 *_Nonnull api, ESYS_CONTEXT *_Nonnull esys, uint32_t out[5]) {
    TPMI_YES_NO more = 0;
    TPMS_CAPABILITY_DATA *data = NULL;
    memset(out, 0, 5 * sizeof(uint32_t));
    TSS2_RC rc = api->esys_get_capability(esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                          TPM2_CAP_TPM_PROPERTIES, TPM2_PT_MANUFACTURER, 5, &more, &data);
    if (rc != TSS2_RC_SUCCESS) return rc;
    if (data != NULL && data->capability == TPM2_CAP_TPM_PROPERTIES) {
        const TPML_TAGGED_TPM_PROPERTY *list = &data->data.tpmProperties;
        for (UINT32 i = 0; i < list->count && i < TPM2_MAX_TPM_PROPERTIES; i++) {
            UINT32 index = list->tpmProperty[i].property - TPM2_PT_MANUFACTURER;
            if (index < 5) out[index] = list->tpmProperty[i].value;
        }
    }
    api->esys_free(data);
    return TSS2_RC_SUCCESS;
}

/// Starts the session that carries a secret across the TPM interface (TPM2_StartAuthSession): an
/// HMAC session salted with `salt_key` (a loaded key of this TPM: the salt is encrypted to its
/// public key, so only this TPM learns the session key, and a fresh nonce makes it new each time),
/// parameter encryption with AES-128-CFB both ways (TPMA_SESSION_DECRYPT: the command's first
/// parameter, e.g. TPM2_Create's inSensitive; TPMA_SESSION_ENCRYPT: the answer's first parameter,
/// e.g. TPM2_Unseal's outData), SHA-256. continueSession is clear: the TPM ends the session with
/// the command it authorizes (no flush needed after a success). `*session` is ESYS_TR_NONE unless
/// the TPM started one (flush it when this or the command fails). Returns the TSS2_RC.
static inline TSS2_RC tokenstore_tpm_start_salted_session(const struct tokenstore_tss2 *_Nonnull api, ESYS_CONTEXT *_Nonnull esys,
                                                          ESYS_TR salt_key, ESYS_TR *_Nonnull session) {
    TPMT_SYM_DEF symmetric;
    memset(&symmetric, 0, sizeof symmetric);
    symmetric.algorithm = TPM2_ALG_AES;
    symmetric.keyBits.aes = 128;
    symmetric.mode.aes = TPM2_ALG_CFB;
    *session = ESYS_TR_NONE;
    TSS2_RC rc = api->esys_start_auth_session(esys, salt_key, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                              NULL, TPM2_SE_HMAC, &symmetric, TPM2_ALG_SHA256, session);
    if (rc != TSS2_RC_SUCCESS) { *session = ESYS_TR_NONE; return rc; }
    return api->esys_trsess_set_attributes(esys, *session, TPMA_SESSION_DECRYPT | TPMA_SESSION_ENCRYPT, 0xff);
}

/// The persistent handle where systemd and tpm2-tools keep the owner hierarchy's storage root key
/// (the TCG's "SRK", TCG TPM v2.0 Provisioning Guidance: 0x81000001). TokenStore reads it, never
/// creates, evicts or flushes it: that is the machine owner's choice.
static const uint32_t tokenstore_tpm_srk_handle = 0x81000001U;
/// ESYS_TR_NONE, ESYS_TR_PASSWORD, ESYS_TR_RH_OWNER as values Swift sees (macros of casts).
static const ESYS_TR tokenstore_esys_tr_none = ESYS_TR_NONE;
static const ESYS_TR tokenstore_esys_tr_password = ESYS_TR_PASSWORD;
static const ESYS_TR tokenstore_esys_tr_owner = ESYS_TR_RH_OWNER;
/// TPM2_RC_INITIALIZE (TPM2_Startup already done) and the layer bits of a TSS2_RC (0: the TPM answered).
static const TSS2_RC tokenstore_rc_initialize = TPM2_RC_INITIALIZE;
static const TSS2_RC tokenstore_rc_layer_mask = TSS2_RC_LAYER_MASK;
