/* dlsym / dlvsym interposition.  Programs that dlopen() a library and look its functions up
 * (NCCL does this for libibverbs: dlvsym(handle, "ibv_open_device", "IBVERBS_1.1"); Python's
 * ctypes does it for everything, in an RTLD_LOCAL handle) never go
 * through the dynamic linker's symbol binding, so a preloaded definition alone is not enough: the
 * lookup itself has to hand out our wrapper.
 *
 * Three rules:
 *  1. The real dlsym/dlvsym are found without calling dlsym (glibc 2.34+ has no __libc_dlsym):
 *     by walking the dynamic symbol table of the loaded libc (or, for older glibc, libdl), found
 *     in the dynamic linker's list (_r_debug).  That path calls no library function and is built
 *     without sanitizer instrumentation: a sanitizer runtime preloaded before us calls dlsym
 *     while it initializes, before its interceptors and shadow memory exist.
 *  2. Every lookup we do not wrap is passed on with the caller's identity intact.  dlsym's
 *     RTLD_NEXT (and the namespace of RTLD_DEFAULT) depend on the return address of the call;
 *     a C wrapper that calls the real dlsym would make every RTLD_NEXT lookup relative to us.  So
 *     on x86-64 the entry points are a few instructions of assembly that ask icx_dl_decide() and
 *     then *jump* to the real function with the caller's return address still on the stack.
 *  3. Only the names and versions we wrap are replaced (icx_dl_wrap), and only when the real
 *     lookup found the real function: a caller bound to another version gets what it asked for. */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <string.h>

#include "icx.h"

#define ICX_EXPORT __attribute__((visibility("default")))
#define ICX_NOSAN __attribute__((no_sanitize("address", "undefined")))

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
__attribute__((used)) void *(*icx_real_dlsym)(void *, const char *) = icx_dl_missing;
__attribute__((used)) void *(*icx_real_dlvsym)(void *, const char *, const char *) = icx_dlv_missing;

/* The default-version definition of `name` in one loaded object, from its .dynsym.  The symbol
 * count comes from DT_HASH, or from DT_GNU_HASH's buckets and chains. */
ICX_NOSAN static void *icx_dynsym_lookup(uintptr_t base, const ElfW(Dyn) *dyn, const char *name)
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

ICX_NOSAN static void icx_dl_init(void)
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

/* NULL: pass the lookup on untouched.  Otherwise the pointer to return. */
ICX_NOSAN __attribute__((used)) void *icx_dl_decide(void *handle, const char *name, const char *version)
{
    icx_dl_init();
    if (!name || name[0] == 0 || name[1] == 0 || name[2] == 0 || name[3] == 0)
        return NULL;
    int ibv = name[0] == 'i' && name[1] == 'b' && name[2] == 'v' && name[3] == '_';
    int nccl = name[0] == 'n' && name[1] == 'c' && name[2] == 'c' && name[3] == 'l';
    if (!ibv && !nccl)
        return NULL;
    int saved = errno;
    void *wrapper = ibv ? icx_dl_wrap(name, version, handle) : icx_dl_wrap_nccl(name, version, handle);
    errno = saved;
    return wrapper;
}

#if defined(__x86_64__) && !defined(ICX_TEST_PLAIN_DLSYM)
/* dlsym(handle, name) / dlvsym(handle, name, version): keep the arguments, ask icx_dl_decide,
 * return its answer or tail-jump to the real function.  At entry %rsp is 8 mod 16; the pushes
 * (and the pad for dlsym) realign it for the call. */
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        ".cfi_startproc\n"
        "  push %rdi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "  push %rsi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "  sub $8, %rsp\n"
        ".cfi_adjust_cfa_offset 8\n"
        "  xor %edx, %edx\n"
        "  call icx_dl_decide\n"
        "  add $8, %rsp\n"
        ".cfi_adjust_cfa_offset -8\n"
        "  pop %rsi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "  pop %rdi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "  test %rax, %rax\n"
        "  jnz 1f\n"
        "  jmp *icx_real_dlsym(%rip)\n"
        "1: ret\n"
        ".cfi_endproc\n"
        ".size dlsym, .-dlsym\n"
        ".globl dlvsym\n"
        ".type dlvsym, @function\n"
        "dlvsym:\n"
        ".cfi_startproc\n"
        "  push %rdi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "  push %rsi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "  push %rdx\n"
        ".cfi_adjust_cfa_offset 8\n"
        "  call icx_dl_decide\n"
        "  pop %rdx\n"
        ".cfi_adjust_cfa_offset -8\n"
        "  pop %rsi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "  pop %rdi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "  test %rax, %rax\n"
        "  jnz 2f\n"
        "  jmp *icx_real_dlvsym(%rip)\n"
        "2: ret\n"
        ".cfi_endproc\n"
        ".size dlvsym, .-dlvsym\n");
#else
/* Elsewhere a plain call: RTLD_NEXT lookups passed on are then relative to libicxtrace, not to
 * their caller (docs/RELIABILITY.md). */
ICX_EXPORT void *dlsym(void *handle, const char *name)
{
    void *w = icx_dl_decide(handle, name, NULL);
    return w ? w : icx_real_dlsym(handle, name);
}
ICX_EXPORT void *dlvsym(void *handle, const char *name, const char *version)
{
    void *w = icx_dl_decide(handle, name, version);
    return w ? w : icx_real_dlvsym(handle, name, version);
}
#endif
