/* The real functions behind our wrappers: a table slot per function, resolved lazily and
 * thread-safely on first use (LTTng-UST's lazy pointer table; Darshan's FORWARD_DECL/MAP_OR_FAIL
 * pair).  A function that cannot be found resolves to NULL and its wrapper fails open with the
 * API's own error. */
#ifndef ICX_RESOLVE_H
#define ICX_RESOLVE_H

#include "runtime.h"

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

#define ICX_LIB_CUDART "libcudart.so" /* any version: matched against loaded objects */
#define ICX_LIB_NCCL "libnccl.so"
#define ICX_LIB_IBVERBS "libibverbs.so"

#endif
