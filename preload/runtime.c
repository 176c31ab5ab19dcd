/* The tracer's base state: configuration from the ICX_* variables, the on/off switch, the clock
 * and diagnostics.  A bad value is named once on stderr and replaced by the default: the job is
 * never stopped for a typo in a variable. */
#include <errno.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime.h"

struct icx_config icx_cfg;
_Atomic int icx_active;
_Atomic int icx_touched;
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

/* An invariant TSC (CPUID 0x80000007 EDX bit 8: the bit Linux reports as constant_tsc and
 * nonstop_tsc) ticks at one rate in every P- and C-state.  CPUID rather than /proc/cpuinfo:
 * generating that file costs a process start about 0.1 ms. */
static int icx_cpu_has_invariant_tsc(void)
{
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
        return 0;
    __cpuid(0x80000007u, a, b, c, d);
    return (d >> 8) & 1;
#else
    return 0;
#endif
}

static long icx_env_long(const char *name, long def, long lo, long hi)
{
    const char *v = secure_getenv(name);
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

void icx_config_load(void)
{
    /* Configuration comes from secure_getenv: in a set-user-ID or otherwise privileged process
     * (AT_SECURE) none is read, and the tracer stays off -- it must not write files there. */
    icx_cfg.disabled = (int)icx_env_long("ICX_DISABLE", 0, 0, 1) || getauxval(AT_SECURE);
    icx_cfg.debug = (int)icx_env_long("ICX_DEBUG", 0, 0, 9);
    icx_cfg.quiet = (int)icx_env_long("ICX_QUIET", 0, 0, 1);
    icx_cfg.level = (int)icx_env_long("ICX_ZSTD_LEVEL", 1, -7, 19);
    icx_cfg.flush_ms = (unsigned)icx_env_long("ICX_FLUSH_MS", 100, 1, 60000);
    long kb = icx_env_long("ICX_BUFFER_KB", 1024, 64, 1 << 20);
    size_t bytes = 64 * 1024;
    while (bytes < (size_t)kb * 1024)
        bytes <<= 1;
    icx_cfg.buffer_bytes = bytes;
    icx_cfg.memory_bytes = (size_t)icx_env_long("ICX_MEMORY_MB", 1024, 1, 1 << 20) << 20;
    const char *t = secure_getenv("ICX_GPU_TIMING");
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
    icx_cfg.verbs_events = (int)icx_env_long("ICX_VERBS_EVENTS", 0, 0, 1);
    icx_cfg.nccl_profiler = (int)icx_env_long("ICX_NCCL_PROFILER", 1, 0, 1);
    const char *mode = secure_getenv("ICX_MODE");
    char *mend = NULL;
    long m = mode && *mode ? strtol(mode, &mend, 8) : 0600;
    if (mode && *mode && (*mend || m < 0 || m > 0777 || (m & 0600) != 0600)) {
        icx_log("ignoring ICX_MODE=%s (expected octal permissions like 0640 that let the owner "
                "read and write)\n",
                mode);
        m = 0600;
    }
    icx_cfg.file_mode = (unsigned)m;
    const char *hang = secure_getenv("ICX_HANG_S");
    icx_cfg.hang_s =
        hang && strcmp(hang, "auto") == 0 ? -1 : icx_env_long("ICX_HANG_S", -1, 0, 30L * 86400);
    const char *dump = secure_getenv("ICX_DUMP");
    if (dump && strlen(dump) < sizeof(icx_cfg.dump_path))
        strcpy(icx_cfg.dump_path, dump);
    else if (dump)
        icx_log("ignoring ICX_DUMP (a path of at most %zu bytes)\n", sizeof(icx_cfg.dump_path) - 1);
    /* Tests only: pretend this host's wall clock is off by this many ms (clock alignment). */
    icx_cfg.test_clock_offset_ns =
        icx_env_long("ICX_TEST_CLOCK_OFFSET_MS", 0, -86400000, 86400000) * 1000000ll;
    const char *c = secure_getenv("ICX_CLOCK");
    icx_clock_tsc = !(c && strcmp(c, "mono") == 0) && icx_cpu_has_invariant_tsc();
    if (icx_clock_tsc) /* until the writer measures it; it only paces sampling */
        atomic_store(&icx_ticks_per_us, 3000);
}
