/* Lazy, thread-safe resolution of the real functions behind our wrappers.  RTLD_NEXT first; when
 * that finds nothing (the library was loaded into a dlopen(RTLD_LOCAL) group, as Python loads
 * PyTorch's extension modules and with them libcudart, so it is not in the global scope), an
 * RTLD_NOLOAD handle of whichever loaded object's name contains the library's base name
 * ("libcudart.so" matches .so.12 and .so.13 alike).  A failure is remembered for 50 ms, not for
 * good: the library may be loaded later, but a process that never loads it (NCCL with cudart
 * linked in statically, no libcudart.so) must not pay two symbol-table walks on every call that
 * asks -- measured at ~900 ns per NCCL call.  Races are benign: every thread stores the same
 * pointer. */
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "dlreal.h"
#include "resolve.h"

struct icx_find {
    const char *base;
    char path[4096];
};

static int icx_find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct icx_find *f = data;
    const char *name = info->dlpi_name;
    if (!name || !*name)
        return 0;
    const char *slash = strrchr(name, '/');
    if (strncmp(slash ? slash + 1 : name, f->base, strlen(f->base)) != 0)
        return 0;
    size_t l = strlen(name);
    if (l >= sizeof(f->path))
        return 0;
    memcpy(f->path, name, l + 1);
    return 1;
}

static void *icx_lookup_loaded(const char *base, const char *sym, const char *version)
{
    struct icx_find f = {base, ""};
    if (!dl_iterate_phdr(icx_find_cb, &f))
        return NULL;
    void *h = dlopen(f.path, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return NULL;
    void *p = version ? icx_dlvsym_real(h, sym, version) : icx_dlsym_real(h, sym);
    dlclose(h); /* drops only the reference RTLD_NOLOAD took */
    return p;
}

#define ICX_RESOLVE_RETRY_NS 50000000ull

void *icx_resolve_slow(struct icx_sym *s)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    if (now < atomic_load_explicit(&s->retry_ns, memory_order_relaxed))
        return NULL;
    /* Called from here, so RTLD_NEXT means "after libicxtrace". */
    void *p = s->version ? icx_dlvsym_real(RTLD_NEXT, s->name, s->version)
                         : icx_dlsym_real(RTLD_NEXT, s->name);
    if (!p && s->lib)
        p = icx_lookup_loaded(s->lib, s->name, s->version);
    if (p) {
        /* Never hand back one of our own wrappers: that would recurse forever. */
        Dl_info self, found;
        if (dladdr((void *)icx_resolve_slow, &self) && dladdr(p, &found) &&
            self.dli_fbase == found.dli_fbase) {
            icx_debug("resolve: %s resolved to ourselves; treating as missing\n", s->name);
            atomic_store_explicit(&s->retry_ns, now + ICX_RESOLVE_RETRY_NS, memory_order_relaxed);
            return NULL;
        }
        atomic_store_explicit(&s->fn, p, memory_order_release);
    } else {
        atomic_store_explicit(&s->retry_ns, now + ICX_RESOLVE_RETRY_NS, memory_order_relaxed);
        icx_debug("resolve: %s not found\n", s->name);
    }
    return p;
}
