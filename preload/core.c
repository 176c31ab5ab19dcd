/* Runtime core of libicxtrace: configuration from ICX_* variables, the constructor and destructor,
 * process identity, signal and fork handling.  Fails open: any problem leaves the job untraced and
 * unchanged, with at most one warning. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "icx.h"

struct icx_config icx_cfg;
_Atomic int icx_active;
ICX_TLS struct icx_thread icx_self;
int icx_clock_tsc;
_Atomic uint64_t icx_ticks_per_us = 1000; /* exact for CLOCK_MONOTONIC; measured for the TSC */

int icx_gettid(void)
{
    return (int)syscall(SYS_gettid);
}

void icx_log(const char *fmt, ...)
{
    char buf[512];
    int saved = errno;
    int n = snprintf(buf, sizeof(buf), "icx[%d/%d]: ", (int)getpid(), icx_gettid());
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof(buf) - 1)
        len = sizeof(buf) - 1;
    ssize_t w = write(2, buf, len);
    (void)w;
    errno = saved;
}

void icx_clock_sample(struct icx_rec_clock *out)
{
    struct timespec rt;
    /* Bracket the tick read with the two clocks so the pair is as tight as we can make it. */
    uint64_t m0 = icx_mono_ns();
    out->ticks = icx_ticks();
    clock_gettime(CLOCK_REALTIME, &rt);
    uint64_t m1 = icx_mono_ns();
    out->mono_ns = m0 + (m1 - m0) / 2;
    out->real_ns = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec +
                   (uint64_t)icx_cfg.test_clock_offset_ns;
}

static int icx_cpu_has_invariant_tsc(void)
{
#if defined(__x86_64__)
    FILE *f = fopen("/proc/cpuinfo", "re");
    if (!f)
        return 0;
    char line[4096];
    int ok = 0;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "flags", 5) == 0) {
            ok = strstr(line, " constant_tsc") && strstr(line, " nonstop_tsc");
            break;
        }
    }
    fclose(f);
    return ok;
#else
    return 0;
#endif
}

static long icx_env_long(const char *name, long def, long lo, long hi)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || x < lo || x > hi) {
        icx_log("ignoring %s=%s (expected an integer in [%ld, %ld])\n", name, v, lo, hi);
        return def;
    }
    return x;
}

static void icx_config_load(void)
{
    icx_cfg.disabled = (int)icx_env_long("ICX_DISABLE", 0, 0, 1);
    icx_cfg.debug = (int)icx_env_long("ICX_DEBUG", 0, 0, 9);
    icx_cfg.quiet = (int)icx_env_long("ICX_QUIET", 0, 0, 1);
    icx_cfg.level = (int)icx_env_long("ICX_ZSTD_LEVEL", 1, -7, 19);
    icx_cfg.flush_ms = (unsigned)icx_env_long("ICX_FLUSH_MS", 100, 1, 60000);
    long kb = icx_env_long("ICX_BUFFER_KB", 1024, 64, 1 << 20);
    size_t bytes = 64 * 1024;
    while (bytes < (size_t)kb * 1024)
        bytes <<= 1;
    icx_cfg.buffer_bytes = bytes;
    const char *t = getenv("ICX_GPU_TIMING");
    icx_cfg.gpu_timing = ICX_GPUT_SAMPLE;
    if (t && strcmp(t, "off") == 0)
        icx_cfg.gpu_timing = ICX_GPUT_OFF;
    else if (t && strcmp(t, "all") == 0)
        icx_cfg.gpu_timing = ICX_GPUT_ALL;
    else if (t && *t && strcmp(t, "sample") != 0)
        icx_log("ignoring ICX_GPU_TIMING=%s (expected off, sample or all)\n", t);
    icx_cfg.gpu_sample_us = (unsigned)icx_env_long("ICX_GPU_SAMPLE_US", 1000, 1, 60000000);
    /* Unset: stacks of control-plane calls only (rare, and where a post-mortem wants them). */
    long stacks = icx_env_long("ICX_STACKS", -1, 0, 1 << 30);
    icx_cfg.stack_control = stacks != 0;
    icx_cfg.stack_sample = stacks > 0 ? (unsigned)stacks : 0;
    icx_cfg.follow_fork = (int)icx_env_long("ICX_FOLLOW_FORK", 0, 0, 1);
    icx_cfg.sample_ms = (unsigned)icx_env_long("ICX_SAMPLE_MS", 100, 0, 3600000);
    icx_verbs_events = (int)icx_env_long("ICX_VERBS_EVENTS", 0, 0, 1);
    /* Tests only: pretend this host's wall clock is off by this many ms (clock alignment). */
    icx_cfg.test_clock_offset_ns = icx_env_long("ICX_TEST_CLOCK_OFFSET_MS", 0, -86400000, 86400000) *
                                   1000000ll;
    const char *c = getenv("ICX_CLOCK");
    icx_clock_tsc = !(c && strcmp(c, "mono") == 0) && icx_cpu_has_invariant_tsc();
    if (icx_clock_tsc)
        atomic_store(&icx_ticks_per_us,
                     3000); /* until the writer measures it; only paces sampling */
}

/* ---- identity ---- */

static const char *icx_first_env(const char *const *names)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v)
            return v;
    }
    return NULL;
}

static int32_t icx_first_env_int(const char *const *names)
{
    const char *v = icx_first_env(names);
    if (!v)
        return -1;
    char *end;
    long x = strtol(v, &end, 10);
    return (*end || x < 0 || x > INT32_MAX) ? -1 : (int32_t)x;
}

static const char *const icx_env_rank[] = {"RANK",     "OMPI_COMM_WORLD_RANK", "PMIX_RANK",
                                           "PMI_RANK", "SLURM_PROCID",         NULL};
static const char *const icx_env_local_rank[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                                 "MPI_LOCALRANKID", "SLURM_LOCALID", NULL};
static const char *const icx_env_world[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                            "SLURM_NTASKS", NULL};
static const char *const icx_env_local_world[] = {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                                  "MPI_LOCALNRANKS", NULL};
static const char *const icx_env_job[] = {"ICX_JOB_ID", "SLURM_JOB_ID",        "PBS_JOBID",
                                          "LSB_JOBID",  "TORCHELASTIC_RUN_ID", NULL};

static void icx_read_file(const char *path, char *out, size_t outlen, int nul_to_space)
{
    out[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, out, outlen - 1);
    close(fd);
    if (n <= 0)
        return;
    out[n] = 0;
    for (ssize_t i = 0; nul_to_space && i < n; i++)
        if (out[i] == 0)
            out[i] = ' ';
    while (n > 0 && (out[n - 1] == ' ' || out[n - 1] == '\n'))
        out[--n] = 0;
}

void icx_emit_identity(struct icx_frame *f)
{
    char host[256] = "", cmd[4096], exe[4096];
    gethostname(host, sizeof(host) - 1);
    icx_read_file("/proc/self/cmdline", cmd, sizeof(cmd), 1);
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[n > 0 ? n : 0] = 0;
    const char *job = icx_first_env(icx_env_job);
    uint32_t s_host = icx_intern(host), s_cmd = icx_intern(cmd), s_exe = icx_intern(exe);
    uint32_t s_job = job ? icx_intern(job) : 0;
    struct icx_rec_process *p = icx_frame_put(f, ICX_REC_PROCESS, 0, sizeof(*p));
    if (!p)
        return;
    p->pid = (int32_t)getpid();
    p->ppid = (int32_t)getppid();
    p->rank = icx_first_env_int(icx_env_rank);
    p->local_rank = icx_first_env_int(icx_env_local_rank);
    p->world_size = icx_first_env_int(icx_env_world);
    p->local_world_size = icx_first_env_int(icx_env_local_world);
    p->host = s_host;
    p->job_id = s_job;
    p->cmdline = s_cmd;
    p->exe = s_exe;
}

/* Expand %h %p %r %j %% in the ICX_OUTPUT pattern. 0 or -ENAMETOOLONG. */
int icx_expand_output(const char *pattern, char *out, size_t outlen)
{
    char host[256] = "", num[32];
    gethostname(host, sizeof(host) - 1);
    const char *job = icx_first_env(icx_env_job);
    size_t o = 0;
    for (const char *p = pattern; *p; p++) {
        const char *add = NULL;
        char one[2] = {*p, 0};
        if (*p == '%' && p[1]) {
            p++;
            switch (*p) {
            case 'h': add = host; break;
            case 'p':
                snprintf(num, sizeof(num), "%d", (int)getpid());
                add = num;
                break;
            case 'r': {
                int32_t r = icx_first_env_int(icx_env_rank);
                if (r >= 0)
                    snprintf(num, sizeof(num), "%d", r);
                else
                    snprintf(num, sizeof(num), "x");
                add = num;
                break;
            }
            case 'j': add = job ? job : "nojob"; break;
            default:
                one[0] = *p;
                add = one;
                break;
            }
        } else {
            add = one;
        }
        size_t l = strlen(add);
        if (o + l + 1 > outlen)
            return -ENAMETOOLONG;
        memcpy(out + o, add, l);
        o += l;
    }
    out[o] = 0;
    return 0;
}

/* ---- signals: flush what we have, then let the job's own disposition happen ---- */

static const int icx_signals[] = {SIGTERM, SIGINT,  SIGHUP, SIGSEGV,
                                  SIGBUS,  SIGABRT, SIGFPE, SIGILL};
#define ICX_NSIG (int)(sizeof(icx_signals) / sizeof(icx_signals[0]))
static struct sigaction icx_old_sa[ICX_NSIG];
static int icx_sa_installed[ICX_NSIG];

static void icx_signal_handler(int signo, siginfo_t *info, void *uctx)
{
    int saved = errno;
    int i;
    for (i = 0; i < ICX_NSIG; i++)
        if (icx_signals[i] == signo)
            break;
    int chained = i < ICX_NSIG && icx_sa_installed[i] &&
                  ((icx_old_sa[i].sa_flags & SA_SIGINFO) ? icx_old_sa[i].sa_sigaction != NULL
                                                         : icx_old_sa[i].sa_handler != SIG_DFL);
    icx_writer_flush_from_signal(signo, !chained);
    if (i < ICX_NSIG && icx_sa_installed[i]) {
        struct sigaction *old = &icx_old_sa[i];
        if (old->sa_flags & SA_SIGINFO) {
            if (old->sa_sigaction) {
                errno = saved;
                old->sa_sigaction(signo, info, uctx);
                return;
            }
        } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
            errno = saved;
            old->sa_handler(signo);
            return;
        }
        /* The job had the default action: restore it and let it happen, so the exit status and
         * core dump are exactly what they would have been. */
        sigaction(signo, old, NULL);
        icx_sa_installed[i] = 0;
    }
    errno = saved;
    if (info && info->si_code > 0 &&
        (signo == SIGSEGV || signo == SIGBUS || signo == SIGFPE || signo == SIGILL))
        return; /* a hardware fault: returning re-executes the faulting instruction */
    raise(signo);
}

static void icx_signals_install(void)
{
    for (int i = 0; i < ICX_NSIG; i++) {
        struct sigaction cur;
        if (sigaction(icx_signals[i], NULL, &cur) != 0)
            continue;
        /* An ignored signal stays ignored: installing a handler would change the job. */
        if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN)
            continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = icx_signal_handler;
        sa.sa_flags = SA_SIGINFO | SA_RESTART | (cur.sa_flags & SA_ONSTACK);
        sigemptyset(&sa.sa_mask);
        icx_old_sa[i] = cur;
        if (sigaction(icx_signals[i], &sa, NULL) == 0)
            icx_sa_installed[i] = 1;
    }
}

/* ---- fork ---- */

static void icx_atfork_prepare(void)
{
    icx_writer_atfork_prepare();
    icx_tbuf_atfork_prepare();
}

static void icx_atfork_parent(void)
{
    icx_tbuf_atfork_parent();
    icx_writer_atfork_parent();
}

static void icx_atfork_child(void)
{
    icx_tbuf_atfork_child();
    icx_cuda_atfork_child();
    icx_writer_atfork_child(); /* starts a new stream, or leaves the child untraced */
}

/* ---- lifecycle ---- */

int icx_output_resolve(int child)
{
    const char *pat = getenv("ICX_OUTPUT");
    if (!pat || !*pat)
        pat = "icxtrace/%h-%p.icx.zst";
    char expanded[4096];
    if (icx_expand_output(pat, expanded, sizeof(expanded)) != 0 || !expanded[0]) {
        icx_log("ICX_OUTPUT is empty or too long; running untraced\n");
        return -ENAMETOOLONG;
    }
    size_t l = strlen(expanded);
    struct stat st;
    size_t cap = sizeof(icx_cfg.output);
    int n;
    if (expanded[l - 1] == '/' || (stat(expanded, &st) == 0 && S_ISDIR(st.st_mode))) {
        char tail[512];
        icx_expand_output("%h-%p.icx.zst", tail, sizeof(tail));
        n = snprintf(icx_cfg.output, cap, "%s%s%s", expanded, expanded[l - 1] == '/' ? "" : "/",
                     tail);
    } else if (child && !strstr(pat, "%p")) {
        n = snprintf(icx_cfg.output, cap, "%s.%d", expanded, (int)getpid());
    } else {
        n = snprintf(icx_cfg.output, cap, "%s", expanded);
    }
    if (n < 0 || (size_t)n >= cap) {
        icx_log("ICX_OUTPUT is too long; running untraced\n");
        return -ENAMETOOLONG;
    }
    return 0;
}

__attribute__((constructor)) static void icx_init(void)
{
    icx_config_load();
    if (icx_cfg.disabled || icx_output_resolve(0) != 0)
        return;
    icx_tbuf_init();
    if (icx_writer_start() != 0)
        return; /* warned; the job runs untraced */
    pthread_atfork(icx_atfork_prepare, icx_atfork_parent, icx_atfork_child);
    icx_signals_install();
    atomic_store(&icx_active, 1);
}

__attribute__((destructor)) static void icx_fini(void)
{
    if (!atomic_load(&icx_active))
        return;
    atomic_store(&icx_active, 0);
    icx_writer_stop(-1);
}
