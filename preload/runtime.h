/* The tracer's base: configuration (ICX_* variables), the on/off switch, the per-thread state in
 * one initial-exec TLS block, the clock and diagnostics.  Every other file of preload/ builds on
 * this one and it knows none of them.  Everything is hidden (-fvisibility=hidden) unless marked
 * ICX_EXPORT: the intercepted entry points. */
#ifndef ICX_RUNTIME_H
#define ICX_RUNTIME_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "icx/trace_format.h"

#define ICX_EXPORT __attribute__((visibility("default")))
#define ICX_TLS __thread __attribute__((tls_model("initial-exec")))
#define ICX_LIKELY(x) __builtin_expect(!!(x), 1)
#define ICX_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* GPU timing modes (ICX_GPU_TIMING). */
enum icx_gpu_timing { ICX_GPUT_OFF, ICX_GPUT_SAMPLE, ICX_GPUT_ALL };

struct icx_config {
    int disabled;           /* ICX_DISABLE=1 */
    int debug;              /* ICX_DEBUG */
    int quiet;              /* ICX_QUIET */
    int level;              /* ICX_ZSTD_LEVEL */
    unsigned flush_ms;      /* ICX_FLUSH_MS */
    size_t buffer_bytes;    /* ICX_BUFFER_KB, per thread, power of two */
    size_t memory_bytes;    /* ICX_MEMORY_MB: all rings together, at most */
    int gpu_timing;         /* ICX_GPU_TIMING */
    unsigned gpu_sample_us; /* ICX_GPU_SAMPLE_US: sample mode times at most one copy per thread
                               per this many microseconds */
    int stack_control;      /* stacks of control-plane calls (allocations): unless ICX_STACKS=0 */
    unsigned stack_sample;  /* ICX_STACKS=N: also 1 in N copies; 0: no copy stacks */
    int follow_fork;        /* ICX_FOLLOW_FORK */
    unsigned sample_ms;     /* ICX_SAMPLE_MS: hardware counters every this many ms; 0 off */
    int verbs_events;       /* ICX_VERBS_EVENTS: a record per work request instead of aggregates */
    int nccl_profiler;      /* ICX_NCCL_PROFILER: be NCCL's profiler plugin (nccl_prof.c) */
    long hang_s;            /* ICX_HANG_S: watchdog threshold in s; -1 auto, 0 off (hang.c) */
    char dump_path[1024];   /* ICX_DUMP: a file whose touch asks for a dump ("" none) */
    unsigned file_mode;     /* ICX_MODE: the trace files' permissions (octal, default 0600) */
    char output[4096];      /* ICX_OUTPUT, expanded (identity.c) */
    long long test_clock_offset_ns; /* ICX_TEST_CLOCK_OFFSET_MS (tests only) */
};

extern struct icx_config icx_cfg;
/* Read the ICX_* variables into icx_cfg (the constructor, once). */
void icx_config_load(void);

/* Nonzero while the tracer records: 0 after ICX_DISABLE, a failed start, or in an untraced fork
 * child.  ICX_ON_FRESH until the process's first traced device call, whose cold path
 * (icx_call_begin) has the writer take the device baselines first; ICX_ON after. */
extern _Atomic int icx_active;
#define ICX_ON 1
#define ICX_ON_FRESH 2
/* writer.c: called by the first traced device call (any thread, no tracer lock held): has the
 * writer run the modules' devices_begin and waits for it, at most 2 s. */
void icx_writer_first_device_call(void);

/* 1 once the process used a traced API (a thread's first event, a statically linked runtime
 * found): until then the writer writes nothing, so a shell, a compiler or a launcher under the
 * preload leaves no trace file, no directory and no exit line. */
extern _Atomic int icx_touched;
static inline void icx_touch(void)
{
    if (!atomic_load_explicit(&icx_touched, memory_order_relaxed))
        atomic_store_explicit(&icx_touched, 1, memory_order_relaxed);
}

struct icx_tbuf;
/* All hot per-thread state in one initial-exec TLS block (one address computation per call).
 * Each field has one owner: buf tbuf.c, guard and errnop hook.h, next_gpu_tick gpu.c,
 * stack_countdown stack.c. */
struct icx_thread {
    struct icx_tbuf *buf; /* this thread's ring, NULL before the first event, ICX_TBUF_DEAD after
                             the thread's exit */
    int guard;            /* nonzero inside a hook, and always in the writer thread: no re-entry */
    int *errnop;          /* this thread's errno (glibc's __errno_location() never changes) */
    uint64_t next_gpu_tick;   /* earliest tick at which the next copy gets GPU timing */
    unsigned stack_countdown; /* copies until the next stack sample */
};
extern ICX_TLS struct icx_thread icx_self;

/* Tracing is on and this thread is not already inside a hook. */
static inline int icx_hooks_on(void)
{
    return atomic_load_explicit(&icx_active, memory_order_relaxed) && !icx_self.guard;
}

/* ---- diagnostics: async-signal-safe, prefixed icx[pid/tid]: ---- */
void icx_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define icx_debug(...)                                                                             \
    do {                                                                                           \
        if (icx_cfg.debug)                                                                         \
            icx_log(__VA_ARGS__);                                                                  \
    } while (0)
int icx_gettid(void);

/* ---- clock ---- */
extern int icx_clock_tsc;                 /* ticks are TSC */
extern _Atomic uint64_t icx_ticks_per_us; /* paces time-based sampling */
static inline uint64_t icx_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static inline uint64_t icx_ticks(void)
{
#if defined(__x86_64__)
    if (ICX_LIKELY(icx_clock_tsc))
        return __rdtsc();
#endif
    return icx_mono_ns();
}
/* A tick value paired with CLOCK_MONOTONIC and CLOCK_REALTIME taken at the same moment. */
void icx_clock_sample(struct icx_rec_clock *out);

#endif
