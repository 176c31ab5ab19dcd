/* dlsym / dlvsym interposition.  Programs that dlopen() a library and look its functions up
 * (NCCL does this for libibverbs: dlvsym(handle, "ibv_open_device", "IBVERBS_1.1"); Python's
 * ctypes does it for everything, in an RTLD_LOCAL handle) never go
 * through the dynamic linker's symbol binding, so a preloaded definition alone is not enough: the
 * lookup itself has to hand out our wrapper.
 *
 * Three rules:
 *  1. The real dlsym/dlvsym are found without calling dlsym (dlreal.c).
 *  2. Every lookup we do not wrap is passed on with the caller's identity intact.  dlsym's
 *     RTLD_NEXT (and the namespace of RTLD_DEFAULT) depend on the return address of the call;
 *     a C wrapper that calls the real dlsym would make every RTLD_NEXT lookup relative to us.  So
 *     on x86-64 the entry points are a few instructions of assembly that ask icx_dl_decide() and
 *     then *jump* to the real function with the caller's return address still on the stack.
 *  3. Only the names and versions a module wraps are replaced (module.h's dl_wrap, asked by name
 *     prefix), and only when the real lookup found the real function: a caller bound to another
 *     version gets what it asked for. */
#include <errno.h>
#include <string.h>

#include "dl.h"
#include "dlreal.h"
#include "module.h"
#include "runtime.h"

static const struct icx_module *const *_Atomic icx_dl_mods;
static _Atomic size_t icx_dl_nmods;

void icx_dl_use_modules(const struct icx_module *const *mods, size_t nmods)
{
    atomic_store(&icx_dl_nmods, nmods);
    atomic_store(&icx_dl_mods, mods);
}

/* The assembly calls it. */
void *icx_dl_decide(void *handle, const char *name, const char *version);

/* NULL: pass the lookup on untouched.  Otherwise the pointer to return.  Before the constructor
 * handed over the modules (a sanitizer's start-up, other constructors) every lookup passes. */
ICX_NOSAN __attribute__((used)) void *icx_dl_decide(void *handle, const char *name,
                                                    const char *version)
{
    icx_dl_init();
    const struct icx_module *const *mods = atomic_load(&icx_dl_mods);
    if (!mods || !name)
        return NULL;
    size_t n = atomic_load(&icx_dl_nmods);
    for (size_t i = 0; i < n; i++) {
        const char *p = mods[i]->dl_prefix;
        if (!p || !mods[i]->dl_wrap || strncmp(name, p, strlen(p)) != 0)
            continue;
        int saved = errno;
        void *wrapper = mods[i]->dl_wrap(name, version, handle);
        errno = saved;
        return wrapper;
    }
    return NULL;
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
