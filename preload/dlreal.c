/* The real dlsym/dlvsym.  glibc 2.34+ has no __libc_dlsym, and calling dlsym to find dlsym would
 * reach our own: so they are read from the dynamic symbol table of the loaded libc (or, for older
 * glibc, libdl), found in the dynamic linker's list (_r_debug).  That path calls no library
 * function and is built without sanitizer instrumentation: a sanitizer runtime preloaded before
 * us calls dlsym while it initializes, before its interceptors and shadow memory exist. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include "dlreal.h"
#include "runtime.h"

extern struct r_debug _r_debug; /* the dynamic linker's list of loaded objects */

ICX_NOSAN static int icx_streq(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

static void *icx_dl_missing(void *h, const char *name)
{
    (void)h;
    (void)name;
    return NULL;
}
static void *icx_dlv_missing(void *h, const char *name, const char *ver)
{
    (void)h;
    (void)name;
    (void)ver;
    return NULL;
}

/* Never NULL: the assembly jumps through them. */
void *(*icx_real_dlsym)(void *, const char *) = icx_dl_missing;
void *(*icx_real_dlvsym)(void *, const char *, const char *) = icx_dlv_missing;

typedef ElfW(Dyn) icx_elf_dyn; /* one name: clang-format reads ElfW(Dyn) *p as a product */

/* The default-version definition of `name` in one loaded object, from its .dynsym.  The symbol
 * count comes from DT_HASH, or from DT_GNU_HASH's buckets and chains. */
ICX_NOSAN static void *icx_dynsym_lookup(uintptr_t base, const icx_elf_dyn *dyn, const char *name)
{
    if (!dyn)
        return NULL;
    uintptr_t symtab = 0, strtab = 0, hash = 0, gnuhash = 0, versym = 0;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        /* ld.so relocates these in place on most targets; where it does not, they are offsets. */
        uintptr_t v = dyn->d_un.d_ptr < base ? base + dyn->d_un.d_ptr : dyn->d_un.d_ptr;
        switch (dyn->d_tag) {
        case DT_SYMTAB: symtab = v; break;
        case DT_STRTAB: strtab = v; break;
        case DT_HASH: hash = v; break;
        case DT_GNU_HASH: gnuhash = v; break;
        case DT_VERSYM: versym = v; break;
        }
    }
    if (!symtab || !strtab)
        return NULL;
    size_t nsyms = 0;
    if (hash) {
        nsyms = ((const uint32_t *)hash)[1];
    } else if (gnuhash) {
        const uint32_t *h = (const uint32_t *)gnuhash;
        uint32_t nbuckets = h[0], symoffset = h[1], bloom = h[2];
        const uint32_t *buckets = (const uint32_t *)(h + 4 + bloom * (sizeof(ElfW(Addr)) / 4));
        const uint32_t *chain = buckets + nbuckets;
        uint32_t last = 0;
        for (uint32_t b = 0; b < nbuckets; b++)
            if (buckets[b] > last)
                last = buckets[b];
        if (last >= symoffset) {
            while (!(chain[last - symoffset] & 1))
                last++;
            nsyms = last + 1;
        }
    }
    const ElfW(Sym) *syms = (const ElfW(Sym) *)symtab;
    const ElfW(Half) *vs = (const ElfW(Half) *)versym;
    for (size_t i = 1; i < nsyms; i++) {
        const ElfW(Sym) *s = &syms[i];
        if (s->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s->st_info) != STT_FUNC)
            continue;
        if (vs && (vs[i] & 0x8000)) /* a hidden (non-default) version */
            continue;
        if (icx_streq((const char *)strtab + s->st_name, name))
            return (void *)(base + s->st_value);
    }
    return NULL;
}

ICX_NOSAN static void *icx_libc_func(const char *name)
{
    static const char *const libs[] = {"libc.so.6", "libdl.so.2"};
    for (unsigned k = 0; k < 2; k++)
        for (const struct link_map *m = _r_debug.r_map; m; m = m->l_next) {
            const char *base = m->l_name, *c;
            for (c = m->l_name; c && *c; c++)
                if (*c == '/')
                    base = c + 1;
            if (!base || !icx_streq(base, libs[k]))
                continue;
            void *p = icx_dynsym_lookup(m->l_addr, m->l_ld, name);
            if (p)
                return p;
        }
    return NULL;
}

static _Atomic int icx_dl_ready;

ICX_NOSAN void icx_dl_init(void)
{
    if (atomic_load_explicit(&icx_dl_ready, memory_order_acquire))
        return;
    void *s = icx_libc_func("dlsym"), *v = icx_libc_func("dlvsym");
    if (s)
        icx_real_dlsym = (void *(*)(void *, const char *))s;
    if (v)
        icx_real_dlvsym = (void *(*)(void *, const char *, const char *))v;
    if (!s || !v)
        icx_log("cannot find the C library's dlsym/dlvsym: dynamic lookups will fail\n");
    atomic_store_explicit(&icx_dl_ready, 1, memory_order_release);
}

void *icx_dlsym_real(void *handle, const char *name)
{
    icx_dl_init();
    return icx_real_dlsym(handle, name);
}

void *icx_dlvsym_real(void *handle, const char *name, const char *version)
{
    icx_dl_init();
    return icx_real_dlvsym(handle, name, version);
}
