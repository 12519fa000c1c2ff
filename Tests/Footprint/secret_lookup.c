/* secret_lookup SERVICE ACCOUNT: one secret_password_lookup_sync, the cost of reading one
 * secret straight from the Secret Service with libsecret; prints its length, never the secret. */
#include <libsecret/secret.h>
#include <stdio.h>
#include <string.h>

static const SecretSchema schema = {
    "org.example.bench.Item", SECRET_SCHEMA_DONT_MATCH_NAME,
    { { "service", SECRET_SCHEMA_ATTRIBUTE_STRING }, { "account", SECRET_SCHEMA_ATTRIBUTE_STRING }, { NULL, 0 } }
};

int main(int argc, char **argv) {
    if (argc != 3) return 64;
    GError *error = NULL;
    gchar *secret = secret_password_lookup_sync(&schema, NULL, &error, "service", argv[1], "account", argv[2], NULL);
    if (error != NULL || secret == NULL) {
        fprintf(stderr, "lookup: %s\n", error ? error->message : "not found");
        return 1;
    }
    printf("%zu\n", strlen(secret));
    secret_password_free(secret);
    return 0;
}
