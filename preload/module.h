/* The module table's entry.  The core (core.c) keeps one static table of modules and the writer
 * and the fork handlers loop over it: a module is a set of hooks plus the state behind them, and
 * tells the rest of the tracer what it needs through this struct instead of being called by name
 * (Darshan's mod_array, LTTng-UST's per-context fork reset).  Every field may be NULL.  Adding a
 * module: preload/examples/null_module.c, and docs/ARCHITECTURE.md. */
#ifndef ICX_MODULE_H
#define ICX_MODULE_H

#include <stdint.h>

struct icx_frame;
struct icx_rec;
struct icx_tbuf;

/* What kind of flush a tick is. */
enum icx_tick_kind {
    ICX_TICK_PERIODIC = 0, /* every ICX_FLUSH_MS */
    ICX_TICK_EXIT = 1,     /* the last one, at exit: may wait (bounded) and finish things */
    ICX_TICK_FATAL = 2,    /* the last one before a fatal signal: no waiting, no heavy work */
};

struct icx_module {
    const char *name;
    /* The constructor, after the configuration is read and before any hook records. */
    void (*init)(void);
    /* Writer: a process stream starts (at start, and in a traced fork child); records that belong
     * in its header frame (identity, counter baselines). */
    void (*stream_begin)(struct icx_frame *f);
    /* Writer: the process makes its first traced device call (CUDA, NCCL, verbs), which waits
     * for this (bounded): baselines of what the call may move (hardware counters).  Kept out of
     * start-up so a process that never touches a device never loads NVML. */
    void (*devices_begin)(struct icx_frame *f);
    /* Writer, each flush, for every thread's buffer before its ring is drained. */
    void (*drain_thread)(struct icx_frame *f, struct icx_tbuf *b);
    /* Writer: a ring-internal record of type ring_type (>= ICX_RING_TYPE_MIN) this module wrote. */
    uint16_t ring_type;
    void (*ring_record)(struct icx_frame *f, const struct icx_rec *r);
    /* Writer: after every ring was drained, by a flush or at once because a ring passed half
     * full (or a module woke the writer for it): cheap catch-up work (gpu: poll events back). */
    void (*drain_end)(struct icx_frame *f);
    /* Writer: every EVENT record as it is drained into the frame (already copied there). */
    void (*drained)(struct icx_frame *f, const struct icx_rec *r);
    /* Writer, each flush, after the rings: the module's own records. */
    void (*tick)(struct icx_frame *f, enum icx_tick_kind kind);
    /* Writer, each flush and at exit while the process has used no traced API (no tick runs and
     * nothing is written then): a cheap check that may decide it is one after all (icx_touch). */
    void (*probe)(void);
    /* dlsym/dlvsym of a name starting with dl_prefix (dl.c): the wrapper to hand out, after
     * looking the real one up in handle (dlreal.h), or NULL to pass the lookup on.  Also called
     * before the constructor and from sanitizer start-up: it must cope with tracing still off. */
    const char *dl_prefix;
    void *(*dl_wrap)(const char *name, const char *version, void *handle);
    /* fork(): prepare takes every lock the module owns (in table order, so lock order is table
     * order); parent releases them; child re-initializes them and drops what belongs to the
     * parent (reverse table order: the writer, first in the table, restarts last). */
    void (*fork_prepare)(void);
    void (*fork_parent)(void);
    void (*fork_child)(void);
    /* The destructor, after the last flush. */
    void (*fini)(void);
};

/* The modules of libicxtrace.so, in the order of core.c's table. */
extern const struct icx_module icx_mod_writer, icx_mod_identity, icx_mod_cuda, icx_mod_gpu,
    icx_mod_topo, icx_mod_verbs, icx_mod_nccl, icx_mod_hang, icx_mod_placement, icx_mod_stack,
    icx_mod_tbuf, icx_mod_frame, icx_mod_signals;
/* The example module (preload/examples/null_module.c): only in the test copy of the tracer. */
extern const struct icx_module icx_mod_example;

#endif
