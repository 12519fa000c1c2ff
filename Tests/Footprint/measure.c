/*
 * measure: runs one command N times (after W warm-up runs) as a whole process and prints the
 * median and minimum wall time and the median peak RSS, for scripts/bench-footprint.
 *
 *   measure N W CMD [ARGS...]   ->   "median_ms=12.34 min_ms=11.02 rss_kib=11840 runs=15"
 *
 * Wall time is CLOCK_MONOTONIC from just before fork to the child's exit; peak RSS is the
 * child's ru_maxrss from wait4. The command's stdout and stderr go to /dev/null; a run that
 * exits non-zero fails the measurement (exit 1), so a broken command cannot look fast.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int run(char **argv, double *ms, double *rss_kib) {
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    struct rusage usage;
    if (wait4(pid, &status, 0, &usage) != pid) return -1;
    clock_gettime(CLOCK_MONOTONIC, &end);
    *ms = (end.tv_sec - start.tv_sec) * 1e3 + (end.tv_nsec - start.tv_nsec) / 1e6;
    *rss_kib = (double)usage.ru_maxrss;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: measure N WARMUP CMD [ARGS...]\n");
        return 64;
    }
    int n = atoi(argv[1]), warmup = atoi(argv[2]);
    if (n < 1 || n > 10000 || warmup < 0) return 64;
    double *ms = calloc(n, sizeof *ms), *rss = calloc(n, sizeof *rss), m, r;
    for (int i = 0; i < warmup; i++) {
        int status = run(argv + 3, &m, &r);
        if (status != 0) { fprintf(stderr, "measure: %s exited %d\n", argv[3], status); return 1; }
    }
    for (int i = 0; i < n; i++) {
        int status = run(argv + 3, &ms[i], &rss[i]);
        if (status != 0) { fprintf(stderr, "measure: %s exited %d\n", argv[3], status); return 1; }
    }
    qsort(ms, n, sizeof *ms, compare);
    qsort(rss, n, sizeof *rss, compare);
    printf("median_ms=%.2f min_ms=%.2f rss_kib=%.0f runs=%d\n", ms[n / 2], ms[0], rss[n / 2], n);
    return 0;
}
