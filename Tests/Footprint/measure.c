/*
 * measure: runs one command N times (after W warm-up runs) as a whole process and prints the
 * median and minimum wall time and the median peak RSS, for scripts/bench-footprint.
 *
 *   measure N W CMD [ARGS...]   ->   "median_ms=12.34 min_ms=11.02 rss_kib=11840 runs=15"
 *   measure N W CMD1... :: CMD2...   ->   one such line per command, the runs interleaved
 *
 * Wall time is CLOCK_MONOTONIC from just before fork to the child's exit; peak RSS is the
 * child's ru_maxrss from wait4. The command's stdout and stderr go to /dev/null; a run that
 * exits non-zero fails the measurement (exit 1), so a broken command cannot look fast.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

#define MAX_COMMANDS 4

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: measure N WARMUP CMD [ARGS...] [:: CMD [ARGS...]]...\n");
        return 64;
    }
    int n = atoi(argv[1]), warmup = atoi(argv[2]);
    if (n < 1 || n > 10000 || warmup < 0) return 64;
    /* The commands, split at "::", each a NULL-terminated argv inside ours. */
    char **commands[MAX_COMMANDS];
    int count = 0;
    commands[count++] = argv + 3;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "::") != 0) continue;
        argv[i] = NULL;
        if (count == MAX_COMMANDS || i + 1 >= argc) return 64;
        commands[count++] = argv + i + 1;
    }
    double *ms[MAX_COMMANDS], *rss[MAX_COMMANDS], m, r;
    for (int c = 0; c < count; c++) {
        ms[c] = calloc(n, sizeof *ms[c]);
        rss[c] = calloc(n, sizeof *rss[c]);
        if (!ms[c] || !rss[c] || !commands[c][0]) return 64;
    }
    /* Interleaved: run i of every command before run i + 1 of any, so a machine that gets busier
       or quieter during the measurement moves all of them alike. */
    for (int i = -warmup; i < n; i++) {
        for (int c = 0; c < count; c++) {
            int status = run(commands[c], i < 0 ? &m : &ms[c][i], i < 0 ? &r : &rss[c][i]);
            if (status != 0) { fprintf(stderr, "measure: %s exited %d\n", commands[c][0], status); return 1; }
        }
    }
    for (int c = 0; c < count; c++) {
        qsort(ms[c], n, sizeof *ms[c], compare);
        qsort(rss[c], n, sizeof *rss[c], compare);
        printf("median_ms=%.2f min_ms=%.2f rss_kib=%.0f runs=%d\n", ms[c][n / 2], ms[c][0], rss[c][n / 2], n);
    }
    return 0;
}
