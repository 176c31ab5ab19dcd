/* What the preload adds to the start and exit of a process that never touches CUDA, NCCL or
 * verbs: `bench_startup LIB ROUNDS -- PROG ARGS...` runs PROG ROUNDS times in each of three
 * variants, interleaved run by run (no preload; LD_PRELOAD=LIB with ICX_DISABLE=1, i.e. loading
 * the library and its dependencies only; LD_PRELOAD=LIB), and prints per variant the median and
 * 90th percentile wall time of fork+exec+wait in microseconds.  Output goes to /dev/null; the
 * child's environment is the caller's plus the variant's variables. */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The caller's environment without LD_PRELOAD and ICX_DISABLE, plus up to two entries. */
static char **make_env(const char *a, const char *b)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **e = calloc(n + 3, sizeof(*e));
    if (!e)
        exit(1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) && strncmp(environ[i], "ICX_DISABLE=", 12))
            e[k++] = environ[i];
    if (a)
        e[k++] = (char *)a;
    if (b)
        e[k++] = (char *)b;
    return e;
}

static double run_once(char **argv, char **envp)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    double t0 = now_us();
    pid_t pid;
    if (posix_spawnp(&pid, argv[0], &fa, NULL, argv, envp) != 0) {
        perror(argv[0]);
        exit(1);
    }
    int st;
    waitpid(pid, &st, 0);
    double t = now_us() - t0;
    posix_spawn_file_actions_destroy(&fa);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "bench_startup: %s failed (status %d)\n", argv[0], st);
        exit(1);
    }
    return t;
}

int main(int argc, char **argv)
{
    if (argc < 5 || strcmp(argv[3], "--") != 0) {
        fprintf(stderr, "usage: bench_startup LIB ROUNDS -- PROG [ARGS...]\n");
        return 2;
    }
    int rounds = atoi(argv[2]);
    if (rounds < 1)
        rounds = 1;
    char pre[4200];
    snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", argv[1]);
    char **envs[3] = {make_env(NULL, NULL), make_env(pre, "ICX_DISABLE=1"), make_env(pre, NULL)};
    const char *names[3] = {"no preload", "preload, ICX_DISABLE=1", "preload (default)"};
    double *t[3];
    for (int v = 0; v < 3; v++) {
        t[v] = malloc(sizeof(double) * (size_t)rounds);
        if (!t[v])
            return 1;
    }
    for (int k = 0; k < 3; k++) /* warm the page cache */
        for (int v = 0; v < 3; v++)
            run_once(argv + 4, envs[v]);
    for (int r = 0; r < rounds; r++)
        for (int v = 0; v < 3; v++)
            t[v][r] = run_once(argv + 4, envs[v]);
    double base = 0;
    for (int v = 0; v < 3; v++) {
        qsort(t[v], (size_t)rounds, sizeof(double), cmp);
        double med = t[v][rounds / 2], p90 = t[v][rounds * 9 / 10];
        if (v == 0)
            base = med;
        printf("%-24s %9.0f %9.0f %9.0f\n", names[v], med, p90, med - base);
    }
    return 0;
}
