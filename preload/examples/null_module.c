/* The example module: a template for whoever adds the next one (Darshan's darshan-null.c plays
 * this part there).  It is not part of libicxtrace.so; `make` builds a test copy of the tracer
 * with it (build/tests/example/libicxtrace.so: core.c compiled with
 * -DICX_EXTRA_MODULES='&icx_mod_example,'), and test_example_module runs a job under that copy.
 *
 * What it does: counts the peer copies the writer drains and the flushes it sees, and at the end
 * of the trace leaves a note "example module: N peer copies in M flushes" in the process's
 * stream, which `icx-analyze` prints with the process's notes.  That is one use of each door a
 * module has (module.h); a real module would add hooks and records of its own:
 *
 *  - hooks: a wrapper per intercepted function, written with the bracket of hook.h, its name in
 *    a preload/wraps_<library>.def list (the exports map is made from those lists, and
 *    tests/e2e checks nm -D against them); functions reached through dlsym get a dl_prefix and
 *    dl_wrap here instead;
 *  - records: a new record type in include/icx/trace_format.h (a minor format version, a golden
 *    trace folder, a decoder in analyzer/decode_*.c); events go into the calling thread's ring
 *    (tbuf.h), everything else is written by the writer thread in drained/tick, as here;
 *  - locks: whatever a hook touches from application threads under a lock must be taken in
 *    fork_prepare, released in fork_parent and re-initialized in fork_child
 *    (tests/fork/fork_locks.c forks while other threads hold every module's locks).
 *
 * Threads: every entry below but init, fini and the fork ones runs on the writer thread, so the
 * counters need no lock. */
#include <stdio.h>

#include "frame.h"
#include "module.h"
#include "icx/trace_format.h"

static unsigned long long icx_example_copies, icx_example_flushes;

/* Every EVENT record as the writer drains it into the frame: the generic header says what the
 * record is; the typed struct (trace_format.h) what it holds. */
static void icx_example_drained(struct icx_frame *f, const struct icx_rec *r)
{
    (void)f;
    if (r->type == ICX_REC_CUDA_COPY)
        icx_example_copies++;
}

/* Each flush, after the rings were drained.  The last one (exit, or a fatal signal: keep that one
 * short, no waiting) is where a module writes what it summed up. */
static void icx_example_tick(struct icx_frame *f, enum icx_tick_kind kind)
{
    (void)f;
    icx_example_flushes++;
    if (kind == ICX_TICK_PERIODIC)
        return;
    char text[128];
    snprintf(text, sizeof(text), "example module: %llu peer copies in %llu flushes",
             icx_example_copies, icx_example_flushes);
    icx_note(0, text); /* queued; the writer puts it into this last frame */
}

/* A traced fork child starts a stream of its own: it counts from zero. */
static void icx_example_fork_child(void)
{
    icx_example_copies = icx_example_flushes = 0;
}

const struct icx_module icx_mod_example = {
    .name = "example",
    .drained = icx_example_drained,
    .tick = icx_example_tick,
    .fork_child = icx_example_fork_child,
};
