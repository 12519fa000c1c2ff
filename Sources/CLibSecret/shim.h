/* secret-paths.h: the path-level Secret Service calls (SecretServicePaths). */
#define SECRET_API_SUBJECT_TO_CHANGE 1
#include <libsecret/secret.h>
