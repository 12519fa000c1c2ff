/* ts-account.c: TsAccount. */
#include "ts-private.h"

/**
 * TsAccount:
 *
 * One account of a [class@Store] (of the session layer's service, "auth0"): its name, the
 * Apple user id it is signed in as, whether it is signed in, and that user's credential state.
 *
 * A store hands out one object per account name ([method@Store.list_accounts_async], its
 * signals) and keeps its properties current as changes arrive from any process: connect to
 * `notify::signed-in` or `notify::state` to follow a logout made elsewhere.
 */
struct _TsAccount {
    GObject parent_instance;
    char *name;
    char *user_id;
    gboolean signed_in;
    TsCredentialState state;
};

G_DEFINE_FINAL_TYPE (TsAccount, ts_account, G_TYPE_OBJECT)

enum { PROP_0, PROP_NAME, PROP_USER_ID, PROP_SIGNED_IN, PROP_STATE, N_PROPS };
static GParamSpec *properties[N_PROPS];

static void
ts_account_finalize (GObject *object)
{
    TsAccount *self = TS_ACCOUNT (object);
    g_free (self->name);
    g_free (self->user_id);
    G_OBJECT_CLASS (ts_account_parent_class)->finalize (object);
}

static void
ts_account_get_property (GObject *object, guint id, GValue *value, GParamSpec *pspec)
{
    TsAccount *self = TS_ACCOUNT (object);
    switch (id) {
    case PROP_NAME: g_value_set_string (value, self->name); break;
    case PROP_USER_ID: g_value_set_string (value, self->user_id); break;
    case PROP_SIGNED_IN: g_value_set_boolean (value, self->signed_in); break;
    case PROP_STATE: g_value_set_enum (value, self->state); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, id, pspec);
    }
}

static void
ts_account_set_property (GObject *object, guint id, const GValue *value, GParamSpec *pspec)
{
    TsAccount *self = TS_ACCOUNT (object);
    switch (id) {
    case PROP_NAME: self->name = g_value_dup_string (value); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, id, pspec);
    }
}

static void
ts_account_class_init (TsAccountClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS (klass);
    object_class->finalize = ts_account_finalize;
    object_class->get_property = ts_account_get_property;
    object_class->set_property = ts_account_set_property;

    /**
     * TsAccount:name:
     *
     * The account's name (as the app chose it at sign-in).
     */
    properties[PROP_NAME] = g_param_spec_string ("name", NULL, NULL, NULL,
        G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
    /**
     * TsAccount:user-id:
     *
     * The Apple user id the account is signed in as, or %NULL.
     */
    properties[PROP_USER_ID] = g_param_spec_string ("user-id", NULL, NULL, NULL,
        G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
    /**
     * TsAccount:signed-in:
     *
     * Whether the account is signed in: a refresh token is stored and no logout has begun.
     */
    properties[PROP_SIGNED_IN] = g_param_spec_boolean ("signed-in", NULL, NULL, FALSE,
        G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
    /**
     * TsAccount:state:
     *
     * The credential state of the account's user.
     */
    properties[PROP_STATE] = g_param_spec_enum ("state", NULL, NULL, TS_TYPE_CREDENTIAL_STATE,
        TS_CREDENTIAL_STATE_NOT_FOUND, G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
ts_account_init (TsAccount *self)
{
    self->state = TS_CREDENTIAL_STATE_NOT_FOUND;
}

TsAccount *
ts_account_new_internal (const char *name)
{
    return g_object_new (TS_TYPE_ACCOUNT, "name", name, NULL);
}

/* Sets what changed and notifies each property that did. */
void
ts_account_update (TsAccount *self, const char *user_id, gboolean signed_in, gboolean set_state, TsCredentialState state)
{
    g_object_freeze_notify (G_OBJECT (self));
    if (g_strcmp0 (self->user_id, user_id) != 0) {
        g_free (self->user_id);
        self->user_id = g_strdup (user_id);
        g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_USER_ID]);
    }
    if (self->signed_in != signed_in) {
        self->signed_in = signed_in;
        g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_SIGNED_IN]);
    }
    if (set_state && self->state != state) {
        self->state = state;
        g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STATE]);
    }
    g_object_thaw_notify (G_OBJECT (self));
}

/**
 * ts_account_get_name:
 * @self: an account
 *
 * Returns: (transfer none): the account's name
 */
const char *
ts_account_get_name (TsAccount *self)
{
    g_return_val_if_fail (TS_IS_ACCOUNT (self), NULL);
    return self->name;
}

/**
 * ts_account_get_user_id:
 * @self: an account
 *
 * Returns: (transfer none) (nullable): the Apple user id, or %NULL
 */
const char *
ts_account_get_user_id (TsAccount *self)
{
    g_return_val_if_fail (TS_IS_ACCOUNT (self), NULL);
    return self->user_id;
}

/**
 * ts_account_get_signed_in:
 * @self: an account
 *
 * Returns: whether the account is signed in
 */
gboolean
ts_account_get_signed_in (TsAccount *self)
{
    g_return_val_if_fail (TS_IS_ACCOUNT (self), FALSE);
    return self->signed_in;
}

/**
 * ts_account_get_state:
 * @self: an account
 *
 * Returns: the credential state of the account's user
 */
TsCredentialState
ts_account_get_state (TsAccount *self)
{
    g_return_val_if_fail (TS_IS_ACCOUNT (self), TS_CREDENTIAL_STATE_NOT_FOUND);
    return self->state;
}
