/* Internal interface of libicxtrace: configuration, clock, per-thread buffers, real-symbol
 * resolution and the writer.  Everything here is hidden (-fvisibility=hidden); only the intercepted
 * entry points in cuda.c are exported. */
#ifndef ICX_PRELOAD_H
#define ICX_PRELOAD_H

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "icx/trace_format.h"

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
    int gpu_timing;         /* ICX_GPU_TIMING */
    unsigned gpu_sample_us; /* ICX_GPU_SAMPLE_US: sample mode times at most one copy per thread
                               per this many microseconds */
    int stack_control;      /* stacks of control-plane calls (allocations): unless ICX_STACKS=0 */
    unsigned stack_sample;  /* ICX_STACKS=N: also 1 in N copies; 0: no copy stacks */
    int follow_fork;        /* ICX_FOLLOW_FORK */
    unsigned sample_ms;     /* ICX_SAMPLE_MS: hardware counters every this many ms; 0 off */
    char output[4096];      /* ICX_OUTPUT, expanded */
    long long test_clock_offset_ns; /* ICX_TEST_CLOCK_OFFSET_MS (tests only) */
};

extern struct icx_config icx_cfg;
/* 1 while the tracer records: cleared by ICX_DISABLE, a failed start, or in an untraced fork child.
 */
extern _Atomic int icx_active;
/* All hot per-thread state in one initial-exec TLS block (one address computation per call). */
struct icx_thread {
    struct icx_tbuf
        *buf;  /* this thread's ring, NULL before the first event, ICX_TBUF_DEAD after exit */
    int guard; /* nonzero inside a hook, and always in the writer thread: no re-entry */
    uint64_t next_gpu_tick;   /* earliest tick at which the next copy gets GPU timing */
    unsigned stack_countdown; /* copies until the next stack sample */
};
extern ICX_TLS struct icx_thread icx_self;

/* ---- diagnostics (core.c): async-signal-safe, prefixed icx[pid/tid]: ---- */
void icx_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define icx_debug(...)                                                                             \
    do {                                                                                           \
        if (icx_cfg.debug)                                                                         \
            icx_log(__VA_ARGS__);                                                                  \
    } while (0)
int icx_gettid(void);

/* ---- clock (core.c) ---- */
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
void icx_clock_sample(struct icx_rec_clock *out);

/* Tracing is on and this thread is not already inside a hook. */
static inline int icx_hooks_on(void)
{
    return atomic_load_explicit(&icx_active, memory_order_relaxed) && !icx_self.guard;
}

/* The bracket of a control-plane wrapper: guard and start time on entry; errno as the real call
 * left it kept from its return to ours (recording may set it). */
struct icx_call {
    uint64_t t0;
    int saved_errno;
};
static inline void icx_call_enter(struct icx_call *c)
{
    icx_self.guard = 1;
    c->t0 = icx_ticks();
}
static inline void icx_call_returned(struct icx_call *c)
{
    c->saved_errno = errno;
}
static inline void icx_call_exit(const struct icx_call *c)
{
    icx_self.guard = 0;
    errno = c->saved_errno;
}


/* ---- per-thread buffers (tbuf.c) ---- */
/* Single-producer (the owning thread) single-consumer (the writer) byte ring of records. */
struct icx_tbuf {
    _Atomic uint64_t head; /* written by the owner only */
    uint64_t tail_seen;    /* owner's last view of tail: reloaded only when the ring looks full */
    char pad0[48];
    _Atomic uint64_t tail; /* written by the writer only */
    char pad1[56];
    uint8_t *data;
    uint64_t cap; /* bytes, power of two */
    uint32_t tid;
    _Atomic int dead;      /* owner exited; writer drains and frees */
    int announced;         /* writer emitted its THREAD record */
    struct icx_tbuf *next; /* registry list, under icx_tbuf_lock */
    struct icx_vagg *vagg; /* verbs aggregates of this thread (verbs_data.c), NULL until used */
};

/* Ring-internal record types never written to the file. */
#define ICX_RING_SLACK 65536u /* bytes after the ring's end: the largest record (size is u16) */
#define ICX_RING_GPU_PENDING 0xff01u /* an async copy bracketed by pooled events (gpu.c) */
#define ICX_RING_STACK_RAW 0xff02u   /* raw return addresses for the preceding event (stack.c) */

extern _Atomic uint64_t icx_lost[ICX_LOST_SLOTS];
static inline void icx_count_lost(enum icx_lost_cause cause)
{
    atomic_fetch_add_explicit(&icx_lost[cause], 1, memory_order_relaxed);
}

struct icx_tbuf *icx_tbuf_slow(void);
#define ICX_TBUF_DEAD ((struct icx_tbuf *)1)

/* A reservation in this thread's ring, published by icx_commit. */
struct icx_slot {
    struct icx_tbuf *b;
    uint64_t next; /* head after the record */
};

/* Reserve `size` bytes (multiple of 8, at most ICX_RING_SLACK) in this thread's ring; NULL (and a
 * counted loss) if full.  A record starts at head & (cap - 1) and is always contiguous: the ring
 * has ICX_RING_SLACK bytes of slack after its end, so a record that crosses the end simply runs on
 * into the slack and neither side ever splits or pads one.  (The bytes at the ring's start that
 * mirror such a record's tail are skipped: the next record begins after them.) */
static inline void *icx_reserve(uint32_t size, struct icx_slot *slot)
{
    struct icx_tbuf *b = icx_self.buf;
    if (ICX_UNLIKELY(b == NULL || b == ICX_TBUF_DEAD)) {
        b = icx_tbuf_slow();
        if (!b)
            return NULL;
    }
    uint64_t head = atomic_load_explicit(&b->head, memory_order_relaxed);
    if (ICX_UNLIKELY(head + size - b->tail_seen > b->cap)) {
        /* Only now look at the writer's cache line. */
        b->tail_seen = atomic_load_explicit(&b->tail, memory_order_acquire);
        if (head + size - b->tail_seen > b->cap) {
            icx_count_lost(ICX_LOST_buffer_full);
            return NULL;
        }
    }
    slot->b = b;
    slot->next = head + size;
    return b->data + (head & (b->cap - 1));
}

/* Publish the reserved record to the writer. */
static inline void icx_commit(const struct icx_slot *slot)
{
    atomic_store_explicit(&slot->b->head, slot->next, memory_order_release);
}

void icx_tbuf_init(void);
/* Writer side: call fn on every registered buffer; frees dead buffers once drained. */
void icx_tbuf_drain_all(void (*fn)(struct icx_tbuf *b, void *ctx), void *ctx);
void icx_tbuf_atfork_prepare(void);
void icx_tbuf_atfork_parent(void);
void icx_tbuf_atfork_child(void);

/* ---- real symbols (resolve.c) ---- */
struct icx_sym {
    const char *name;
    const char *lib; /* base name of the library (e.g. "libcudart.so") to look in with RTLD_NOLOAD
                        when RTLD_NEXT finds nothing */
    const char *version; /* symbol version to ask for (dlvsym), NULL: the default one */
    _Atomic(void *) fn;
    _Atomic uint64_t retry_ns; /* after a failed lookup: none again before this (monotonic ns) */
};
void *icx_resolve_slow(struct icx_sym *s);
static inline void *icx_resolve(struct icx_sym *s)
{
    void *p = atomic_load_explicit(&s->fn, memory_order_acquire);
    return ICX_LIKELY(p != NULL) ? p : icx_resolve_slow(s);
}
/* Declare the real function `name` of library `lib`: a typedef and a lazily filled table slot. */
#define ICX_REAL_DECL(lib, ret, name, params)                                                      \
    typedef ret(*icx_real_##name##_t) params;                                                      \
    static struct icx_sym icx_sym_##name = {#name, lib, NULL, NULL, 0}
/* The same for a versioned symbol (libibverbs: "IBVERBS_1.1"). */
#define ICX_REAL_DECLV(lib, ver, ret, name, params)                                                \
    typedef ret(*icx_real_##name##_t) params;                                                      \
    static struct icx_sym icx_sym_##name = {#name, lib, ver, NULL, 0}
/* The real function, or NULL when it cannot be found (the wrapper then fails open). */
#define ICX_REAL(name) ((icx_real_##name##_t)icx_resolve(&icx_sym_##name))

/* ---- dynamic lookups (dl.c, verbs.c) ---- */
void *icx_dlsym_real(void *handle, const char *name);
void *icx_dlvsym_real(void *handle, const char *name, const char *version);
void *icx_dl_decide(void *handle, const char *name, const char *version);
/* The wrapper to hand out for a dlsym/dlvsym lookup of a name we wrap (version NULL: dlsym),
 * after looking the real one up in `handle`; NULL to pass the lookup on. */
void *icx_dl_wrap(const char *name, const char *version, void *handle);
void *icx_dl_wrap_nccl(const char *name, const char *version, void *handle); /* nccl.c */

/* ---- writer (writer.c) ---- */
int icx_writer_start(void);
void icx_writer_stop(int exit_status);
void icx_writer_flush_from_signal(int signo, int will_die);
void icx_writer_atfork_prepare(void);
void icx_writer_atfork_parent(void);
void icx_writer_atfork_child(void);
uint32_t icx_intern(const char *s);            /* writer thread or under the writer lock only */
void icx_note(int severity, const char *text); /* any thread; queued for the next frame */

/* Frame builder used by the modules that contribute records from the writer thread. */
struct icx_frame {
    uint8_t *buf;
    size_t len, cap;
};
void *icx_frame_put(struct icx_frame *f, uint16_t type, uint32_t aux, size_t size);
void icx_frame_put_string(struct icx_frame *f, uint32_t id, const char *s);

/* ---- CUDA (cuda.c, gpu.c) ---- */
void icx_cuda_writer_tick(struct icx_frame *f, int final); /* devices, GPU spans, notes */
void icx_gpu_pending(const struct icx_rec *r);             /* writer: a ring GPU_PENDING */
void icx_cuda_drained(struct icx_frame *f, const struct icx_rec *r); /* writer: event drained */
void icx_cuda_detect_static(void);
void icx_cuda_atfork_child(void);
/* The CUDA device whose cudaMalloc'ed range holds p, or -2 (cuda.c). */
int icx_amap_lookup(uintptr_t p);
void icx_counters_sample(struct icx_frame *f, int force); /* topo.c: NVLink counters */
void icx_nic_paths(struct icx_frame *f, int dev, const char *bus, int numa); /* nic.c */
void icx_nic_sample(struct icx_frame *f, uint64_t now);                      /* nic.c */

/* ---- RDMA verbs (verbs.c, verbs_data.c): writer side ---- */
extern int icx_verbs_events;                                   /* ICX_VERBS_EVENTS */
void icx_verbs_writer_tick(struct icx_frame *f);
void icx_nccl_writer_tick(struct icx_frame *f); /* nccl.c: NCCL's topology/graph dumps */                /* name new device contexts */
void icx_verbs_drain_agg(struct icx_frame *f, struct icx_tbuf *b); /* a thread's aggregates */

/* ---- placement (placement.c): the writer, but for icx_placement_host_buffer ---- */
void icx_placement_tick(struct icx_frame *f);
int icx_placement_host_buffer(struct icx_rec_host_numa *r, uint64_t ptr, uint64_t bytes);
/* Read the first line of a sysfs file, path relative to ICX_SYSFS_ROOT (or /). 0 or -1. */
int icx_sysfs_read_path(const char *rel, char *out, size_t outlen);

/* ---- stacks (stack.c) ---- */
void icx_stack_capture(void); /* after an event, in its thread */
void icx_stack_intern(struct icx_frame *f, const struct icx_rec *raw); /* writer */
void icx_stack_symbolize(struct icx_frame *f);                         /* writer, at the end */

/* ---- identity (core.c) ---- */
void icx_emit_identity(struct icx_frame *f);
int icx_expand_output(const char *pattern, char *out, size_t outlen);
/* Set icx_cfg.output from ICX_OUTPUT; in a fork child (child=1) make it unique to the child. */
int icx_output_resolve(int child);

#endif
