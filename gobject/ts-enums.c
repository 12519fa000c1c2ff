/* ts-enums.c: the GTypes of the enumerations. */
#include "ts-enums.h"

#define DEFINE_ENUM(name, type_name, ...)                                                  \
    GType name (void)                                                                      \
    {                                                                                      \
        static gsize type = 0;                                                             \
        if (g_once_init_enter (&type)) {                                                   \
            static const GEnumValue values[] = {__VA_ARGS__, {0, NULL, NULL}};             \
            g_once_init_leave (&type, g_enum_register_static (type_name, values));        \
        }                                                                                  \
        return type;                                                                       \
    }

DEFINE_ENUM (ts_credential_state_get_type, "TsCredentialState",
             {TS_CREDENTIAL_STATE_AUTHORIZED, "TS_CREDENTIAL_STATE_AUTHORIZED", "authorized"},
             {TS_CREDENTIAL_STATE_REVOKED, "TS_CREDENTIAL_STATE_REVOKED", "revoked"},
             {TS_CREDENTIAL_STATE_NOT_FOUND, "TS_CREDENTIAL_STATE_NOT_FOUND", "not-found"})

DEFINE_ENUM (ts_protection_get_type, "TsProtection",
             {TS_PROTECTION_LEVEL_HARDWARE, "TS_PROTECTION_LEVEL_HARDWARE", "hardware"},
             {TS_PROTECTION_LEVEL_KEYRING, "TS_PROTECTION_LEVEL_KEYRING", "keyring"},
             {TS_PROTECTION_LEVEL_PORTAL, "TS_PROTECTION_LEVEL_PORTAL", "portal"},
             {TS_PROTECTION_LEVEL_PASSPHRASE, "TS_PROTECTION_LEVEL_PASSPHRASE", "passphrase"},
             {TS_PROTECTION_LEVEL_SOFTWARE_TPM, "TS_PROTECTION_LEVEL_SOFTWARE_TPM", "software-tpm"})

DEFINE_ENUM (ts_logout_outcome_get_type, "TsLogoutOutcome",
             {TS_LOGOUT_OUTCOME_REVOKED, "TS_LOGOUT_OUTCOME_REVOKED", "revoked"},
             {TS_LOGOUT_OUTCOME_NOT_FOUND, "TS_LOGOUT_OUTCOME_NOT_FOUND", "not-found"},
             {TS_LOGOUT_OUTCOME_PENDING, "TS_LOGOUT_OUTCOME_PENDING", "pending"},
             {TS_LOGOUT_OUTCOME_FAILED, "TS_LOGOUT_OUTCOME_FAILED", "failed"},
             {TS_LOGOUT_OUTCOME_NOT_REVOCABLE, "TS_LOGOUT_OUTCOME_NOT_REVOCABLE", "not-revocable"})

DEFINE_ENUM (ts_item_kind_get_type, "TsItemKind",
             {TS_ITEM_KIND_REFRESH_TOKEN, "TS_ITEM_KIND_REFRESH_TOKEN", "refresh-token"},
             {TS_ITEM_KIND_APPLE_USER_ID, "TS_ITEM_KIND_APPLE_USER_ID", "apple-user-id"},
             {TS_ITEM_KIND_ACCESS_TOKEN, "TS_ITEM_KIND_ACCESS_TOKEN", "access-token"},
             {TS_ITEM_KIND_GENERIC, "TS_ITEM_KIND_GENERIC", "generic"},
             {TS_ITEM_KIND_ID_TOKEN, "TS_ITEM_KIND_ID_TOKEN", "id-token"},
             {TS_ITEM_KIND_PROFILE, "TS_ITEM_KIND_PROFILE", "profile"})

DEFINE_ENUM (ts_sign_in_prompt_get_type, "TsSignInPrompt",
             {TS_SIGN_IN_PROMPT_DEFAULT, "TS_SIGN_IN_PROMPT_DEFAULT", "default"},
             {TS_SIGN_IN_PROMPT_LOGIN, "TS_SIGN_IN_PROMPT_LOGIN", "login"},
             {TS_SIGN_IN_PROMPT_SELECT_ACCOUNT, "TS_SIGN_IN_PROMPT_SELECT_ACCOUNT", "select-account"},
             {TS_SIGN_IN_PROMPT_CONSENT, "TS_SIGN_IN_PROMPT_CONSENT", "consent"},
             {TS_SIGN_IN_PROMPT_NONE, "TS_SIGN_IN_PROMPT_NONE", "none"})

DEFINE_ENUM (ts_browser_session_outcome_get_type, "TsBrowserSessionOutcome",
             {TS_BROWSER_SESSION_OUTCOME_NOT_ASKED, "TS_BROWSER_SESSION_OUTCOME_NOT_ASKED", "not-asked"},
             {TS_BROWSER_SESSION_OUTCOME_ENDED, "TS_BROWSER_SESSION_OUTCOME_ENDED", "ended"},
             {TS_BROWSER_SESSION_OUTCOME_NOT_ENDED, "TS_BROWSER_SESSION_OUTCOME_NOT_ENDED", "not-ended"},
             {TS_BROWSER_SESSION_OUTCOME_FAILED, "TS_BROWSER_SESSION_OUTCOME_FAILED", "failed"})
