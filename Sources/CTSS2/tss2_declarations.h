// The tpm2-tss types and constants shim.h uses, declared here so that building TokenStore (and
// every app that depends on it) needs no tpm2-tss headers (libtss2-dev): the library is reached
// only through dlopen, and only these layouts cross into it. Each one is tpm2-tss's own (the TPM
// 2.0 structures of TCG's "Part 2: Structures" as tpm2-tss lays them out in C), with the same
// names; a union is declared with the members TokenStore uses and the member that sets its size.
//
// scripts/check-tss2-shim compiles these against the installed headers (libtss2-dev, 3.2.1 on
// Debian 12) and compares every size, offset and constant, and the function types shim.h
// declares with tpm2-tss's prototypes; it also builds shim.h with /usr/include/tss2 hidden.
// Types tpm2-tss only hands back or takes as NULL (creation data and ticket, the ABI version,
// the contexts) stay incomplete.
#ifndef TOKENSTORE_TSS2_DECLARATIONS_H
#define TOKENSTORE_TSS2_DECLARATIONS_H
#include <stddef.h>
#include <stdint.h>

#ifndef TOKENSTORE_TSS2_SYSTEM_HEADERS  /* defined by the layout check, which has the real headers */

typedef uint8_t UINT8;
typedef uint8_t BYTE;
typedef uint16_t UINT16;
typedef uint32_t UINT32;
typedef uint64_t UINT64;
typedef uint32_t TSS2_RC;
typedef uint32_t ESYS_TR;
typedef UINT16 TPM2_ALG_ID;
typedef UINT16 TPM2_ECC_CURVE;
typedef UINT16 TPM2_KEY_BITS;
typedef UINT16 TPM2_SU;
typedef UINT16 TPM2_ST;
typedef UINT8 TPM2_SE;
typedef UINT32 TPM2_CAP;
typedef UINT32 TPM2_PT;
typedef UINT32 TPM2_HANDLE;
typedef UINT32 TPMA_OBJECT;
typedef UINT8 TPMA_SESSION;
typedef BYTE TPMI_YES_NO;

typedef struct ESYS_CONTEXT ESYS_CONTEXT;
typedef struct TSS2_TCTI_OPAQUE_CONTEXT_BLOB TSS2_TCTI_CONTEXT;
typedef struct TSS2_ABI_VERSION TSS2_ABI_VERSION;
typedef struct TPM2B_CREATION_DATA TPM2B_CREATION_DATA;
typedef struct TPMT_TK_CREATION TPMT_TK_CREATION;

/* Sized buffers: a digest holds the largest hash (SHA-512), a name a TPMT_HA rounded to 4. */
typedef struct TPM2B_DIGEST { UINT16 size; BYTE buffer[64]; } TPM2B_DIGEST;
typedef struct TPM2B_DATA { UINT16 size; BYTE buffer[64]; } TPM2B_DATA;
typedef TPM2B_DIGEST TPM2B_NONCE;
typedef TPM2B_DIGEST TPM2B_AUTH;
typedef struct TPM2B_NAME { UINT16 size; BYTE name[68]; } TPM2B_NAME;
typedef struct TPM2B_SENSITIVE_DATA { UINT16 size; BYTE buffer[256]; } TPM2B_SENSITIVE_DATA;
typedef struct TPM2B_ECC_PARAMETER { UINT16 size; BYTE buffer[128]; } TPM2B_ECC_PARAMETER;
typedef struct TPM2B_PUBLIC_KEY_RSA { UINT16 size; BYTE buffer[512]; } TPM2B_PUBLIC_KEY_RSA;
/* The buffer is sizeof(_PRIVATE): two TPM2B_DIGESTs and a TPM2B_SENSITIVE (1,550 bytes). */
typedef struct TPM2B_PRIVATE { UINT16 size; BYTE buffer[1550]; } TPM2B_PRIVATE;

typedef struct TPMS_PCR_SELECTION { TPM2_ALG_ID hash; UINT8 sizeofSelect; BYTE pcrSelect[4]; } TPMS_PCR_SELECTION;
typedef struct TPML_PCR_SELECTION { UINT32 count; TPMS_PCR_SELECTION pcrSelections[16]; } TPML_PCR_SELECTION;
typedef struct TPMT_TK_HASHCHECK { TPM2_ST tag; TPM2_HANDLE hierarchy; TPM2B_DIGEST digest; } TPMT_TK_HASHCHECK;

typedef struct TPMS_SENSITIVE_CREATE { TPM2B_AUTH userAuth; TPM2B_SENSITIVE_DATA data; } TPMS_SENSITIVE_CREATE;
typedef struct TPM2B_SENSITIVE_CREATE { UINT16 size; TPMS_SENSITIVE_CREATE sensitive; } TPM2B_SENSITIVE_CREATE;

/* Capabilities: the tagged TPM properties; the list of command codes (TPML_CC) sets the size. */
#define TPM2_MAX_TPM_PROPERTIES 127
typedef struct TPMS_TAGGED_PROPERTY { TPM2_PT property; UINT32 value; } TPMS_TAGGED_PROPERTY;
typedef struct TPML_TAGGED_TPM_PROPERTY { UINT32 count; TPMS_TAGGED_PROPERTY tpmProperty[TPM2_MAX_TPM_PROPERTIES]; } TPML_TAGGED_TPM_PROPERTY;
typedef union TPMU_CAPABILITIES { TPML_TAGGED_TPM_PROPERTY tpmProperties; struct { UINT32 count; UINT32 commandCodes[256]; } ppCommands; } TPMU_CAPABILITIES;
typedef struct TPMS_CAPABILITY_DATA { TPM2_CAP capability; TPMU_CAPABILITIES data; } TPMS_CAPABILITY_DATA;

/* Symmetric definitions. */
typedef union TPMU_SYM_KEY_BITS { TPM2_KEY_BITS aes; TPM2_KEY_BITS sym; TPM2_ALG_ID exclusiveOr; } TPMU_SYM_KEY_BITS;
typedef union TPMU_SYM_MODE { TPM2_ALG_ID aes; TPM2_ALG_ID sym; } TPMU_SYM_MODE;
typedef struct TPMT_SYM_DEF { TPM2_ALG_ID algorithm; TPMU_SYM_KEY_BITS keyBits; TPMU_SYM_MODE mode; } TPMT_SYM_DEF;
typedef struct TPMT_SYM_DEF_OBJECT { TPM2_ALG_ID algorithm; TPMU_SYM_KEY_BITS keyBits; TPMU_SYM_MODE mode; } TPMT_SYM_DEF_OBJECT;

/* Schemes: a hash, or a hash and a count (ECDAA, the largest). */
typedef struct TPMS_SCHEME_HASH { TPM2_ALG_ID hashAlg; } TPMS_SCHEME_HASH;
typedef struct TPMS_SCHEME_ECDAA { TPM2_ALG_ID hashAlg; UINT16 count; } TPMS_SCHEME_ECDAA;
typedef struct TPMS_SCHEME_XOR { TPM2_ALG_ID hashAlg; TPM2_ALG_ID kdf; } TPMS_SCHEME_XOR;
typedef union TPMU_SCHEME_KEYEDHASH { TPMS_SCHEME_HASH hmac; TPMS_SCHEME_XOR exclusiveOr; } TPMU_SCHEME_KEYEDHASH;
typedef struct TPMT_KEYEDHASH_SCHEME { TPM2_ALG_ID scheme; TPMU_SCHEME_KEYEDHASH details; } TPMT_KEYEDHASH_SCHEME;
typedef union TPMU_SIG_SCHEME { TPMS_SCHEME_HASH ecdsa; TPMS_SCHEME_ECDAA ecdaa; TPMS_SCHEME_HASH any; } TPMU_SIG_SCHEME;
typedef struct TPMT_SIG_SCHEME { TPM2_ALG_ID scheme; TPMU_SIG_SCHEME details; } TPMT_SIG_SCHEME;
typedef union TPMU_KDF_SCHEME { TPMS_SCHEME_HASH mgf1; TPMS_SCHEME_HASH kdf2; } TPMU_KDF_SCHEME;
typedef struct TPMT_KDF_SCHEME { TPM2_ALG_ID scheme; TPMU_KDF_SCHEME details; } TPMT_KDF_SCHEME;
typedef union TPMU_ASYM_SCHEME { TPMS_SCHEME_HASH ecdh; TPMS_SCHEME_HASH ecdsa; TPMS_SCHEME_ECDAA ecdaa; TPMS_SCHEME_HASH anySig; } TPMU_ASYM_SCHEME;
typedef struct TPMT_ASYM_SCHEME { TPM2_ALG_ID scheme; TPMU_ASYM_SCHEME details; } TPMT_ASYM_SCHEME;
typedef struct TPMT_RSA_SCHEME { TPM2_ALG_ID scheme; TPMU_ASYM_SCHEME details; } TPMT_RSA_SCHEME;
typedef struct TPMT_ECC_SCHEME { TPM2_ALG_ID scheme; TPMU_ASYM_SCHEME details; } TPMT_ECC_SCHEME;

/* Signatures: an RSA signature (a public key's size) sets the size. */
typedef struct TPMS_SIGNATURE_RSA { TPM2_ALG_ID hash; TPM2B_PUBLIC_KEY_RSA sig; } TPMS_SIGNATURE_RSA;
typedef struct TPMS_SIGNATURE_ECC { TPM2_ALG_ID hash; TPM2B_ECC_PARAMETER signatureR; TPM2B_ECC_PARAMETER signatureS; } TPMS_SIGNATURE_ECC;
typedef union TPMU_SIGNATURE { TPMS_SIGNATURE_RSA rsassa; TPMS_SIGNATURE_ECC ecdsa; TPMS_SCHEME_HASH any; } TPMU_SIGNATURE;
typedef struct TPMT_SIGNATURE { TPM2_ALG_ID sigAlg; TPMU_SIGNATURE signature; } TPMT_SIGNATURE;

/* Public areas: RSA parameters (with a 4-byte exponent) set the parameters' size and alignment,
 * an RSA modulus the unique field's. */
typedef struct TPMS_ECC_POINT { TPM2B_ECC_PARAMETER x; TPM2B_ECC_PARAMETER y; } TPMS_ECC_POINT;
typedef union TPMU_PUBLIC_ID { TPM2B_DIGEST keyedHash; TPM2B_DIGEST sym; TPM2B_PUBLIC_KEY_RSA rsa; TPMS_ECC_POINT ecc; } TPMU_PUBLIC_ID;
typedef struct TPMS_KEYEDHASH_PARMS { TPMT_KEYEDHASH_SCHEME scheme; } TPMS_KEYEDHASH_PARMS;
typedef struct TPMS_SYMCIPHER_PARMS { TPMT_SYM_DEF_OBJECT sym; } TPMS_SYMCIPHER_PARMS;
typedef struct TPMS_RSA_PARMS { TPMT_SYM_DEF_OBJECT symmetric; TPMT_RSA_SCHEME scheme; TPM2_KEY_BITS keyBits; UINT32 exponent; } TPMS_RSA_PARMS;
typedef struct TPMS_ECC_PARMS { TPMT_SYM_DEF_OBJECT symmetric; TPMT_ECC_SCHEME scheme; TPM2_ECC_CURVE curveID; TPMT_KDF_SCHEME kdf; } TPMS_ECC_PARMS;
typedef struct TPMS_ASYM_PARMS { TPMT_SYM_DEF_OBJECT symmetric; TPMT_ASYM_SCHEME scheme; } TPMS_ASYM_PARMS;
typedef union TPMU_PUBLIC_PARMS {
    TPMS_KEYEDHASH_PARMS keyedHashDetail;
    TPMS_SYMCIPHER_PARMS symDetail;
    TPMS_RSA_PARMS rsaDetail;
    TPMS_ECC_PARMS eccDetail;
    TPMS_ASYM_PARMS asymDetail;
} TPMU_PUBLIC_PARMS;
typedef struct TPMT_PUBLIC {
    TPM2_ALG_ID type;
    TPM2_ALG_ID nameAlg;
    TPMA_OBJECT objectAttributes;
    TPM2B_DIGEST authPolicy;
    TPMU_PUBLIC_PARMS parameters;
    TPMU_PUBLIC_ID unique;
} TPMT_PUBLIC;
typedef struct TPM2B_PUBLIC { UINT16 size; TPMT_PUBLIC publicArea; } TPM2B_PUBLIC;

/* A saved context (TPM2_ContextSave): the blob is sizeof(TPMS_CONTEXT_DATA), an integrity
 * digest and the encrypted context of at most TPM2_MAX_CONTEXT_SIZE (5,120) bytes. */
typedef struct TPM2B_CONTEXT_DATA { UINT16 size; BYTE buffer[5188]; } TPM2B_CONTEXT_DATA;
typedef struct TPMS_CONTEXT { UINT64 sequence; TPM2_HANDLE savedHandle; TPM2_HANDLE hierarchy; TPM2B_CONTEXT_DATA contextBlob; } TPMS_CONTEXT;

/* Constants (TPM 2.0 Part 2 and tpm2-tss's ESYS handles and response-code layers). */
#define TSS2_RC_SUCCESS ((TSS2_RC) 0)
#define TSS2_RC_LAYER_MASK ((TSS2_RC) (0xffU << 16))
#define TPM2_RC_INITIALIZE ((TSS2_RC) 0x100)
#define ESYS_TR_NONE 0xfffU
#define ESYS_TR_PASSWORD 0x0ffU
#define ESYS_TR_RH_OWNER 0x101U
#define TPM2_SU_CLEAR ((TPM2_SU) 0x0000)
#define TPM2_SE_HMAC ((TPM2_SE) 0x00)
#define TPM2_ST_HASHCHECK ((TPM2_ST) 0x8024)
#define TPM2_RH_NULL ((TPM2_HANDLE) 0x40000007)
#define TPM2_CAP_TPM_PROPERTIES ((TPM2_CAP) 0x00000006)
#define TPM2_PT_MANUFACTURER ((TPM2_PT) 0x00000105)
#define TPM2_PT_LOCKOUT_COUNTER ((TPM2_PT) 0x0000020E)
#define TPM2_ALG_AES ((TPM2_ALG_ID) 0x0006)
#define TPM2_ALG_KEYEDHASH ((TPM2_ALG_ID) 0x0008)
#define TPM2_ALG_SHA256 ((TPM2_ALG_ID) 0x000B)
#define TPM2_ALG_NULL ((TPM2_ALG_ID) 0x0010)
#define TPM2_ALG_ECDSA ((TPM2_ALG_ID) 0x0018)
#define TPM2_ALG_ECC ((TPM2_ALG_ID) 0x0023)
#define TPM2_ALG_CFB ((TPM2_ALG_ID) 0x0043)
#define TPM2_ECC_NIST_P256 ((TPM2_ECC_CURVE) 0x0003)
#define TPMA_OBJECT_FIXEDTPM ((TPMA_OBJECT) 0x00000002)
#define TPMA_OBJECT_FIXEDPARENT ((TPMA_OBJECT) 0x00000010)
#define TPMA_OBJECT_SENSITIVEDATAORIGIN ((TPMA_OBJECT) 0x00000020)
#define TPMA_OBJECT_USERWITHAUTH ((TPMA_OBJECT) 0x00000040)
#define TPMA_OBJECT_NODA ((TPMA_OBJECT) 0x00000400)
#define TPMA_OBJECT_RESTRICTED ((TPMA_OBJECT) 0x00010000)
#define TPMA_OBJECT_DECRYPT ((TPMA_OBJECT) 0x00020000)
#define TPMA_OBJECT_SIGN_ENCRYPT ((TPMA_OBJECT) 0x00040000)
#define TPMA_SESSION_DECRYPT ((TPMA_SESSION) 0x20)
#define TPMA_SESSION_ENCRYPT ((TPMA_SESSION) 0x40)

#endif /* TOKENSTORE_TSS2_SYSTEM_HEADERS */

/* The functions TokenStore calls, as tpm2-tss declares them (the layout check asserts each is
 * the type of the real function). */
typedef TSS2_RC tokenstore_tctildr_initialize_fn(const char *nameConf, TSS2_TCTI_CONTEXT **context);
typedef void tokenstore_tctildr_finalize_fn(TSS2_TCTI_CONTEXT **context);
typedef TSS2_RC tokenstore_esys_initialize_fn(ESYS_CONTEXT **esys_context, TSS2_TCTI_CONTEXT *tcti, TSS2_ABI_VERSION *abiVersion);
typedef void tokenstore_esys_finalize_fn(ESYS_CONTEXT **context);
typedef TSS2_RC tokenstore_esys_startup_fn(ESYS_CONTEXT *esysContext, TPM2_SU startupType);
typedef TSS2_RC tokenstore_esys_create_primary_fn(
    ESYS_CONTEXT *esysContext, ESYS_TR primaryHandle, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3,
    const TPM2B_SENSITIVE_CREATE *inSensitive, const TPM2B_PUBLIC *inPublic, const TPM2B_DATA *outsideInfo,
    const TPML_PCR_SELECTION *creationPCR, ESYS_TR *objectHandle, TPM2B_PUBLIC **outPublic,
    TPM2B_CREATION_DATA **creationData, TPM2B_DIGEST **creationHash, TPMT_TK_CREATION **creationTicket);
typedef TSS2_RC tokenstore_esys_create_fn(
    ESYS_CONTEXT *esysContext, ESYS_TR parentHandle, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3,
    const TPM2B_SENSITIVE_CREATE *inSensitive, const TPM2B_PUBLIC *inPublic, const TPM2B_DATA *outsideInfo,
    const TPML_PCR_SELECTION *creationPCR, TPM2B_PRIVATE **outPrivate, TPM2B_PUBLIC **outPublic,
    TPM2B_CREATION_DATA **creationData, TPM2B_DIGEST **creationHash, TPMT_TK_CREATION **creationTicket);
typedef TSS2_RC tokenstore_esys_load_fn(
    ESYS_CONTEXT *esysContext, ESYS_TR parentHandle, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3,
    const TPM2B_PRIVATE *inPrivate, const TPM2B_PUBLIC *inPublic, ESYS_TR *objectHandle);
typedef TSS2_RC tokenstore_esys_unseal_fn(
    ESYS_CONTEXT *esysContext, ESYS_TR itemHandle, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3,
    TPM2B_SENSITIVE_DATA **outData);
typedef TSS2_RC tokenstore_esys_sign_fn(
    ESYS_CONTEXT *esysContext, ESYS_TR keyHandle, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3,
    const TPM2B_DIGEST *digest, const TPMT_SIG_SCHEME *inScheme, const TPMT_TK_HASHCHECK *validation,
    TPMT_SIGNATURE **signature);
typedef TSS2_RC tokenstore_esys_flush_context_fn(ESYS_CONTEXT *esysContext, ESYS_TR flushHandle);
typedef TSS2_RC tokenstore_esys_get_capability_fn(
    ESYS_CONTEXT *esysContext, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3, TPM2_CAP capability,
    UINT32 property, UINT32 propertyCount, TPMI_YES_NO *moreData, TPMS_CAPABILITY_DATA **capabilityData);
typedef TSS2_RC tokenstore_esys_start_auth_session_fn(
    ESYS_CONTEXT *esysContext, ESYS_TR tpmKey, ESYS_TR bind, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3,
    const TPM2B_NONCE *nonceCaller, TPM2_SE sessionType, const TPMT_SYM_DEF *symmetric, TPM2_ALG_ID authHash,
    ESYS_TR *sessionHandle);
typedef TSS2_RC tokenstore_esys_trsess_set_attributes_fn(ESYS_CONTEXT *esysContext, ESYS_TR session, TPMA_SESSION flags, TPMA_SESSION mask);
typedef TSS2_RC tokenstore_esys_context_save_fn(ESYS_CONTEXT *esysContext, ESYS_TR saveHandle, TPMS_CONTEXT **context);
typedef TSS2_RC tokenstore_esys_context_load_fn(ESYS_CONTEXT *esysContext, const TPMS_CONTEXT *context, ESYS_TR *loadedHandle);
typedef TSS2_RC tokenstore_esys_tr_get_name_fn(ESYS_CONTEXT *esysContext, ESYS_TR handle, TPM2B_NAME **name);
typedef TSS2_RC tokenstore_esys_tr_set_auth_fn(ESYS_CONTEXT *esysContext, ESYS_TR handle, TPM2B_AUTH const *authValue);
typedef void tokenstore_esys_free_fn(void *ptr);
typedef TSS2_RC tokenstore_esys_tr_from_tpm_public_fn(
    ESYS_CONTEXT *esysContext, TPM2_HANDLE tpm_handle, ESYS_TR optionalSession1, ESYS_TR optionalSession2,
    ESYS_TR optionalSession3, ESYS_TR *object);
typedef TSS2_RC tokenstore_esys_tr_close_fn(ESYS_CONTEXT *esys_context, ESYS_TR *rsrc_handle);
typedef TSS2_RC tokenstore_mu_public_marshal_fn(TPM2B_PUBLIC const *src, uint8_t buffer[], size_t buffer_size, size_t *offset);
typedef TSS2_RC tokenstore_mu_public_unmarshal_fn(uint8_t const buffer[], size_t buffer_size, size_t *offset, TPM2B_PUBLIC *dest);
typedef TSS2_RC tokenstore_mu_private_marshal_fn(TPM2B_PRIVATE const *src, uint8_t buffer[], size_t buffer_size, size_t *offset);
typedef TSS2_RC tokenstore_mu_private_unmarshal_fn(uint8_t const buffer[], size_t buffer_size, size_t *offset, TPM2B_PRIVATE *dest);
typedef const char *tokenstore_rc_decode_fn(TSS2_RC rc);

#endif /* TOKENSTORE_TSS2_DECLARATIONS_H */
