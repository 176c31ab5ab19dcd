/* clang-format off */
/* The one bracket every hook is written with.  A wrapper reads, in this order:
 *
 *     real = ICX_REAL(name);                      resolve (resolve.h); missing: the API's own error
 *     if (!real)
 *         return <the API's error>;
 *     if (!icx_call_begin(&c, &guard))             off, or re-entered: pass straight through
 *         return real(args);
 *     rc = real(args);                            the real call
 *     icx_call_returned(&c);                      errno as the real call left it, kept
 *     record(..., c.t0, rc);                      the event, into this thread's ring
 *     icx_call_end(&c);                           guard released, errno restored
 *     return rc;                                  the real result, untouched
 *
 * No return is hidden in a macro and nothing here takes a lock.  `guard` is the re-entry guard the
 * hook family uses: &icx_self.guard for most, NCCL's own (nccl.c) so that what NCCL does through
 * other hooked libraries on its thread is still traced. */
/* clang-format on */
#ifndef ICX_HOOK_H
#define ICX_HOOK_H

#include <errno.h>

#include "runtime.h"

struct icx_call {
    uint64_t t0; /* ticks at entry (0 when begun untimed) */
    int saved_errno;
    int *guard;
};

/* This thread's errno without a call to __errno_location on every hook: its address is fixed for
 * the thread's life (and the same in a fork child). */
static inline int *icx_errnop(void)
{
    if (ICX_UNLIKELY(!icx_self.errnop))
        icx_self.errnop = &errno;
    return icx_self.errnop;
}

/* icx_active is not ICX_ON: off (0: pass through), or this may be the process's first traced
 * device call (its baselines first).  The same one comparison on the hot path as a plain on/off
 * test. */
static inline int icx_call_first(int active, const int *guard)
{
    if (!active || icx_self.guard || *guard)
        return 0;
    icx_writer_first_device_call();
    return 1;
}

/* 1: trace this call (the guard is held and t0 taken); 0: pass it straight through. */
static inline int icx_call_begin(struct icx_call *c, int *guard)
{
    int active = atomic_load_explicit(&icx_active, memory_order_relaxed);
    if (ICX_UNLIKELY(active != ICX_ON) && !icx_call_first(active, guard))
        return 0;
    if (icx_self.guard || *guard)
        return 0;
    *guard = 1;
    c->guard = guard;
    c->t0 = icx_ticks();
    return 1;
}

/* The same without the entry timestamp, for data-plane hooks that aggregate and keep no times. */
static inline int icx_call_begin_untimed(struct icx_call *c, int *guard)
{
    int active = atomic_load_explicit(&icx_active, memory_order_relaxed);
    if (ICX_UNLIKELY(active != ICX_ON) && !icx_call_first(active, guard))
        return 0;
    if (icx_self.guard || *guard)
        return 0;
    *guard = 1;
    c->guard = guard;
    c->t0 = 0;
    return 1;
}

/* Right after the real call, always before icx_call_end: what the real call left in errno is what
 * the caller will see. */
static inline void icx_call_returned(struct icx_call *c)
{
    c->saved_errno = *icx_errnop();
}

static inline void icx_call_end(const struct icx_call *c)
{
    *c->guard = 0;
    *icx_errnop() = c->saved_errno;
}

#endif
