/* The real NCCL functions: the library's pnccl* alias when it has one (NCCL exports them PMPI
 * style), else the next ncclX.  One slot per function, resolved lazily (resolve.h). */
#ifndef ICX_NCCL_REAL_H
#define ICX_NCCL_REAL_H

#include <nccl.h>

#include "resolve.h"

struct icx_nsym {
    struct icx_sym p, plain;
    _Atomic(void *) fn;
};
#define ICX_NCCL_DECL(name, params)                                                                \
    typedef ncclResult_t(*icx_real_##name##_t) params;                                             \
    static struct icx_nsym icx_nsym_##name = {                                                     \
        {"p" #name, ICX_LIB_NCCL, NULL, NULL, 0}, {#name, ICX_LIB_NCCL, NULL, NULL, 0}, NULL}
#define ICX_NCCL_REAL(name) ((icx_real_##name##_t)icx_nccl_real(&icx_nsym_##name))

static inline void *icx_nccl_real(struct icx_nsym *s)
{
    void *f = atomic_load_explicit(&s->fn, memory_order_acquire);
    if (ICX_LIKELY(f != NULL))
        return f;
    f = icx_resolve(&s->p);
    if (!f)
        f = icx_resolve(&s->plain);
    if (f)
        atomic_store_explicit(&s->fn, f, memory_order_release);
    return f;
}

#endif
