/* Native call stacks of traced calls (ICX_STACKS): captured in the calling thread, deduplicated
 * and symbolized by the writer. */
#ifndef ICX_STACK_H
#define ICX_STACK_H

#include <limits.h>

#include "runtime.h"

/* Ring record: raw return addresses for the event just before it (module.h's ring_type). */
#define ICX_RING_STACK_RAW 0xff02u

/* The calling thread's stack, for the event it just recorded. */
void icx_stack_capture(void);

struct icx_frame;
/* Writer: the id of the stack pc[0..depth) (innermost first), its STACK record into f when new;
 * 0 when out of memory. */
uint32_t icx_stack_define(struct icx_frame *f, const uint64_t *pc, uint32_t depth);
/* Writer: SYMBOL records now for the stacks defined since the last call (the hang dump's, and
 * those of traced calls before it: a SIGKILL may follow). */
void icx_stack_symbolize_new(struct icx_frame *f);
/* Writer: SYMBOL records for these addresses now (a dump must not wait for the end); sorts pc
 * in place. */
void icx_stack_symbolize_pcs(struct icx_frame *f, uint64_t *pc, size_t n);

/* Copy stacks are sampled by count: a per-thread countdown (icx_self.stack_countdown), re-armed
 * here (UINT_MAX when copy stacks are off, so it is re-checked only every 4 billion calls). */
static inline unsigned icx_stack_rearm(int *want)
{
    *want = icx_cfg.stack_sample != 0;
    return icx_cfg.stack_sample ? icx_cfg.stack_sample - 1 : UINT_MAX;
}

/* Is this copy's stack due (ICX_STACKS=N: 1 in N)? */
static inline int icx_stack_due(void)
{
    int want = 0;
    if (ICX_LIKELY(icx_self.stack_countdown))
        icx_self.stack_countdown--;
    else
        icx_self.stack_countdown = icx_stack_rearm(&want);
    return want;
}

#endif
