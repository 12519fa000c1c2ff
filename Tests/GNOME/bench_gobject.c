/*
 * `make bench` (scripts/bench-gnome): what libtokenstore-gobject adds, in a private keyring:
 *
 *   bench_gobject STORE N
 *     - the C ABI's synchronous ts_item_get on the main thread, N times, against
 *       ts_store_get_async on a GMainLoop (to its callback), N times: the p50 of each and the
 *       difference (the _async call's overhead: GTask, a worker thread, the main loop's dispatch);
 *     - change events from another process: this program again as "writer", which signs an
 *       account in and out N/10 times (each name carries its write's CLOCK_MONOTONIC time); the
 *       p50/p95 time until account-added / account-removed arrive here as signals.
 *   bench_gobject writer STORE N
 * Prints METRIC lines.
 */
#include <tokenstore.h>
#include <tokenstore-gobject.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int compare(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static double percentile(double *values, int count, double p) {
    qsort(values, (size_t) count, sizeof *values, compare);
    int index = (int) (p * count);
    return values[index < count ? index : count - 1];
}

static void done(GObject *source G_GNUC_UNUSED, GAsyncResult *result, gpointer data) {
    *(GAsyncResult **) data = g_object_ref(result);
}

typedef struct {
    double *latencies;
    int count, wanted;
} Events;

static void on_account(TsStore *store G_GNUC_UNUSED, TsAccount *account, gpointer data) {
    Events *events = data;
    gint64 now = g_get_monotonic_time();
    const char *name = ts_account_get_name(account);
    const char *at = strrchr(name, '-');
    if (strncmp(name, "bench-", 6) != 0 || at == NULL || events->count >= events->wanted) return;
    events->latencies[events->count++] = (double) (now - g_ascii_strtoll(at + 1, NULL, 10)) / 1000.0;
}

static int writer(const char *path, int rounds) {
    ts_store *store = NULL;
    ts_error *err = NULL;
    if (ts_store_open(path, "org.example.bench", &store, &err) != TS_OK) return 1;
    for (int i = 0; i < rounds; i++) {
        char name[64];
        snprintf(name, sizeof name, "bench-%d-%" G_GINT64_FORMAT, i, g_get_monotonic_time());
        ts_item_set(store, NULL, name, TS_KIND_REFRESH_TOKEN, (const uint8_t *) "rt", 2, NULL);
        g_usleep(20000);
        snprintf(name, sizeof name, "bench-%d-%" G_GINT64_FORMAT, i, g_get_monotonic_time());
        ts_item_set(store, NULL, name, TS_KIND_REFRESH_TOKEN, (const uint8_t *) "rt", 2, NULL);
        g_usleep(20000);
    }
    ts_store_close(store);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "writer") == 0) return writer(argv[2], atoi(argv[3]) / 10 > 0 ? atoi(argv[3]) / 10 : 1);
    if (argc != 3) {
        fprintf(stderr, "usage: bench_gobject STORE N | writer STORE N\n");
        return 64;
    }
    const char *path = argv[1];
    int n = atoi(argv[2]);
    g_autoptr(GError) error = NULL;
    g_autoptr(TsStore) store = ts_store_new_sync("org.example.bench", path, NULL, &error);
    if (store == NULL) {
        fprintf(stderr, "open: %s\n", error->message);
        return 1;
    }
    g_autoptr(GBytes) secret = g_bytes_new_static("a secret", 8);
    ts_store_set_sync(store, "alice", TS_ITEM_KIND_GENERIC, secret, NULL, NULL);
    ts_store *handle = NULL;
    ts_error *err = NULL;
    if (ts_store_open(path, "org.example.bench", &handle, &err) != TS_OK) return 1;

    double *sync = g_new(double, n), *async = g_new(double, n);
    for (int i = 0; i < n + 100; i++) { /* 100 warm-up calls of each, not counted */
        uint8_t *bytes = NULL;
        size_t length = 0;
        gint64 start = g_get_monotonic_time();
        ts_item_get(handle, NULL, "alice", TS_KIND_GENERIC, &bytes, &length, NULL);
        gint64 middle = g_get_monotonic_time();
        ts_bytes_free(bytes, length);
        GAsyncResult *result = NULL;
        gint64 async_start = g_get_monotonic_time();
        ts_store_get_async(store, "alice", TS_ITEM_KIND_GENERIC, NULL, done, &result);
        while (result == NULL) g_main_context_iteration(NULL, TRUE);
        GBytes *got = ts_store_get_finish(store, result, NULL);
        gint64 end = g_get_monotonic_time();
        g_bytes_unref(got);
        g_object_unref(result);
        if (i >= 100) {
            sync[i - 100] = (double) (middle - start);
            async[i - 100] = (double) (end - async_start);
        }
    }
    double sync_p50 = percentile(sync, n, 0.5), async_p50 = percentile(async, n, 0.5);
    printf("METRIC bench_gobject_async calls=%d sync_p50_us=%.1f async_p50_us=%.1f overhead_p50_us=%.1f\n", n, sync_p50,
           async_p50, async_p50 - sync_p50);

    int rounds = n / 10 > 0 ? n / 10 : 1;
    Events events = {g_new(double, 2 * rounds), 0, 2 * rounds};
    g_signal_connect(store, "account-added", G_CALLBACK(on_account), &events);
    g_autoptr(GSubprocess) child = g_subprocess_new(G_SUBPROCESS_FLAGS_NONE, &error, argv[0], "writer", path,
                                                     argv[2] /* N: the writer does N/10 rounds */, NULL);
    (void) child;
    /* The writer's two sets per round are both additions (new names): 2 per round. */
    gint64 deadline = g_get_monotonic_time() + 120 * G_USEC_PER_SEC;
    while (events.count < events.wanted && g_get_monotonic_time() < deadline) g_main_context_iteration(NULL, TRUE);
    printf("METRIC bench_change_events events=%d p50_ms=%.2f p95_ms=%.2f\n", events.count,
           percentile(events.latencies, events.count, 0.5), percentile(events.latencies, events.count, 0.95));
    ts_store_close(handle);
    return events.count == events.wanted ? 0 : 1;
}
