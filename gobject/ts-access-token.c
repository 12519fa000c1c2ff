/* ts-access-token.c: TsAccessToken. */
#include "ts-access-token.h"
#include "ts-private.h"

#include <string.h>

/**
 * TsAccessToken:
 *
 * An access token for an API, from [method@Session.get_access_token_async]: send
 * [property@AccessToken:token] as `Authorization: Bearer <token>`. The token is a credential:
 * do not log it. The object wipes its copy when it is finalized.
 */
struct _TsAccessToken {
    GObject parent_instance;
    char *token;
    gint64 expires_at;
};

G_DEFINE_FINAL_TYPE (TsAccessToken, ts_access_token, G_TYPE_OBJECT)

enum { PROP_0, PROP_TOKEN, PROP_EXPIRES_AT, N_PROPS };
static GParamSpec *properties[N_PROPS];

void
ts_secret_string_free (char *string)
{
    if (string == NULL) return;
    explicit_bzero (string, strlen (string));
    g_free (string);
}

static void
ts_access_token_finalize (GObject *object)
{
    TsAccessToken *self = TS_ACCESS_TOKEN (object);
    ts_secret_string_free (self->token);
    G_OBJECT_CLASS (ts_access_token_parent_class)->finalize (object);
}

static void
ts_access_token_get_property (GObject *object, guint id, GValue *value, GParamSpec *pspec)
{
    TsAccessToken *self = TS_ACCESS_TOKEN (object);
    switch (id) {
    case PROP_TOKEN: g_value_set_string (value, self->token); break;
    case PROP_EXPIRES_AT: g_value_set_int64 (value, self->expires_at); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, id, pspec);
    }
}

static void
ts_access_token_set_property (GObject *object, guint id, const GValue *value, GParamSpec *pspec)
{
    TsAccessToken *self = TS_ACCESS_TOKEN (object);
    switch (id) {
    case PROP_TOKEN: self->token = g_value_dup_string (value); break;
    case PROP_EXPIRES_AT: self->expires_at = g_value_get_int64 (value); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, id, pspec);
    }
}

static void
ts_access_token_class_init (TsAccessTokenClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS (klass);
    object_class->finalize = ts_access_token_finalize;
    object_class->get_property = ts_access_token_get_property;
    object_class->set_property = ts_access_token_set_property;
    /**
     * TsAccessToken:token:
     *
     * The access token.
     */
    properties[PROP_TOKEN] = g_param_spec_string ("token", NULL, NULL, NULL,
        G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
    /**
     * TsAccessToken:expires-at:
     *
     * When the token expires, in seconds since the Unix epoch; 0 when the server gave no expiry.
     */
    properties[PROP_EXPIRES_AT] = g_param_spec_int64 ("expires-at", NULL, NULL, 0, G_MAXINT64, 0,
        G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
ts_access_token_init (TsAccessToken *self)
{
    (void) self;
}

/**
 * ts_access_token_get_token:
 * @self: an access token
 *
 * Returns: (transfer none): the token
 */
const char *
ts_access_token_get_token (TsAccessToken *self)
{
    g_return_val_if_fail (TS_IS_ACCESS_TOKEN (self), NULL);
    return self->token;
}

/**
 * ts_access_token_get_expires_at:
 * @self: an access token
 *
 * Returns: the expiry in seconds since the Unix epoch, or 0 when unknown
 */
gint64
ts_access_token_get_expires_at (TsAccessToken *self)
{
    g_return_val_if_fail (TS_IS_ACCESS_TOKEN (self), 0);
    return self->expires_at;
}
