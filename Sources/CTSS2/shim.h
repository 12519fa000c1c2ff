// tpm2-tss (ESYS, the TCTI loader, the marshalling library) for TPMKeyProvider, with the
// object templates it uses written in C: TPM2B_PUBLIC is a tree of unions Swift imports badly.
#include <string.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_tctildr.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>

/// The storage primary key TokenStore seals under, in the owner hierarchy: an ECC P-256
/// restricted decryption key with AES-128-CFB (the TCG's "SRK" template, no unique data).
/// The same template on the same TPM makes the same key every time (TPM2_CreatePrimary
/// derives it from the owner hierarchy's seed), so nothing is made persistent.
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

/// The sensitive part of a sealed object: `data` (at most 128 bytes), empty auth. 0 on success.
static inline int tokenstore_tpm_sensitive(TPM2B_SENSITIVE_CREATE *out, const uint8_t *data, size_t count) {
    memset(out, 0, sizeof *out);
    if (count > sizeof out->sensitive.data.buffer) return -1;
    out->sensitive.data.size = (UINT16)count;
    memcpy(out->sensitive.data.buffer, data, count);
    return 0;
}

/// Wipes a sensitive structure before it is freed or goes out of scope.
static inline void tokenstore_tpm_wipe(void *p, size_t n) {
    volatile unsigned char *q = (volatile unsigned char *)p;
    while (n--) *q++ = 0;
}

/// ESYS_TR_NONE, ESYS_TR_PASSWORD, ESYS_TR_RH_OWNER as values Swift sees (macros of casts).
static const ESYS_TR tokenstore_esys_tr_none = ESYS_TR_NONE;
static const ESYS_TR tokenstore_esys_tr_password = ESYS_TR_PASSWORD;
static const ESYS_TR tokenstore_esys_tr_owner = ESYS_TR_RH_OWNER;
/// TPM2_RC_INITIALIZE (TPM2_Startup already done) and the layer bits of a TSS2_RC (0: the TPM answered).
static const TSS2_RC tokenstore_rc_initialize = TPM2_RC_INITIALIZE;
static const TSS2_RC tokenstore_rc_layer_mask = TSS2_RC_LAYER_MASK;
