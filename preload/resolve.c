/* Lazy, thread-safe resolution of the real functions behind our wrappers.  RTLD_NEXT first; when
 * that finds nothing (the library was dlopen'ed RTLD_LOCAL, so it is not in the global scope), an
 * RTLD_NOLOAD handle of the library itself.  A failure is not cached: the library may be loaded
 * later.  Races are benign: every thread stores the same pointer. */
#include <dlfcn.h>

#include "icx.h"

void *icx_resolve_slow(struct icx_sym *s)
{
    void *p = dlsym(RTLD_NEXT, s->name);
    if (!p && s->lib) {
        void *h = dlopen(s->lib, RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            p = dlsym(h, s->name);
            dlclose(h); /* drops only the reference NOLOAD took */
        }
    }
    if (p) {
        /* Never hand back one of our own wrappers: that would recurse forever. */
        Dl_info self, found;
        if (dladdr((void *)icx_resolve_slow, &self) && dladdr(p, &found) &&
            self.dli_fbase == found.dli_fbase) {
            icx_debug("resolve: %s resolved to ourselves; treating as missing\n", s->name);
            return NULL;
        }
        atomic_store_explicit(&s->fn, p, memory_order_release);
    } else {
        icx_debug("resolve: %s not found\n", s->name);
    }
    return p;
}
