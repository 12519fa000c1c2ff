/* ts_get STORE SERVICE ACCOUNT: ts_store_open + one ts_item_get (generic kind), the C ABI's
 * cost for an app reading one secret; prints the secret's length, never the secret. */
#include <stdio.h>
#include <tokenstore.h>

int main(int argc, char **argv) {
    if (argc != 4) return 64;
    ts_store *store = NULL;
    ts_error *err = NULL;
    if (ts_store_open(argv[1], "org.example.bench", &store, &err) != TS_OK) {
        fprintf(stderr, "open: %s\n", ts_error_code(err));
        ts_error_free(err);
        return 1;
    }
    uint8_t *bytes = NULL;
    size_t length = 0;
    int status = ts_item_get(store, argv[2], argv[3], TS_KIND_GENERIC, &bytes, &length, &err);
    if (status != TS_OK) {
        fprintf(stderr, "get: %s\n", status == TS_NOT_FOUND ? "not found" : ts_error_code(err));
        ts_error_free(err);
        ts_store_close(store);
        return 1;
    }
    printf("%zu\n", length);
    ts_bytes_free(bytes, length);
    ts_store_close(store);
    return 0;
}
