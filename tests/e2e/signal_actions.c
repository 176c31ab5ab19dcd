/* Workload: a job that sets its own signal actions after start, in every way the C library
 * offers (sigaction with masks and flags, signal, sysv_signal, siginterrupt, in a vfork child),
 * prints every action it can see and what its handlers observe, then ends as argv[1] says:
 *   term  its SIGTERM handler (set with signal()) calls _exit(7)
 *   segv  a SA_RESETHAND handler returns from a segmentation fault: the fault repeats, fatal
 *   dfl   SIGTERM set back to SIG_DFL, then raised: death by SIGTERM
 *   abort abort() with a SIGABRT handler that returns: death by SIGABRT
 * Run with and without the tracer, stdout and the exit status must be the same.  A few peer
 * copies first, so that the traced run has a trace. */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_hup(int sig);
static void on_int(int sig, siginfo_t *si, void *uc);
static void on_term(int sig);
static void on_abrt(int sig);
static void on_usr2(int sig);
static void on_segv(int sig, siginfo_t *si, void *uc);

static const char *name_of(const struct sigaction *a)
{
    if (a->sa_handler == SIG_DFL)
        return "DFL";
    if (a->sa_handler == SIG_IGN)
        return "IGN";
    if (a->sa_handler == on_hup)
        return "on_hup";
    if (a->sa_sigaction == on_int)
        return "on_int";
    if (a->sa_handler == on_term)
        return "on_term";
    if (a->sa_handler == on_abrt)
        return "on_abrt";
    if (a->sa_handler == on_usr2)
        return "on_usr2";
    if (a->sa_sigaction == on_segv)
        return "on_segv";
    return "other";
}

static unsigned long long mask_bits(const sigset_t *m)
{
    unsigned long long bits = 0;
    for (int s = 1; s <= 64; s++)
        if (sigismember(m, s) == 1)
            bits |= 1ull << (s - 1);
    return bits;
}

/* One signal's action as the job sees it (printf: every handler here runs synchronously). */
static void show(const char *when, int sig)
{
    struct sigaction a;
    memset(&a, 0, sizeof(a));
    if (sigaction(sig, NULL, &a) != 0) {
        printf("%s %d error\n", when, sig);
        return;
    }
    printf("%s %d %s flags=%#x mask=%#llx\n", when, sig, name_of(&a), (unsigned)a.sa_flags,
           mask_bits(&a.sa_mask));
}

static void show_all(const char *when)
{
    for (int sig = 1; sig < 65; sig++)
        show(when, sig);
}

static int blocked(int sig)
{
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    return sigismember(&cur, sig);
}

static void on_hup(int sig)
{
    printf("hup: usr1 blocked=%d hup blocked=%d\n", blocked(SIGUSR1), blocked(sig));
    show("in on_hup", sig);
}

static void on_int(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    printf("int: value=%d queued=%d int blocked=%d\n", si->si_value.sival_int,
           si->si_code == SI_QUEUE, blocked(sig));
}

static void on_term(int sig)
{
    printf("term %d\n", sig);
    _exit(7);
}

static void on_abrt(int sig)
{
    printf("abrt: blocked=%d\n", blocked(sig));
    show("in on_abrt", sig);
}

static void on_usr2(int sig)
{
    printf("usr2 %d\n", sig);
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    printf("segv %d at %p\n", sig, si->si_addr);
    show("in on_segv", sig);
}

int main(int argc, char **argv)
{
    const char *end = argc > 1 ? argv[1] : "term";
    setvbuf(stdout, NULL, _IONBF, 0);
    void *a, *b;
    if (cudaSetDevice(0) || cudaMalloc(&a, 4096) || cudaSetDevice(1) || cudaMalloc(&b, 4096))
        return 2;
    for (int i = 0; i < 5; i++)
        if (cudaMemcpyPeer(b, 1, a, 0, 4096) != cudaSuccess)
            return 2;
    show_all("start");

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_hup;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR1);
    sa.sa_flags = SA_RESTART;
    struct sigaction old;
    if (sigaction(SIGHUP, &sa, &old) != 0)
        return 3;
    printf("old hup %s\n", name_of(&old));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    siginterrupt(SIGHUP, 1);
#pragma GCC diagnostic pop

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_int;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGINT, &sa, NULL);

    printf("old term %s\n", signal(SIGTERM, on_term) == SIG_DFL ? "DFL" : "not DFL");
    sysv_signal(SIGABRT, on_abrt);
    signal(SIGUSR2, on_usr2);

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_IGN;
    struct sigaction *volatile io = &sa;
    sigaction(SIGFPE, io, io); /* the same object as new and old */
    printf("fpe old %s\n", name_of(&sa));
    show_all("installed");

    raise(SIGHUP);
    union sigval v = {.sival_int = 42};
    sigqueue(getpid(), SIGINT, v);
    raise(SIGABRT);
    show("after abrt", SIGABRT);
    raise(SIGUSR2);

    /* A vfork child resets handlers to the default (as Python's subprocess does); the parent's
     * stay. */
    pid_t pid = vfork();
    if (pid == 0) {
        signal(SIGHUP, SIG_DFL);
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_DFL;
        sigaction(SIGINT, &sa, NULL);
        struct sigaction c;
        sigaction(SIGHUP, NULL, &c);
        _exit(c.sa_handler == SIG_DFL ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    printf("vfork child %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    show("after vfork", SIGHUP);
    show("after vfork", SIGINT);
    raise(SIGHUP);

    if (!strcmp(end, "segv")) {
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = on_segv;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
        sigaction(SIGSEGV, &sa, NULL);
        volatile int *null = NULL;
        return *null;
    }
    if (!strcmp(end, "abort")) {
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_abrt;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGABRT, &sa, NULL);
        abort();
    }
    if (!strcmp(end, "dfl"))
        signal(SIGTERM, SIG_DFL);
    raise(SIGTERM);
    printf("not reached\n");
    return 0;
}
